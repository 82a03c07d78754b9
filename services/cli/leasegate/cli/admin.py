"""Operator commands that talk to a running control plane's admin API:

    leasegate accounts list
    leasegate accounts disable|enable|drain ID --reason TEXT [--on-behalf-of NAME]
    leasegate audit verify
    leasegate tenants list | budget TENANT ...   (leasegate.cli.tenants)

`--url` (default http://127.0.0.1:8080) names the control plane; the token is `--token` or
LEASEGATE_ADMIN_TOKEN. Exit codes: 0 done (for `audit verify`: the chain is ok), 1 refused
(by the control plane, or by its body's own model before sending: `invalid-request`) or
corrupt, 2 usage or connection problem, 3 `audit verify` on a chain with no records.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from leasegate.cli.tenants import add_tenants_command, run_tenants
from leasegate.cli.usage import add_usage_command, print_usage
from leasegate.core.records import AdminState

if TYPE_CHECKING:  # imported when a command runs: a server process never needs httpx
    from leasegate.client import ControlClient

ADMIN_COMMANDS = frozenset({"accounts", "audit", "usage", "tenants"})
DEFAULT_URL = "http://127.0.0.1:8080"
_STATES: dict[str, AdminState] = {"disable": "disabled", "enable": "enabled", "drain": "draining"}


class ClientSettings(BaseSettings):
    """What an operator's shell provides; the server's own settings are not needed here."""

    model_config = SettingsConfigDict(env_prefix="LEASEGATE_", extra="ignore")

    admin_token: SecretStr | None = None
    control_token: SecretStr | None = None
    """Enough for the read-only `usage`."""


def add_admin_commands(commands: Any) -> None:
    """Register `accounts` and `audit` on the top-level subparsers."""
    accounts = commands.add_parser("accounts", help="list accounts or change one's admin state")
    actions = accounts.add_subparsers(dest="action", required=True)
    _client_options(actions.add_parser("list", help="every account and its admin state"))
    for action, state in _STATES.items():
        parser = actions.add_parser(action, help=f"mark an account {state}")
        parser.add_argument("account_id")
        parser.add_argument("--reason", required=True)
        parser.add_argument("--on-behalf-of", default=None)
        _client_options(parser)
    audit = commands.add_parser("audit", help="the admin audit chain")
    audit_actions = audit.add_subparsers(dest="action", required=True)
    _client_options(audit_actions.add_parser("verify", help="exit 0 only when the chain is ok"))
    add_usage_command(commands, _client_options)
    add_tenants_command(commands, _client_options)


def _client_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=DEFAULT_URL, help="the control plane's base URL")
    parser.add_argument("--token", default=None, help="admin token (or LEASEGATE_ADMIN_TOKEN)")


def run_admin(args: argparse.Namespace) -> int:
    token = args.token or _env_token(read_only=args.command == "usage")
    if not token:
        sys.stderr.write(
            "leasegate: no token: set LEASEGATE_ADMIN_TOKEN (LEASEGATE_CONTROL_TOKEN will do"
            " for usage) or pass --token\n"
        )
        return 2
    from leasegate.client import ControlClient, ControlUnreachable, GatewayRefusal, ProtocolError

    try:
        with ControlClient(args.url.rstrip("/"), token, timeout_s=30) as control:
            if args.command == "audit":
                return _verify(control)
            if args.command == "usage":
                return print_usage(control, args)
            if args.command == "tenants":
                return run_tenants(control, args)
            if args.action == "list":
                return _list(control)
            return _change(control, args)
    except GatewayRefusal as refused:
        sys.stderr.write(f"leasegate: HTTP {refused}\n")
        return 1
    except ValidationError as invalid:  # the request body's model refused it: nothing sent
        sys.stderr.write(f"leasegate: invalid-request (not sent): {_problems(invalid)}\n")
        return 1
    except ControlUnreachable as exc:
        sys.stderr.write(f"leasegate: cannot reach {args.url}: {exc}\n")
        return 2
    except ProtocolError:
        sys.stderr.write(f"leasegate: {args.url} answered a body this command cannot read\n")
        return 2


def _problems(invalid: ValidationError) -> str:
    """What the body's model said, by field; never the value given."""
    said = []
    for error in invalid.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        said.append(f"{where}: {message}" if where else message)
    return "; ".join(said)


def _env_token(*, read_only: bool = False) -> str | None:
    settings = ClientSettings()
    token = settings.admin_token or (settings.control_token if read_only else None)
    return token.get_secret_value() if token is not None else None


def _list(control: ControlClient) -> int:
    view = control.accounts()
    out = [f"revision {view.revision}  chain {view.chain}"]
    out.append(f"{'ACCOUNT':<32} {'ADMIN':<10} {'HEALTH':<13} {'LEASES':>6}  CONFIGURED")
    for a in view.accounts:
        out.append(
            f"{a.id:<32} {a.admin_state:<10} {a.health:<13} "
            f"{a.leases_held:>6}  {'yes' if a.configured else 'no'}"
        )
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def _change(control: ControlClient, args: argparse.Namespace) -> int:
    # the chain's revision now: a concurrent change by another operator then answers 409
    # rather than being overwritten
    view = control.set_account_state(
        args.account_id,
        _STATES[args.action],
        expected_revision=control.accounts().revision,
        reason=args.reason,
        on_behalf_of=args.on_behalf_of,
    )
    sys.stdout.write(
        f"{view.id}: {view.admin_state} at revision {view.revision}"
        f" ({view.revoked_keys} keys revoked)\n"
    )
    return 0


def _verify(control: ControlClient) -> int:
    audit = control.audit()
    line = f"chain {audit.chain}  revision {audit.revision}"
    if audit.chain == "corrupt":
        line += f"  first_bad_seq {audit.first_bad_seq}  ({audit.problem})"
    sys.stdout.write(line + "\n")
    return {"ok": 0, "absent": 3}.get(audit.chain, 1)

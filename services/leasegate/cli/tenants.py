"""`leasegate tenants`: tenants' budgets per period, through the control plane's admin API.

    leasegate tenants list
    leasegate tenants budget TENANT --period day|month [--max-tokens N] [--max-cost AMOUNT]
                             --reason TEXT [--on-behalf-of NAME]
    leasegate tenants budget TENANT --clear --reason TEXT

A change reads the chain's current revision first and sends it as `expected_revision`, so a
concurrent change by another operator answers 409 rather than being overwritten silently.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

Refused = Callable[["httpx.Response"], int]


def add_tenants_command(commands: Any, client_options: Callable[[Any], None]) -> None:
    tenants = commands.add_parser("tenants", help="tenants' budgets per day or month")
    actions = tenants.add_subparsers(dest="action", required=True)
    client_options(actions.add_parser("list", help="every budgeted tenant and its spend"))
    budget = actions.add_parser("budget", help="set or clear a tenant's budget")
    budget.add_argument("tenant")
    budget.add_argument("--period", choices=("day", "month"), default=None)
    budget.add_argument("--max-tokens", type=int, default=None)
    budget.add_argument("--max-cost", default=None, help='a decimal amount, e.g. "25.00"')
    budget.add_argument("--clear", action="store_true", help="remove the tenant's budget")
    budget.add_argument("--reason", required=True)
    budget.add_argument("--on-behalf-of", default=None)
    client_options(budget)


def run_tenants(client: httpx.Client, args: argparse.Namespace, refused: Refused) -> int:
    if args.action == "list":
        return _list(client, refused)
    return _set(client, args, refused)


def _list(client: httpx.Client, refused: Refused) -> int:
    response = client.get("/control/v2/tenants")
    if response.status_code != 200:
        return refused(response)
    view = response.json()
    out = [f"revision {view['revision']}  chain {view['chain']}  {view.get('currency') or ''}"]
    out.append(f"{'TENANT':<32} {'PERIOD':<6} {'MAX_TOKENS':>12} {'MAX_COST':>12} SPENT")
    for t in view["tenants"]:
        budget, spent = t["budget"], t["spent"]
        out.append(
            f"{t['tenant']:<32} {budget['period']:<6} {_cell(budget['max_tokens']):>12} "
            f"{_cell(budget['max_cost']):>12} {spent['tokens']} tokens, {_cell(spent['cost'])}"
            f"{'  EXHAUSTED' if spent['exhausted'] else ''}"
        )
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def _set(client: httpx.Client, args: argparse.Namespace, refused: Refused) -> int:
    current = client.get("/control/v2/accounts")
    if current.status_code != 200:
        return refused(current)
    body: dict[str, Any] = {
        "expected_revision": current.json()["revision"],
        "reason": args.reason,
        "on_behalf_of": args.on_behalf_of,
    }
    if args.clear:
        body["clear"] = True
    else:
        body.update(period=args.period, max_tokens=args.max_tokens, max_cost=args.max_cost)
    response = client.post(f"/control/v2/tenants/{args.tenant}/budget", json=body)
    if response.status_code != 200:
        return refused(response)
    view = response.json()
    budget = view["budget"]
    if budget is None:
        described = "no budget"
    else:
        bounds = [f"{budget['max_tokens']} tokens"] if budget["max_tokens"] else []
        if budget["max_cost"]:
            bounds.append(f"{budget['max_cost']} {view.get('currency') or ''}".rstrip())
        described = f"{' and '.join(bounds)} per {budget['period']}"
    sys.stdout.write(f"{view['tenant']}: {described} at revision {view['revision']}\n")
    return 0


def _cell(value: object) -> str:
    return "-" if value is None else str(value)

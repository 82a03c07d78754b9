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
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from leasegate.wire import money

if TYPE_CHECKING:  # imported when a command runs: a server process never needs httpx
    from leasegate.client import ControlClient


def add_tenants_command(commands: Any, client_options: Callable[[Any], None]) -> None:
    tenants = commands.add_parser("tenants", help="tenants' budgets per day or month")
    actions = tenants.add_subparsers(dest="action", required=True)
    client_options(actions.add_parser("list", help="every budgeted tenant and its spend"))
    budget = actions.add_parser("budget", help="set or clear a tenant's budget")
    budget.add_argument("tenant")
    budget.add_argument("--period", choices=("day", "month"), default=None)
    budget.add_argument("--max-tokens", type=int, default=None)
    budget.add_argument(
        "--max-cost", type=Decimal, default=None, help='a decimal amount, e.g. "25.00"'
    )
    budget.add_argument("--clear", action="store_true", help="remove the tenant's budget")
    budget.add_argument("--reason", required=True)
    budget.add_argument("--on-behalf-of", default=None)
    client_options(budget)


def run_tenants(control: ControlClient, args: argparse.Namespace) -> int:
    if args.action == "list":
        return _list(control)
    return _set(control, args)


def _list(control: ControlClient) -> int:
    view = control.tenants()
    out = [f"revision {view.revision}  chain {view.chain}  {view.currency or ''}"]
    out.append(f"{'TENANT':<32} {'PERIOD':<6} {'MAX_TOKENS':>12} {'MAX_COST':>12} SPENT")
    for t in view.tenants:
        budget, spent = t.budget, t.spent
        period, max_tokens = (budget.period, budget.max_tokens) if budget else (None, None)
        max_cost = money(budget.max_cost) if budget else None
        used = f"{spent.tokens} tokens, {money(spent.cost)}" if spent else "-"
        out.append(
            f"{t.tenant:<32} {_cell(period):<6} {_cell(max_tokens):>12} {_cell(max_cost):>12} "
            f"{used}{'  EXHAUSTED' if spent and spent.exhausted else ''}"
        )
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def _set(control: ControlClient, args: argparse.Namespace) -> int:
    view = control.set_tenant_budget(
        args.tenant,
        expected_revision=control.accounts().revision,
        reason=args.reason,
        on_behalf_of=args.on_behalf_of,
        clear=args.clear,
        period=args.period,
        max_tokens=args.max_tokens,
        max_cost=args.max_cost,
    )
    budget = view.budget
    if budget is None:
        described = "no budget"
    else:
        bounds = [f"{budget.max_tokens} tokens"] if budget.max_tokens else []
        if budget.max_cost:
            bounds.append(f"{money(budget.max_cost)} {view.currency or ''}".rstrip())
        described = f"{' and '.join(bounds)} per {budget.period}"
    sys.stdout.write(f"{view.tenant}: {described} at revision {view.revision}\n")
    return 0


def _cell(value: object) -> str:
    return "-" if value is None else str(value)

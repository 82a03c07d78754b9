"""Changing a tenant's budget: the one step the API's `POST /tenants/{tenant}/budget` and the
console's Spend page both take. The body (`TenantBudgetBody`) has already been validated; the
change is appended to the audit chain (refused with `revision-conflict` when the chain moved
since `expected_revision`), then the tenant's running total is brought up to date."""

from __future__ import annotations

from leasegate.audit import AuditRecord, BudgetFields
from leasegate.control_plane.overlay import AdminOverlay, BudgetChange
from leasegate.control_plane.spend_reconcile import SpendReconciler
from leasegate.wire import TenantBudgetBody


async def change_budget(
    overlay: AdminOverlay,
    reconciler: SpendReconciler,
    tenant: str,
    body: TenantBudgetBody,
    actor: str,
) -> AuditRecord:
    """Set or clear `tenant`'s budget as `actor` (the operator token's name); the record."""
    change = BudgetChange(
        budget=_fields(tenant, body),
        expected_revision=body.expected_revision,
        reason=body.reason,
        actor=actor,
        on_behalf_of=body.on_behalf_of,
    )
    record, _ = await overlay.mutate(change)
    await reconciler.budget_set(tenant)
    return record


def _fields(tenant: str, body: TenantBudgetBody) -> BudgetFields:
    """What the chain's `tenant-budget` record sets: nothing at all clears the budget."""
    if body.clear:
        return BudgetFields(tenant)
    return BudgetFields(tenant, body.period, body.max_tokens, body.max_cost)

"""The admin overlay as a tamper-evident audit chain: pure encoding, linking, fold, verify."""

from leasegate.audit.chain import (
    ACCOUNT_STATE,
    GENESIS,
    TENANT_BUDGET,
    Anchor,
    AuditRecord,
    BudgetFields,
    Entry,
    anchor_for,
    link,
    record_hash,
    rehashed,
)
from leasegate.audit.fold import (
    KNOWN_STATES,
    ChainVerdict,
    extend,
    fold,
    folded_budget,
    folded_state,
)

__all__ = [
    "ACCOUNT_STATE",
    "GENESIS",
    "KNOWN_STATES",
    "TENANT_BUDGET",
    "Anchor",
    "AuditRecord",
    "BudgetFields",
    "ChainVerdict",
    "Entry",
    "anchor_for",
    "extend",
    "fold",
    "folded_budget",
    "folded_state",
    "link",
    "record_hash",
    "rehashed",
]

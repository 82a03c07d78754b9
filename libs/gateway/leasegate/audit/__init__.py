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
    CHAIN_DOES_NOT_VERIFY,
    KNOWN_STATES,
    ChainVerdict,
    corrupt_error,
    extend,
    fold,
    folded_budget,
    folded_state,
    held_while_corrupt,
)

__all__ = [
    "ACCOUNT_STATE",
    "CHAIN_DOES_NOT_VERIFY",
    "GENESIS",
    "KNOWN_STATES",
    "TENANT_BUDGET",
    "Anchor",
    "AuditRecord",
    "BudgetFields",
    "ChainVerdict",
    "Entry",
    "anchor_for",
    "corrupt_error",
    "extend",
    "fold",
    "folded_budget",
    "folded_state",
    "held_while_corrupt",
    "link",
    "record_hash",
    "rehashed",
]

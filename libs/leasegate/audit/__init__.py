"""The admin overlay as a tamper-evident audit chain: pure encoding, linking, fold, verify."""

from leasegate.audit.chain import (
    GENESIS,
    Anchor,
    AuditRecord,
    Entry,
    anchor_for,
    link,
    record_hash,
    rehashed,
)
from leasegate.audit.fold import (
    KNOWN_STATES,
    AdminState,
    ChainVerdict,
    extend,
    fold,
    folded_state,
)

__all__ = [
    "GENESIS",
    "KNOWN_STATES",
    "AdminState",
    "Anchor",
    "AuditRecord",
    "ChainVerdict",
    "Entry",
    "anchor_for",
    "extend",
    "fold",
    "folded_state",
    "link",
    "record_hash",
    "rehashed",
]

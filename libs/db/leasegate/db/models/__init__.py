"""The tables, one module each. Importing this package registers them all on Base.metadata."""

from leasegate.db.models.account_lease import AccountLeaseRow
from leasegate.db.models.audit_anchor import ANCHOR_ID, AuditAnchorRow
from leasegate.db.models.audit_record import AuditRecordRow
from leasegate.db.models.base import Base, UTCDateTime
from leasegate.db.models.evidence import EvidenceRecordRow
from leasegate.db.models.key import KeyRow, live_dispatch_of
from leasegate.db.models.mint_decision import MintDecisionRow

__all__ = [
    "ANCHOR_ID",
    "AccountLeaseRow",
    "AuditAnchorRow",
    "AuditRecordRow",
    "Base",
    "EvidenceRecordRow",
    "KeyRow",
    "MintDecisionRow",
    "UTCDateTime",
    "live_dispatch_of",
]

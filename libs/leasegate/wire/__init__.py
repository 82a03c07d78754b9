"""The control plane's response bodies, each defined once as a typed model.

The control plane declares these as its routes' `response_model` (so its OpenAPI document
describes what it sends) and builds its answers as them; the client (`leasegate.client`)
parses every answer with them and hands them to its callers as they are. Pure: pydantic and
the gateway's own values only, no framework, store or HTTP client, so an installed client
imports this without FastAPI.
"""

from leasegate.core.envelope import Envelope, ErrorBody
from leasegate.wire.accounts import (
    Account,
    AccountRead,
    Accounts,
    AccountStateChanged,
    Circuit,
    Cooling,
    ModelQuota,
    QuotaBucket,
    SpendToday,
)
from leasegate.wire.audit import (
    AccountStateRecord,
    AuditRecordView,
    AuditReport,
    TenantBudgetRecord,
)
from leasegate.wire.base import Instant, Money, Time, WireModel, money
from leasegate.wire.decisions import Decision, DecisionList, Evidence, EvidenceList, Lineage
from leasegate.wire.keys import Budget, KeyInfo, MintAnswer, PassOver
from leasegate.wire.tenants import (
    Tenant,
    TenantBudget,
    TenantBudgetChanged,
    TenantRead,
    Tenants,
    TenantSpent,
)
from leasegate.wire.usage import UsageGroup, UsageReport

__all__ = [
    "Account",
    "AccountRead",
    "AccountStateChanged",
    "AccountStateRecord",
    "Accounts",
    "AuditRecordView",
    "AuditReport",
    "Budget",
    "Circuit",
    "Cooling",
    "Decision",
    "DecisionList",
    "Envelope",
    "ErrorBody",
    "Evidence",
    "EvidenceList",
    "Instant",
    "KeyInfo",
    "Lineage",
    "MintAnswer",
    "ModelQuota",
    "Money",
    "PassOver",
    "QuotaBucket",
    "SpendToday",
    "Tenant",
    "TenantBudget",
    "TenantBudgetChanged",
    "TenantBudgetRecord",
    "TenantRead",
    "TenantSpent",
    "Tenants",
    "Time",
    "UsageGroup",
    "UsageReport",
    "WireModel",
    "money",
]

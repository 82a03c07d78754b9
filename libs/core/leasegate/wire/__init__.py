"""The control plane's request and response bodies, each defined once as a typed model.

The control plane declares the responses as its routes' `response_model` (so its OpenAPI
document describes what it sends) and builds its answers as them; the client
(`leasegate.client`) parses every answer with them and hands them to its callers as they are.
The request bodies (`MintBody`, `RenewBody`, `StateBody`, `TenantBudgetBody`, ...) are what the
control plane reads and what the client builds and sends. Pure: pydantic and
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
    StateBody,
)
from leasegate.wire.audit import (
    AccountStateRecord,
    AuditedBody,
    AuditRecordView,
    AuditReport,
    TenantBudgetRecord,
)
from leasegate.wire.base import Instant, Money, Time, WireModel, money
from leasegate.wire.decisions import Decision, DecisionList, Evidence, EvidenceList, Lineage
from leasegate.wire.fields import RequestBody
from leasegate.wire.keys import (
    Budget,
    BudgetBody,
    KeyInfo,
    MintAnswer,
    MintBody,
    PassOver,
    RenewBody,
)
from leasegate.wire.tenants import (
    Tenant,
    TenantBudget,
    TenantBudgetBody,
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
    "AuditedBody",
    "Budget",
    "BudgetBody",
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
    "MintBody",
    "ModelQuota",
    "Money",
    "PassOver",
    "QuotaBucket",
    "RenewBody",
    "RequestBody",
    "SpendToday",
    "StateBody",
    "Tenant",
    "TenantBudget",
    "TenantBudgetBody",
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

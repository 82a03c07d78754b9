"""What the operator console's pages use, named: built once by the composition root
(`runtime.ControlRuntime`), so no page reaches a concrete store or the runtime itself.

Each field is a port (`leasegate.core.ports`), a small service or the API's own dependency
object where a page takes the API's own path (a state change through `AdminDeps`, a budget
change through `TenantDeps`, the pool through `AccountsDeps`), so a test builds one over the
in-memory twins as the service tests build `MintDeps`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pydantic import SecretStr

from leasegate.accounts import Registry
from leasegate.control_plane.accounts import AccountsDeps
from leasegate.control_plane.admin import AdminDeps
from leasegate.control_plane.callers import Callers
from leasegate.control_plane.deps import OverlayRecords
from leasegate.control_plane.keys import Revoking
from leasegate.control_plane.tenants import TenantDeps
from leasegate.core.clock import Clock
from leasegate.core.ports.browse import Browse
from leasegate.core.ports.sessions import ConsoleSessions
from leasegate.core.ports.storage import DecisionEvidenceReader, KeyReader
from leasegate.core.ports.usage import UsageReader
from leasegate.core.ports.witness import AuditWitness


class ConsoleRecords(DecisionEvidenceReader, KeyReader, Protocol):
    """The rows the read pages show: decisions, evidence and keys (`leasegate.db.Store`
    and its in-memory twin implement it)."""


@dataclass(frozen=True, slots=True)
class SessionDeps:
    """What signing in and keeping a session use (`web.ConsoleAuth`)."""

    callers: Callers
    """The configured tokens, the failed-authentication budget the API's bearer tokens share,
    and the clock."""
    open_sessions: ConsoleSessions
    """The open sessions every replica shares."""
    secret: SecretStr | None
    """The cookies' HMAC key (`LEASEGATE_CONSOLE_SECRET`); None: a random one per process."""
    ttl_s: float
    """How long a session lasts."""


@dataclass(frozen=True, slots=True)
class ConsoleDeps:
    """Every console page's collaborators; each page group reads the fields it names."""

    sessions: SessionDeps
    """Sign-in, sign-out and every page's session."""
    clock: Clock
    registry: Registry
    """The accounts and models the filters offer, the currency."""
    accounts: AccountsDeps
    """The pool grid: the accounts view the API serves."""
    overlay: OverlayRecords
    """The audit chain's records: the Audit page, who changed an account, a form's record."""
    admin: AdminDeps
    """Actions: an account's state changed as the API's route changes it."""
    tenants: TenantDeps
    """Spend: the budgets view and a budget changed as the API's route changes it."""
    usage: UsageReader
    """Spend: usage per tenant, account, model and day."""
    records: ConsoleRecords
    """Dispatches, Evidence, Keys: decisions, evidence rows and keys."""
    browse: Browse
    """Keys, Dispatches, Traffic: the console's own bounded reads."""
    witness: AuditWitness
    """Audit: the chain's witness, shown beside it."""
    revoker: Revoking
    """Keys: ending a key as the API's route does."""

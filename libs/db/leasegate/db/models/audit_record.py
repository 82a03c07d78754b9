"""`audit_records`: the admin overlay's audit chain, one row per mutation, append-only.

On Postgres the migration adds triggers that refuse UPDATE, DELETE and TRUNCATE (on SQLite,
UPDATE and DELETE), so changing history takes the owner's deliberate act (disabling them),
and the hash chain then tells.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from leasegate.db.models.base import Base


class AuditRecordRow(Base):
    __tablename__ = "audit_records"

    # The chain assigns seq itself; two writers racing for the same seq collide on this key.
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    at: Mapped[datetime]
    actor: Mapped[str] = mapped_column(Text)
    authenticated_by: Mapped[str] = mapped_column(String(64))
    on_behalf_of: Mapped[str | None] = mapped_column(Text)
    account_id: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text)
    revoked_keys: Mapped[int] = mapped_column(Integer)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))
    # tenant budgets (record kind `tenant-budget`); every row written before has the default
    kind: Mapped[str] = mapped_column(String(32), server_default="account-state")
    tenant: Mapped[str | None] = mapped_column(String(200))
    period: Mapped[str | None] = mapped_column(String(16))
    max_tokens: Mapped[int | None] = mapped_column(BigInteger)
    max_cost: Mapped[str | None] = mapped_column(Text)
    """The operator's decimal string, exactly as hashed."""

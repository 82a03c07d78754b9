"""`mint_decisions`: one row per mint, refused or not."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from leasegate.db.models.base import Base, Money


class MintDecisionRow(Base):
    __tablename__ = "mint_decisions"
    __table_args__ = (
        # A caller's idempotency key names one decision per tenant; NULL keys never collide.
        UniqueConstraint("tenant", "idempotency_key"),
        # A mint naming an affinity finds the account that last served it (only rows that
        # name one are indexed, so other mints pay nothing for it).
        Index(
            "ix_mint_decisions_affinity",
            "tenant",
            "model",
            "affinity",
            "created_at",
            postgresql_where=text("affinity IS NOT NULL"),
            sqlite_where=text("affinity IS NOT NULL"),
        ),
        # Which tenants a saturated pool refused lately (fair shares, docs/capacity.md).
        Index(
            "ix_mint_decisions_starved",
            "model",
            "created_at",
            postgresql_where=text("refusal_code = 'no-eligible-account'"),
            sqlite_where=text("refusal_code = 'no-eligible-account'"),
        ),
        # The console's latest decisions of a time range, and one dispatch's decisions.
        Index("ix_mint_decisions_created_at", "created_at"),
        Index("ix_mint_decisions_tenant_dispatch", "tenant", "dispatch_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime]
    tenant: Mapped[str] = mapped_column(Text)
    dispatch_id: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    role: Mapped[str | None] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(16))
    outcome: Mapped[str] = mapped_column(String(16))
    hop: Mapped[int] = mapped_column(Integer)
    fallback_position: Mapped[int | None] = mapped_column(Integer)
    account_id: Mapped[str | None] = mapped_column(String(64))
    served_model: Mapped[str | None] = mapped_column(Text)
    refusal_code: Mapped[str | None] = mapped_column(String(64))
    passed_over: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    key_id: Mapped[str | None] = mapped_column(String(64))
    cites_decision_id: Mapped[str | None] = mapped_column(String(64))
    # UNIQUE: a decision is the successor of at most one decision, so hop chains never branch.
    successor_id: Mapped[str | None] = mapped_column(String(64), unique=True)
    authorised_by_request_id: Mapped[str | None] = mapped_column(String(64))
    idempotency_key: Mapped[str | None] = mapped_column(Text)
    request_fingerprint: Mapped[str | None] = mapped_column(String(128))
    chain_id: Mapped[str | None] = mapped_column(String(64), index=True)
    budget_max_tokens: Mapped[int | None] = mapped_column(BigInteger)
    budget_max_cost: Mapped[Decimal | None] = mapped_column(Money())
    allowed_providers: Mapped[list[str] | None] = mapped_column(JSON)
    allowed_regions: Mapped[list[str] | None] = mapped_column(JSON)
    affinity: Mapped[str | None] = mapped_column(Text)
    affinity_hit: Mapped[bool] = mapped_column(Boolean, server_default=false())
    affinity_miss_account_id: Mapped[str | None] = mapped_column(String(64))
    affinity_miss_code: Mapped[str | None] = mapped_column(String(64))

"""`keys`: one row per virtual key. A live key row IS the lease on its account."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import BigInteger, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from leasegate.db.models.base import Base, Money

DISPATCH_SEPARATOR = "\x1f"


def live_dispatch_of(tenant: str, dispatch_id: str) -> str:
    """The value a live key holds in `keys.live_dispatch` (a unit separator cannot be typed)."""
    return f"{tenant}{DISPATCH_SEPARATOR}{dispatch_id}"


class KeyRow(Base):
    __tablename__ = "keys"
    __table_args__ = (
        # leases_held(account) counts live rows through this index.
        Index("ix_keys_account_live", "account_id", "revoked_at", "expires_at"),
    )

    key_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    secret_hash: Mapped[str] = mapped_column(String(128))
    mint_decision_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("mint_decisions.id"), index=True
    )
    tenant: Mapped[str] = mapped_column(Text)
    dispatch_id: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    served_model: Mapped[str] = mapped_column(Text)
    account_id: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]
    revoke_reason: Mapped[str | None] = mapped_column(Text)
    # tenant + US + dispatch_id while the key may be live, NULL once it ended: the database's
    # UNIQUE is what allows at most one live lease per dispatch (NULLs never collide).
    live_dispatch: Mapped[str | None] = mapped_column(Text, unique=True)
    chain_id: Mapped[str | None] = mapped_column(String(64))
    budget_max_tokens: Mapped[int | None] = mapped_column(BigInteger)
    budget_max_cost: Mapped[Decimal | None] = mapped_column(Money())

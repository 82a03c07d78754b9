"""`evidence`: one terminal row per proxied request that presented a key.

On Postgres the table is partitioned by UTC day on `started_at` (migration
`evidence_partitions`, partitions kept by leasegate.db.partitions), and a partitioned table's
primary key must contain the partition key: hence `(request_id, started_at)`. A request's row
is written once with one `started_at`, so a replayed batch still collides on the key. SQLite
keeps one table whose primary key is `request_id` alone (Alembic compares no primary keys, so
the models describe the Postgres shape)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import Boolean, Float, Index, Integer, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from leasegate.db.models.base import Base, Money


class EvidenceRecordRow(Base):
    __tablename__ = "evidence"
    __table_args__ = (Index("ix_evidence_account_started", "account_id", "started_at"),)

    request_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_id: Mapped[str | None] = mapped_column(String(64))
    mint_decision_id: Mapped[str | None] = mapped_column(String(64), index=True)
    account_id: Mapped[str | None] = mapped_column(String(64))
    requested_model: Mapped[str | None] = mapped_column(Text)
    served_model: Mapped[str | None] = mapped_column(Text)
    endpoint: Mapped[str] = mapped_column(Text)
    stream: Mapped[bool] = mapped_column(Boolean)
    upstream_status: Mapped[int | None] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(32))
    refusal_reason: Mapped[str | None] = mapped_column(String(64))
    error_code: Mapped[str | None] = mapped_column(Text)
    scope: Mapped[str | None] = mapped_column(String(16))
    qualifying: Mapped[bool] = mapped_column(Boolean)
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    cache_read_input_tokens: Mapped[int | None] = mapped_column(Integer)
    cache_creation_input_tokens: Mapped[int | None] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(primary_key=True, index=True)
    first_byte_ms: Mapped[float | None] = mapped_column(Float)
    duration_ms: Mapped[float] = mapped_column(Float)
    malformed_chunks: Mapped[int] = mapped_column(Integer)
    cost: Mapped[Decimal | None] = mapped_column(Money())
    usage_estimated: Mapped[bool] = mapped_column(Boolean, server_default=false())
    retry_after_ms: Mapped[float | None] = mapped_column(Float)

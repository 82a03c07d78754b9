"""`audit_anchor`: one row (id 1) holding the chain's count and head hash, HMAC-signed when
LEASEGATE_AUDIT_KEY is set. Updated in the same transaction as every append; writers lock it
(SELECT ... FOR UPDATE) so that concurrent mutations queue in the database."""

from __future__ import annotations

from sqlalchemy import Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from leasegate.db.models.base import Base

ANCHOR_ID = 1


class AuditAnchorRow(Base):
    __tablename__ = "audit_anchor"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    count: Mapped[int] = mapped_column(Integer)
    head_hash: Mapped[str] = mapped_column(String(64))
    signature: Mapped[str | None] = mapped_column(String(64))

"""`account_leases`: one lockable row per account, so capacity checks across replicas queue.

It holds no count: the count is always the live rows of `keys`, so it cannot drift.
"""

from __future__ import annotations

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from leasegate.db.models.base import Base


class AccountLeaseRow(Base):
    __tablename__ = "account_leases"

    account_id: Mapped[str] = mapped_column(String(64), primary_key=True)

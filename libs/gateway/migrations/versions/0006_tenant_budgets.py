"""Tenant budgets on the audit chain: a record kind and the budget's fields.

Columns are added (never altered), so the append-only triggers and every existing row stay as
they were; old rows read as `account-state` records and verify as before.

Revision ID: tenant_budgets
Revises: evidence_partitions
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "tenant_budgets"
down_revision: str | None = "evidence_partitions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("max_cost", "max_tokens", "period", "tenant", "kind")


def upgrade() -> None:
    op.add_column(
        "audit_records",
        sa.Column("kind", sa.String(32), server_default="account-state", nullable=False),
    )
    op.add_column("audit_records", sa.Column("tenant", sa.String(200), nullable=True))
    op.add_column("audit_records", sa.Column("period", sa.String(16), nullable=True))
    op.add_column("audit_records", sa.Column("max_tokens", sa.BigInteger(), nullable=True))
    op.add_column("audit_records", sa.Column("max_cost", sa.Text(), nullable=True))


def downgrade() -> None:
    # SQLite's DROP COLUMN rewrites nothing the triggers watch; both dialects support it
    for column in _COLUMNS:
        op.drop_column("audit_records", column)

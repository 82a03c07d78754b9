"""Spend: a cost on each evidence row, a chain and a budget on each decision and key.

Revision ID: spend
Revises: mint_function
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "spend"
down_revision: str | None = "mint_function"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _money() -> sa.Numeric[object]:
    return sa.Numeric(20, 9)


def upgrade() -> None:
    for table in ("mint_decisions", "keys"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("chain_id", sa.String(64), nullable=True))
            batch.add_column(sa.Column("budget_max_tokens", sa.BigInteger(), nullable=True))
            batch.add_column(sa.Column("budget_max_cost", _money(), nullable=True))
    with op.batch_alter_table("evidence") as batch:
        batch.add_column(sa.Column("cost", _money(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("evidence") as batch:
        batch.drop_column("cost")
    for table in ("keys", "mint_decisions"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("budget_max_cost")
            batch.drop_column("budget_max_tokens")
            batch.drop_column("chain_id")

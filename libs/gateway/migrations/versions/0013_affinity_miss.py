"""Affinity miss: a decision records, in fields of its own, the account that last served the
mint's `affinity` when the mint did not go there, and why (a pass-over code). Until now the
miss led `passed_over`, which is the ordered walk's list.

`leasegate_commit_mint` reads the decision row with `json_populate_record`, so the new columns
need no change to it.

Revision ID: affinity_miss
Revises: decisions_by_time
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "affinity_miss"
down_revision: str | None = "decisions_by_time"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "mint_decisions", sa.Column("affinity_miss_account_id", sa.String(64), nullable=True)
    )
    op.add_column("mint_decisions", sa.Column("affinity_miss_code", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("mint_decisions", "affinity_miss_code")
    op.drop_column("mint_decisions", "affinity_miss_account_id")

"""Data residency: a decision records its chain's own `allowed_providers` / `allowed_regions`.

Two nullable JSON columns on `mint_decisions` (a list of names, or NULL for none asked). A hop
reads them from the decision it cites and keeps them. `leasegate_commit_mint` reads the decision
row with `json_populate_record`, so the new columns need no change to it and the mint's commit
stays one round trip.

Revision ID: residency
Revises: affinity
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "residency"
down_revision: str | None = "affinity"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("mint_decisions", sa.Column("allowed_providers", sa.JSON(), nullable=True))
    op.add_column("mint_decisions", sa.Column("allowed_regions", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("mint_decisions") as batch:
        batch.drop_column("allowed_regions")
        batch.drop_column("allowed_providers")

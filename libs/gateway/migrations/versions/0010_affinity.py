"""Mint affinity and fair shares: what a decision records and the two reads a mint adds.

`affinity` (the caller's session or task id) and `affinity_hit` (selected because the account
that last served it had room) are added to `mint_decisions`. Two partial indexes serve the
mint's reads and cost nothing for rows they leave out:

- `ix_mint_decisions_affinity` (tenant, model, affinity, created_at) over rows naming an
  affinity: the account that last served one;
- `ix_mint_decisions_starved` (model, created_at) over `no-eligible-account` refusals: which
  tenants a saturated pool refused lately (fair shares, docs/capacity.md).

`leasegate_commit_mint` reads the decision row with `json_populate_record`, so the new columns
need no change to it.

Revision ID: affinity
Revises: spend_truth
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "affinity"
down_revision: str | None = "spend_truth"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NAMES_ONE = sa.text("affinity IS NOT NULL")
_STARVED = sa.text("refusal_code = 'no-eligible-account'")


def upgrade() -> None:
    op.add_column("mint_decisions", sa.Column("affinity", sa.Text(), nullable=True))
    op.add_column(
        "mint_decisions",
        sa.Column("affinity_hit", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.create_index(
        "ix_mint_decisions_affinity",
        "mint_decisions",
        ["tenant", "model", "affinity", "created_at"],
        postgresql_where=_NAMES_ONE,
        sqlite_where=_NAMES_ONE,
    )
    op.create_index(
        "ix_mint_decisions_starved",
        "mint_decisions",
        ["model", "created_at"],
        postgresql_where=_STARVED,
        sqlite_where=_STARVED,
    )


def downgrade() -> None:
    op.drop_index("ix_mint_decisions_starved", table_name="mint_decisions")
    op.drop_index("ix_mint_decisions_affinity", table_name="mint_decisions")
    op.drop_column("mint_decisions", "affinity_hit")
    op.drop_column("mint_decisions", "affinity")

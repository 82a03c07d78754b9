"""Spend truth: an index on `mint_decisions.chain_id`, so a dispatch chain's running total is
rebuilt from evidence (its decisions, then their rows) without reading every decision.

Revision ID: spend_truth
Revises: usage_estimated
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "spend_truth"
down_revision: str | None = "usage_estimated"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_mint_decisions_chain_id", "mint_decisions", ["chain_id"])


def downgrade() -> None:
    op.drop_index("ix_mint_decisions_chain_id", table_name="mint_decisions")

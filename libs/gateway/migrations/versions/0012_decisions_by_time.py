"""Decisions by time and by dispatch: `mint_decisions (created_at)` lets the console list the
latest decisions of a time range without reading the table, and `(tenant, dispatch_id,
created_at)` finds one dispatch's decisions (its chain view, the counts of the dispatches the
console lists) without reading every decision.

Revision ID: decisions_by_time
Revises: residency
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "decisions_by_time"
down_revision: str | None = "residency"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_mint_decisions_created_at", "mint_decisions", ["created_at"])
    op.create_index(
        "ix_mint_decisions_tenant_dispatch",
        "mint_decisions",
        ["tenant", "dispatch_id", "created_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_mint_decisions_tenant_dispatch", table_name="mint_decisions")
    op.drop_index("ix_mint_decisions_created_at", table_name="mint_decisions")

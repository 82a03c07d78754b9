"""Evidence: `usage_estimated`, set where a stream never reported its usage and the gateway
charged its estimate (leasegate.providers.estimate).

Existing rows are reported usage (or none): false. On Postgres the column is added to the
partitioned parent, which adds it to every partition, present and future; with a constant
default that is a catalogue change, no table rewrite.

Revision ID: usage_estimated
Revises: renew_function
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "usage_estimated"
down_revision: str | None = "renew_function"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("evidence") as batch:
        batch.add_column(
            sa.Column("usage_estimated", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("evidence") as batch:
        batch.drop_column("usage_estimated")

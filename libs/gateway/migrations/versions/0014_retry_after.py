"""Evidence: `retry_after_ms`, the `Retry-After` a request's answer carried (the gateway's own
on its refusals, the upstream's when it sent one). The lease-rate meter sums it over the
proxy's `account-quota-exhausted` refusals: the time a pair's leases spent waiting for their
quota, which is not time they wanted to send in.

Existing rows carried none known: null. On Postgres the column is added to the partitioned
parent, which adds it to every partition, present and future; a nullable column without a
default is a catalogue change, no table rewrite.

Revision ID: retry_after
Revises: affinity_miss
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "retry_after"
down_revision: str | None = "affinity_miss"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("evidence") as batch:
        batch.add_column(sa.Column("retry_after_ms", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("evidence") as batch:
        batch.drop_column("retry_after_ms")

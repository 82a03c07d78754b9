"""Evidence partitioned by day on Postgres; SQLite keeps one table (nothing to do there).

The existing table is renamed aside, a partitioned `evidence` is created with the same columns
(`PARTITION BY RANGE (started_at)`), one partition is created per UTC day that already has rows,
plus `evidence_default` as a safety net for rows of a day nobody created yet, the rows are
copied over and the old table dropped. A partitioned table's primary key must include the
partition key, so the key becomes `(request_id, started_at)`; the indexes keep their names and
are declared on the parent, so every partition, present and future, gets them.

The control plane creates the coming days' partitions from then on (leasegate.db.partitions);
partition names are `evidence_pYYYYMMDD`, bounds `[day 00:00 UTC, next day 00:00 UTC)`.

Revision ID: evidence_partitions
Revises: spend
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "evidence_partitions"
down_revision: str | None = "spend"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEXES = {
    "ix_evidence_account_started": "account_id, started_at",
    "ix_evidence_mint_decision_id": "mint_decision_id",
    "ix_evidence_started_at": "started_at",
}

# One partition per UTC day present in the old rows, created before the copy.
_PARTITION_EXISTING_DAYS = """
DO $$
DECLARE
  day date;
BEGIN
  FOR day IN
    SELECT DISTINCT (started_at AT TIME ZONE 'UTC')::date FROM evidence_unpartitioned
  LOOP
    EXECUTE format(
      'CREATE TABLE %I PARTITION OF evidence FOR VALUES FROM (%L) TO (%L)',
      'evidence_p' || to_char(day, 'YYYYMMDD'),
      day::timestamp AT TIME ZONE 'UTC',
      (day + 1)::timestamp AT TIME ZONE 'UTC'
    );
  END LOOP;
END
$$;
"""


def _set_aside(table: str, suffix: str) -> None:
    op.execute(f"ALTER TABLE {table} RENAME TO {table}{suffix}")
    op.execute(f"ALTER TABLE {table}{suffix} RENAME CONSTRAINT pk_evidence TO pk_evidence{suffix}")
    for name in _INDEXES:
        op.execute(f"ALTER INDEX {name} RENAME TO {name}{suffix}")


def _index_parent() -> None:
    for name, columns in _INDEXES.items():
        op.execute(f"CREATE INDEX {name} ON evidence ({columns})")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _set_aside("evidence", "_unpartitioned")
    op.execute(
        "CREATE TABLE evidence (LIKE evidence_unpartitioned INCLUDING DEFAULTS) "
        "PARTITION BY RANGE (started_at)"
    )
    op.execute(
        "ALTER TABLE evidence ADD CONSTRAINT pk_evidence PRIMARY KEY (request_id, started_at)"
    )
    _index_parent()
    op.execute("CREATE TABLE evidence_default PARTITION OF evidence DEFAULT")
    op.execute(_PARTITION_EXISTING_DAYS)
    op.execute("INSERT INTO evidence SELECT * FROM evidence_unpartitioned")
    op.execute("DROP TABLE evidence_unpartitioned")


def downgrade() -> None:
    """Back to one table (fails, rather than losing rows, if two rows share a request id)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    _set_aside("evidence", "_partitioned")
    op.execute("CREATE TABLE evidence (LIKE evidence_partitioned INCLUDING DEFAULTS)")
    op.execute("ALTER TABLE evidence ADD CONSTRAINT pk_evidence PRIMARY KEY (request_id)")
    _index_parent()
    op.execute("INSERT INTO evidence SELECT * FROM evidence_partitioned")
    op.execute("DROP TABLE evidence_partitioned")  # its partitions go with it

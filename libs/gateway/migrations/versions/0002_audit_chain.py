"""The admin overlay's audit chain: append-only records and the anchor.

The database itself refuses to change history: on Postgres, triggers refuse UPDATE, DELETE and
TRUNCATE on `audit_records` (SQLite has no TRUNCATE; its triggers refuse UPDATE and DELETE).
Tampering then needs the owner to drop or disable them, a deliberate act the chain detects.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PG_FUNCTION = """
CREATE FUNCTION audit_records_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit_records is append-only: % refused', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END
$$
"""

_PG_TRIGGERS = (
    "CREATE TRIGGER audit_records_no_change BEFORE UPDATE OR DELETE ON audit_records "
    "FOR EACH ROW EXECUTE FUNCTION audit_records_append_only()",
    "CREATE TRIGGER audit_records_no_truncate BEFORE TRUNCATE ON audit_records "
    "FOR EACH STATEMENT EXECUTE FUNCTION audit_records_append_only()",
)

_SQLITE_TRIGGERS = tuple(
    f"CREATE TRIGGER audit_records_no_{verb.lower()} BEFORE {verb} ON audit_records "
    f"BEGIN SELECT RAISE(ABORT, 'audit_records is append-only: {verb} refused'); END"
    for verb in ("UPDATE", "DELETE")
)


def upgrade() -> None:
    op.create_table(
        "audit_records",
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("authenticated_by", sa.String(64), nullable=False),
        sa.Column("on_behalf_of", sa.Text(), nullable=True),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("revoked_keys", sa.Integer(), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_audit_records")),
    )
    op.create_table(
        "audit_anchor",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
        sa.Column("signature", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_anchor")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_FUNCTION)
        for statement in _PG_TRIGGERS:
            op.execute(statement)
    else:
        for statement in _SQLITE_TRIGGERS:
            op.execute(statement)


def downgrade() -> None:
    op.drop_table("audit_anchor")
    op.drop_table("audit_records")  # its triggers go with it
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS audit_records_append_only()")

"""The initial schema: mint decisions, keys (a live key is a lease), evidence, account locks.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "account_leases",
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("account_id", name=op.f("pk_account_leases")),
    )
    op.create_table(
        "mint_decisions",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("tenant", sa.Text(), nullable=False),
        sa.Column("dispatch_id", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("role", sa.Text(), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("hop", sa.Integer(), nullable=False),
        sa.Column("fallback_position", sa.Integer(), nullable=True),
        sa.Column("account_id", sa.String(64), nullable=True),
        sa.Column("served_model", sa.Text(), nullable=True),
        sa.Column("refusal_code", sa.String(64), nullable=True),
        sa.Column("passed_over", sa.JSON(), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=True),
        sa.Column("cites_decision_id", sa.String(64), nullable=True),
        sa.Column("successor_id", sa.String(64), nullable=True),
        sa.Column("authorised_by_request_id", sa.String(64), nullable=True),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        sa.Column("request_fingerprint", sa.String(128), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mint_decisions")),
        sa.UniqueConstraint("successor_id", name=op.f("uq_mint_decisions_successor_id")),
        sa.UniqueConstraint(
            "tenant",
            "idempotency_key",
            name=op.f("uq_mint_decisions_tenant_idempotency_key"),
        ),
    )
    op.create_table(
        "keys",
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("secret_hash", sa.String(128), nullable=False),
        sa.Column("mint_decision_id", sa.String(64), nullable=False),
        sa.Column("tenant", sa.Text(), nullable=False),
        sa.Column("dispatch_id", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("served_model", sa.Text(), nullable=False),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("expires_at", _utc(), nullable=False),
        sa.Column("revoked_at", _utc(), nullable=True),
        sa.Column("revoke_reason", sa.Text(), nullable=True),
        sa.Column("live_dispatch", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["mint_decision_id"],
            ["mint_decisions.id"],
            name=op.f("fk_keys_mint_decision_id_mint_decisions"),
        ),
        sa.PrimaryKeyConstraint("key_id", name=op.f("pk_keys")),
        sa.UniqueConstraint("live_dispatch", name=op.f("uq_keys_live_dispatch")),
    )
    op.create_index("ix_keys_account_live", "keys", ["account_id", "revoked_at", "expires_at"])
    op.create_index(op.f("ix_keys_mint_decision_id"), "keys", ["mint_decision_id"])
    op.create_table(
        "evidence",
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=True),
        sa.Column("mint_decision_id", sa.String(64), nullable=True),
        sa.Column("account_id", sa.String(64), nullable=True),
        sa.Column("requested_model", sa.Text(), nullable=True),
        sa.Column("served_model", sa.Text(), nullable=True),
        sa.Column("endpoint", sa.Text(), nullable=False),
        sa.Column("stream", sa.Boolean(), nullable=False),
        sa.Column("upstream_status", sa.Integer(), nullable=True),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("refusal_reason", sa.String(64), nullable=True),
        sa.Column("error_code", sa.Text(), nullable=True),
        sa.Column("scope", sa.String(16), nullable=True),
        sa.Column("qualifying", sa.Boolean(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("cache_read_input_tokens", sa.Integer(), nullable=True),
        sa.Column("cache_creation_input_tokens", sa.Integer(), nullable=True),
        sa.Column("started_at", _utc(), nullable=False),
        sa.Column("first_byte_ms", sa.Float(), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("malformed_chunks", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("request_id", name=op.f("pk_evidence")),
    )
    op.create_index("ix_evidence_account_started", "evidence", ["account_id", "started_at"])
    op.create_index(op.f("ix_evidence_mint_decision_id"), "evidence", ["mint_decision_id"])
    op.create_index(op.f("ix_evidence_started_at"), "evidence", ["started_at"])


def downgrade() -> None:
    op.drop_table("evidence")
    op.drop_table("keys")
    op.drop_table("mint_decisions")
    op.drop_table("account_leases")

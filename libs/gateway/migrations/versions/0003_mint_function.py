"""A mint's whole reservation as one Postgres function: one round trip instead of eight.

`leasegate_commit_mint(decision, key, now, lease_capacity, admin_revision)` does, in one
statement and therefore one transaction, what `leasegate.db.mint` does step by step on SQLite:
share-lock the audit chain and insist on the revision the overlay was read at, free this
dispatch's slot from expired keys and refuse a live one, lock the account's lease row and count
its live keys against the ceiling, link the cited decision's successor, insert the decision and
the key. Rows arrive as JSON documents read with `json_populate_record`, so a new column needs
no change here. Refusals are raised with the SQLSTATEs that `leasegate.db.mint_pg` names.

Revision ID: mint_function
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "mint_function"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# 0x1EA5E6A7E: leasegate.db.audit_lock.AUDIT_LOCK_ID (a migration never imports the app)
_FUNCTION = """
CREATE FUNCTION leasegate_commit_mint(
  p_decision json, p_key json, p_now timestamptz, p_lease_capacity integer,
  p_admin_revision integer
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_slot text := p_key->>'live_dispatch';
  v_account text := p_key->>'account_id';
  v_cites text := p_decision->>'cites_decision_id';
  v_count integer;
  v_head text;
BEGIN
  IF p_admin_revision IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock_shared(8227023486);
    SELECT count, head_hash INTO v_count, v_head FROM audit_anchor WHERE id = 1;
    IF coalesce(v_count, 0) <> p_admin_revision THEN
      RAISE EXCEPTION 'audit chain at %, overlay read at %', coalesce(v_count, 0),
        p_admin_revision USING ERRCODE = 'LG001';
    END IF;
    IF (SELECT count(*) FROM audit_records) <> coalesce(v_count, 0)
       OR (v_count IS NOT NULL AND v_head IS DISTINCT FROM
           (SELECT hash FROM audit_records ORDER BY seq DESC LIMIT 1)) THEN
      RAISE EXCEPTION 'the audit chain no longer ends where its anchor says'
        USING ERRCODE = 'LG001';
    END IF;
  END IF;
  UPDATE keys SET live_dispatch = NULL WHERE live_dispatch = v_slot AND expires_at <= p_now;
  IF EXISTS (SELECT 1 FROM keys WHERE live_dispatch = v_slot) THEN
    RAISE EXCEPTION 'the dispatch holds a live lease' USING ERRCODE = 'LG002';
  END IF;
  IF p_lease_capacity IS NOT NULL THEN
    INSERT INTO account_leases (account_id) VALUES (v_account) ON CONFLICT DO NOTHING;
    PERFORM 1 FROM account_leases WHERE account_id = v_account FOR UPDATE;
    SELECT count(*) INTO v_count FROM keys
      WHERE account_id = v_account AND revoked_at IS NULL AND expires_at > p_now;
    IF v_count >= p_lease_capacity THEN
      RAISE EXCEPTION 'lease capacity exhausted' USING ERRCODE = 'LG003';
    END IF;
  END IF;
  IF v_cites IS NOT NULL THEN
    UPDATE mint_decisions SET successor_id = p_decision->>'id'
      WHERE id = v_cites AND successor_id IS NULL;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'the cited decision has a successor' USING ERRCODE = 'LG004';
    END IF;
  END IF;
  INSERT INTO mint_decisions SELECT * FROM json_populate_record(NULL::mint_decisions, p_decision);
  INSERT INTO keys SELECT * FROM json_populate_record(NULL::keys, p_key);
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION leasegate_commit_mint(json, json, timestamptz, integer, integer)")

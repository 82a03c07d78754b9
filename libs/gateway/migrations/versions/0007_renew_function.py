"""A renewal as one Postgres function: one round trip instead of about eleven.

`leasegate_renew_key(old_key_id, decision, key, now, lease_capacity, admin_revision)` does, in
one statement and therefore one transaction, what `leasegate.db.mint.renew_key` does step by
step on SQLite: share-lock the audit chain and insist on the revision the overlay was read at,
find the old key's account, lock the account's lease row when it has a ceiling, end the old
key (it must still be live), count the account's live keys against the ceiling, link the
renewed decision's successor, insert the new decision and key. It returns the ended key's
row. Refusals are raised with the SQLSTATEs that `leasegate.db.mint_pg` names (LG005: the old
key is not live; LG006: the new key is on another account, a caller's bug).

Revision ID: renew_function
Revises: tenant_budgets
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "renew_function"
down_revision: str | None = "tenant_budgets"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# 0x1EA5E6A7E: leasegate.db.audit_lock.AUDIT_LOCK_ID (a migration never imports the app)
_FUNCTION = """
CREATE FUNCTION leasegate_renew_key(
  p_old_key_id text, p_decision json, p_key json, p_now timestamptz,
  p_lease_capacity integer, p_admin_revision integer
) RETURNS keys LANGUAGE plpgsql AS $$
DECLARE
  v_account text;
  v_cites text := p_decision->>'cites_decision_id';
  v_count integer;
  v_head text;
  v_ended keys;
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
  SELECT account_id INTO v_account FROM keys WHERE key_id = p_old_key_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no such key' USING ERRCODE = 'LG005';
  END IF;
  IF v_account IS DISTINCT FROM p_key->>'account_id' THEN
    RAISE EXCEPTION 'a renewal stays on the old key''s account' USING ERRCODE = 'LG006';
  END IF;
  IF p_lease_capacity IS NOT NULL THEN
    INSERT INTO account_leases (account_id) VALUES (v_account) ON CONFLICT DO NOTHING;
    PERFORM 1 FROM account_leases WHERE account_id = v_account FOR UPDATE;
  END IF;
  -- ending the old key first frees its dispatch slot and its lease slot for the new one
  UPDATE keys SET revoked_at = p_now, revoke_reason = 'renewed', live_dispatch = NULL
    WHERE key_id = p_old_key_id AND revoked_at IS NULL AND expires_at > p_now
    RETURNING * INTO v_ended;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'the key is not live' USING ERRCODE = 'LG005';
  END IF;
  IF p_lease_capacity IS NOT NULL THEN
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
  RETURN v_ended;
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "DROP FUNCTION leasegate_renew_key(text, json, json, timestamptz, integer, integer)"
        )

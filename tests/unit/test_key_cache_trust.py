"""The proxy's key cache trusts an entry for its whole TTL only while revocations can arrive
by fan-out; while the fan-out is down (its heartbeat went unanswered, or it is reconnecting)
an entry older than `UNTRUSTED_TTL_S` is read again, so a revocation it could not deliver is
seen in the database within that long."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from leasegate.core.errors import GatewayError
from leasegate.core.records import KeyRecord
from leasegate.keys.format import ParsedKey, hash_secret, new_key
from leasegate.proxy.keys import UNTRUSTED_TTL_S, KeyResolver
from tests.fixtures.control import T0, StepClock
from tests.fixtures.memory_store import MemoryStore


def _key(store: MemoryStore) -> tuple[KeyRecord, ParsedKey]:
    _, parsed = new_key()
    record = KeyRecord(
        key_id=parsed.key_id,
        secret_hash=hash_secret(parsed.secret),
        mint_decision_id="md_1",
        tenant="t",
        dispatch_id="d",
        model="gpt-4o",
        served_model="gpt-4o",
        account_id="a",
        created_at=T0,
        expires_at=T0 + timedelta(hours=1),
    )
    store.keys[record.key_id] = record
    return record, parsed


@pytest.mark.parametrize("fanout_live", [True, False])
async def test_a_revocation_the_fanout_missed_is_seen_once_the_entry_is_untrusted(
    fanout_live: bool,
) -> None:
    store, clock = MemoryStore(), StepClock()

    async def trusted() -> bool:
        return fanout_live

    resolver = KeyResolver(store, clock, ttl_s=60, fanout_trusted=trusted)
    record, parsed = _key(store)
    await resolver.resolve(parsed)  # cached now

    # revoked in the database; the message never reaches this proxy
    store.keys[record.key_id] = replace(record, revoked_at=T0)
    clock.advance(UNTRUSTED_TTL_S + 0.01)
    if fanout_live:
        assert await resolver.resolve(parsed) == record
    else:
        with pytest.raises(GatewayError) as refused:
            await resolver.resolve(parsed)
        assert refused.value.code == "key-revoked"

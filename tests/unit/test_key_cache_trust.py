"""The proxy's key cache trusts an entry for its whole TTL only while revocations can arrive
by fan-out; while the fan-out is down (its heartbeat went unanswered, or it is reconnecting)
an entry older than `UNTRUSTED_TTL_S` is read again, so a revocation it could not deliver is
seen in the database within that long."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pytest

from leasegate.core.errors import GatewayError
from leasegate.core.records import KeyRecord
from leasegate.keys.format import ParsedKey, hash_secret, new_key
from leasegate.proxy.keys import UNTRUSTED_TTL_S, KeyResolver
from tests.fixtures.control import T0, StepClock
from tests.fixtures.memory_store import MemoryStore


class _Fanout:
    """A revocation bus's trust: `trusted()` as given; `confirmed()` runs `before_answer`
    (what the subscription delivers ahead of its heartbeat's answer), then says `answer`."""

    def __init__(
        self,
        live: bool,
        answer: bool | None = None,
        before_answer: Callable[[], None] = lambda: None,
    ) -> None:
        self.live = live
        self.answer = live if answer is None else answer
        self.before_answer = before_answer

    def trusted(self) -> bool:
        return self.live

    async def confirmed(self) -> bool:
        self.before_answer()
        return self.answer


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
    resolver = KeyResolver(store, clock, ttl_s=60, fanout=_Fanout(fanout_live))
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


async def test_a_fanout_confirmed_after_an_idle_spell_trusts_the_entry_it_holds() -> None:
    """After an idle spell the request waits for the heartbeat's answer, then relies on the
    cache without a database read (here the database alone knows of a revocation: a
    request that read it would be refused)."""
    store, clock = MemoryStore(), StepClock()
    resolver = KeyResolver(store, clock, ttl_s=60, fanout=_Fanout(live=False, answer=True))
    record, parsed = _key(store)
    await resolver.resolve(parsed)
    store.keys[record.key_id] = replace(record, revoked_at=T0)
    clock.advance(UNTRUSTED_TTL_S + 0.01)
    assert await resolver.resolve(parsed) == record  # the cache answered


async def test_a_reset_while_a_request_waits_for_the_heartbeat_sends_it_to_the_database() -> None:
    """The subscription reconnected (messages may have been lost) ahead of the heartbeat's
    answer the request waits for: the entry it found before waiting is not served, the
    database answers (and knows the key is revoked)."""
    store, clock = MemoryStore(), StepClock()
    fanout = _Fanout(live=False, answer=True)
    resolver = KeyResolver(store, clock, ttl_s=60, fanout=fanout)
    record, parsed = _key(store)
    await resolver.resolve(parsed)
    store.keys[record.key_id] = replace(record, revoked_at=T0)
    fanout.before_answer = resolver.on_reset
    clock.advance(UNTRUSTED_TTL_S + 0.01)
    with pytest.raises(GatewayError) as refused:
        await resolver.resolve(parsed)
    assert refused.value.code == "key-revoked"

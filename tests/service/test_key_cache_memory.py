"""The proxy's key cache and revocation list hold what is live, not every key ever seen.

Keys are minted and revoked by the control plane's own services over the in-process store,
resolved by the proxy's `KeyResolver` over the same store, and the revocations the control
plane published are handed to the resolver as the fan-out would.
"""

from __future__ import annotations

from leasegate.control_plane.keys import revoke
from leasegate.control_plane.mint import mint
from leasegate.core.ports.errors import StoreUnavailable
from leasegate.core.records import KeyRecord
from leasegate.keys import parse_key
from leasegate.proxy.keys import RETAIN_S, SWEEP_BATCH, KeyResolver
from tests.fixtures.control import Control, body, control, view_field

KEYS = 4 * SWEEP_BATCH + 1
"""Enough keys that emptying the cache and the deny list takes several sweeps' slices."""
CACHE_TTL_S = 60.0
KEY_TTL_S = 900


async def _minted(c: Control, count: int) -> list[str]:
    tokens = []
    for i in range(count):
        minted = await mint(c.deps, body(f"d{i}", ttl_s=KEY_TTL_S))
        tokens.append(str(view_field(minted.view, "key")))
    return tokens


async def _resolve_all(resolver: KeyResolver, tokens: list[str]) -> None:
    for token in tokens:
        parsed = parse_key(token)
        assert parsed is not None
        await resolver.resolve(parsed)


async def test_revoked_keys_leave_the_deny_list_once_expired() -> None:
    c = control()
    resolver = KeyResolver(c.store, c.clock, CACHE_TTL_S)
    tokens = await _minted(c, KEYS)
    await _resolve_all(resolver, tokens)
    assert resolver.sizes == (KEYS, 0)

    for token in tokens:
        parsed = parse_key(token)
        assert parsed is not None
        await revoke(c.deps, parsed.key_id)
    resolver.on_revoked(c.published.revocations)
    assert resolver.sizes == (0, KEYS)  # refused by every replica until they expire

    c.clock.advance(KEY_TTL_S + 1)
    while resolver.sweep():
        pass
    assert resolver.sizes == (0, 0)


async def test_quiet_keys_leave_the_cache_and_a_busy_one_stays() -> None:
    c = control()
    resolver = KeyResolver(c.store, c.clock, CACHE_TTL_S)
    tokens = await _minted(c, KEYS)
    await _resolve_all(resolver, tokens)
    busy = tokens[0]

    # only one key keeps being used, for longer than the cache keeps a quiet one
    elapsed = 0.0
    while elapsed < CACHE_TTL_S + RETAIN_S + 1:
        c.clock.advance(CACHE_TTL_S / 2)
        elapsed += CACHE_TTL_S / 2
        await _resolve_all(resolver, [busy])
    while resolver.sweep():
        pass
    assert resolver.sizes == (1, 0)
    # a key gone quiet and used again is read from the database, as any first use
    await _resolve_all(resolver, tokens[1:2])
    assert resolver.sizes == (2, 0)


class _Partitioned:
    """The key reads of a store, until the database is cut off."""

    def __init__(self, c: Control) -> None:
        self.c = c
        self.out = False

    async def get_key(self, key_id: str) -> KeyRecord | None:
        if self.out:
            raise StoreUnavailable("ConnectionRefusedError")
        return await self.c.store.get_key(key_id)


async def test_a_partition_keeps_known_keys_however_long_they_were_quiet() -> None:
    c = control()
    reader = _Partitioned(c)
    resolver = KeyResolver(reader, c.clock, CACHE_TTL_S)
    tokens = await _minted(c, 3)
    await _resolve_all(resolver, tokens)
    reader.out = True
    c.clock.advance(CACHE_TTL_S + RETAIN_S + 1)
    await _resolve_all(resolver, tokens)  # served from the cache while the database is out
    assert resolver.sizes == (3, 0)

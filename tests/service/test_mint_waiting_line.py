"""Oldest first among one tenant's mints waiting for a full pool (`capacity.waiting`): the
lease that frees goes to the dispatch that has waited longest, not to whichever asks first,
and the gateway still never waits (every refusal carries a `Retry-After`). In-memory twins."""

from __future__ import annotations

import pytest

from leasegate.control_plane import keys
from leasegate.control_plane.mint import mint
from leasegate.core.errors import GatewayError
from tests.fixtures.control import Control, account, body, control

TENANT = "fleet/batch"


def full_pool() -> Control:
    """Two accounts of one lease each, both held by the tenant's first two dispatches."""
    return control(account("a", lease_capacity=1), account("b", lease_capacity=1))


async def attempt(c: Control, dispatch_id: str, **fields: object) -> tuple[str, float | None]:
    """The account, or the refusal's code and its `Retry-After`."""
    try:
        minted = await mint(c.deps, body(dispatch_id, tenant=TENANT, **fields))
    except GatewayError as refused:
        return refused.code, refused.retry_after_s
    return minted.view.account_id, None


def held(c: Control) -> list[str]:
    return [k.key_id for k in c.store.keys.values() if k.state(c.clock.at) == "live"]


async def filled() -> Control:
    c = full_pool()
    for n in range(2):
        assert (await attempt(c, f"d{n}"))[0] in ("a", "b")
    return c


async def test_the_lease_that_frees_goes_to_the_dispatch_that_waited_longest() -> None:
    """d2 is turned away first, then d3: d2, the longest waiting, is told to come back in a
    tenth of a second, d3 in a second. A lease frees and d3 asks first: it is held back
    (`tenant-fair-share-exceeded`), and d2 takes the lease; a newcomer that never waited is
    held back behind d3 the same way, and d3 takes the next lease."""
    c = await filled()
    assert await attempt(c, "d2") == ("no-eligible-account", 0.1)
    c.clock.advance(0.1)
    assert await attempt(c, "d3") == ("no-eligible-account", 1.0)
    await keys.revoke(c.deps, held(c)[0])
    c.clock.advance(0.1)
    code, retry = await attempt(c, "d3")
    assert code == "tenant-fair-share-exceeded"
    assert retry == 1.0
    assert (await attempt(c, "d2"))[0] in ("a", "b")
    await keys.revoke(c.deps, held(c)[0])
    c.clock.advance(0.1)
    assert (await attempt(c, "d4"))[0] == "tenant-fair-share-exceeded"
    assert (await attempt(c, "d3"))[0] in ("a", "b")


async def test_a_younger_mint_takes_a_lease_the_older_ones_leave_over() -> None:
    """Only as many leases as older dispatches still ask are kept for them: with two free and
    one older dispatch waiting, a newcomer takes the other."""
    c = await filled()
    assert (await attempt(c, "d2"))[0] == "no-eligible-account"
    for key_id in held(c):
        await keys.revoke(c.deps, key_id)
    assert (await attempt(c, "d3"))[0] in ("a", "b")  # one of the two free leases
    assert (await attempt(c, "d4"))[0] == "tenant-fair-share-exceeded"  # the other is d2's
    assert (await attempt(c, "d2"))[0] in ("a", "b")


async def test_a_dispatch_that_stopped_asking_holds_nobody_back() -> None:
    """d2 waited, then gave up (asked no more for over three seconds): the lease that frees
    goes to whoever asks, d3 included."""
    c = await filled()
    assert (await attempt(c, "d2"))[0] == "no-eligible-account"
    c.clock.advance(3.5)
    await keys.revoke(c.deps, held(c)[0])
    assert (await attempt(c, "d3"))[0] in ("a", "b")


@pytest.mark.parametrize("narrowed", [{"allowed_providers": ["openai"]}])
async def test_a_mint_narrowed_to_some_accounts_neither_waits_in_line_nor_holds_one_back(
    narrowed: dict[str, object],
) -> None:
    """A dispatch narrowed to some providers could not take every lease a younger one might:
    it keeps the refusal's own `Retry-After` and holds no younger mint back."""
    c = await filled()
    assert await attempt(c, "d2", **narrowed) == ("no-eligible-account", 1.0)
    c.clock.advance(0.1)
    await keys.revoke(c.deps, held(c)[0])
    assert (await attempt(c, "d3"))[0] in ("a", "b")

"""A mint reads live facts only as far as its walk goes: the health of the first few candidates
when one of them is eligible, more in growing chunks when not, and every candidate's before it
refuses. The answers are those of a walk over every candidate's facts. In-memory twins."""

from __future__ import annotations

import asyncio

import pytest

from leasegate.control_plane.deps import FIRST_CHUNK
from leasegate.control_plane.mint import mint
from leasegate.core.errors import GatewayError
from leasegate.core.ports.health import Cooldown
from tests.fixtures.control import (
    SERVED,
    T0,
    Control,
    account,
    body,
    control,
    last_decision,
    skipped,
)

ACCOUNTS = 100


def many(**kwargs: object) -> Control:
    return control(*(account(f"a{i:02d}", **kwargs) for i in range(ACCOUNTS)))  # type: ignore[arg-type]


def cool(c: Control, index: int, seconds: float = 30) -> None:
    name = f"a{index:02d}"
    c.health.cooling[(name, SERVED)] = Cooldown(
        name, SERVED, T0.timestamp() + seconds, "http-429", 1
    )


def read_accounts(c: Control) -> list[list[str]]:
    return [[a for a, _ in pairs] for pairs in c.health.asked]


async def test_with_the_first_account_healthy_only_the_first_chunk_is_read() -> None:
    c = many()
    await mint(c.deps, body())
    assert last_decision(c).account_id == "a00"
    assert read_accounts(c) == [[f"a{i:02d}" for i in range(FIRST_CHUNK)]]


async def test_a_winner_past_the_first_chunk_is_found_reading_growing_chunks() -> None:
    c = many()
    for i in range(6):
        cool(c, i)
    await mint(c.deps, body())
    decision = last_decision(c)
    assert decision.account_id == "a06"
    assert skipped(decision) == [(f"a{i:02d}", "model-cooling") for i in range(6)]
    read = [a for chunk in read_accounts(c) for a in chunk]
    assert read == [f"a{i:02d}" for i in range(len(read))]  # in walk order, each once
    assert 7 <= len(read) < 2 * 7  # growing chunks: at most twice what the walk needed


async def test_a_refusal_reads_every_account_and_reports_every_pass_over() -> None:
    c = many()
    for i in range(ACCOUNTS - 1):
        cool(c, i, seconds=60 - (i % 7))
    last = f"a{ACCOUNTS - 1:02d}"
    c.health.circuits[last] = Cooldown(last, None, T0.timestamp() + 90, "http-401", 1)
    with pytest.raises(GatewayError) as caught:
        await mint(c.deps, body())
    error = caught.value
    assert error.code == "no-eligible-account"
    assert [(p.account_id, p.code) for p in error.passed_over] == [
        *((f"a{i:02d}", "model-cooling") for i in range(ACCOUNTS - 1)),
        (last, "circuit-open"),
    ]
    assert error.cooldown_scope == "mixed"
    assert error.retry_after_s == pytest.approx(54)  # the soonest end, wherever it was read
    assert len(skipped(last_decision(c))) == ACCOUNTS
    everyone = [a for chunk in read_accounts(c) for a in chunk]
    assert everyone == [f"a{i:02d}" for i in range(ACCOUNTS)]  # each read once, in order


async def test_losing_the_race_on_the_chunks_last_account_walks_into_the_next_chunk() -> None:
    c = many(lease_capacity=1)
    for i in range(FIRST_CHUNK - 1):
        cool(c, i)
    first, second = await asyncio.gather(mint(c.deps, body("d1")), mint(c.deps, body("d2")))
    assert first.status == second.status == 201
    by_dispatch = {d.dispatch_id: d for d in c.store.decisions.values() if d.key_id}
    chunk_last, next_one = f"a{FIRST_CHUNK - 1:02d}", f"a{FIRST_CHUNK:02d}"
    assert {d.account_id for d in by_dispatch.values()} == {chunk_last, next_one}
    loser = next(d for d in by_dispatch.values() if d.account_id == next_one)
    assert skipped(loser)[-1] == (chunk_last, "lease-capacity-exhausted")

"""The pure audit chain: linking, folding, and every way a chain stops verifying."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasegate.audit import (
    GENESIS,
    Anchor,
    AuditRecord,
    ChainVerdict,
    Entry,
    anchor_for,
    extend,
    fold,
    rehashed,
)
from leasegate.core.ports.witness import Witness

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
KEY = b"audit-key"
ACCOUNTS = ("acct-a", "acct-b", "acct-c")
STATES = ("enabled", "disabled", "draining")


def entry(account: str = "acct-a", state: str = "disabled", n: int = 0) -> Entry:
    return Entry(
        at=T0 + timedelta(seconds=n),
        actor="ops-alice",
        authenticated_by="admin-token",
        on_behalf_of=None,
        account_id=account,
        state=state,
        reason=f"change {n}",
    )


def build(
    changes: list[tuple[str, str]], key: bytes | None = KEY
) -> tuple[list[AuditRecord], Anchor | None]:
    """Append each (account, state) through the same path a mutation takes."""
    records: list[AuditRecord] = []
    anchor: Anchor | None = None
    verdict = fold(records, anchor, key=key)
    for n, (account, state) in enumerate(changes):
        record, anchor = extend(verdict, entry(account, state, n), revoked_keys=0, key=key)
        records.append(record)
        verdict = fold(records, anchor, key=key)
    return records, anchor


def corrupt_at(verdict: ChainVerdict) -> tuple[str | None, int | None]:
    assert verdict.status == "corrupt", verdict
    assert verdict.overlay == {}
    return verdict.problem, verdict.first_bad_seq


changes_strategy = st.lists(st.tuples(st.sampled_from(ACCOUNTS), st.sampled_from(STATES)))


@given(changes_strategy, st.booleans())
def test_any_sequence_of_mutations_verifies_and_folds_to_the_last_state(
    changes: list[tuple[str, str]], signed: bool
) -> None:
    key = KEY if signed else None
    records, anchor = build(changes, key)

    verdict = fold(
        records,
        anchor,
        key=key,
        witness=Witness(len(records), records[-1].hash) if records else None,
    )

    last = dict(changes)  # later pairs overwrite earlier ones: the last state per account
    assert verdict.status == ("ok" if changes else "absent")
    assert verdict.revision == len(changes)
    assert dict(verdict.overlay) == last
    assert [r.seq for r in records] == list(range(1, len(changes) + 1))


@given(changes_strategy.filter(lambda c: len(c) >= 2), st.data())
def test_deleting_any_record_reads_corrupt(
    changes: list[tuple[str, str]], data: st.DataObject
) -> None:
    records, anchor = build(changes)
    gone = data.draw(st.integers(0, len(records) - 1))

    problem, first_bad = corrupt_at(fold(records[:gone] + records[gone + 1 :], anchor, key=KEY))

    assert first_bad == gone + 1
    assert problem == ("truncated" if gone == len(records) - 1 else "sequence-gap")


@given(changes_strategy.filter(bool), st.data())
def test_editing_any_field_of_any_record_reads_corrupt(
    changes: list[tuple[str, str]], data: st.DataObject
) -> None:
    records, anchor = build(changes)
    at = data.draw(st.integers(0, len(records) - 1))
    edit = data.draw(
        st.sampled_from(
            [
                {"state": "enabled" if records[at].state != "enabled" else "disabled"},
                {"account_id": "acct-z"},
                {"actor": "mallory"},
                {"reason": "nothing to see"},
                {"revoked_keys": records[at].revoked_keys + 1},
                {"at": records[at].at + timedelta(microseconds=1)},
                {"on_behalf_of": "someone"},
                {"authenticated_by": "body"},
            ]
        )
    )
    records[at] = replace(records[at], **edit)  # type: ignore[arg-type]

    assert corrupt_at(fold(records, anchor, key=KEY)) == ("hash-mismatch", at + 1)


def test_an_edit_rehashed_without_the_key_reads_corrupt() -> None:
    records, anchor = build([("acct-a", "disabled"), ("acct-a", "enabled"), ("acct-b", "draining")])
    # The forger rewrites record 2 and re-links everything after it...
    forged = [records[0], rehashed(replace(records[1], state="disabled"))]
    forged.append(rehashed(replace(records[2], prev_hash=forged[1].hash)))
    assert corrupt_at(fold(forged, anchor, key=KEY)) == ("anchor-head-mismatch", 1)
    # ...and updates the anchor, but cannot sign it.
    assert anchor is not None
    unsigned = Anchor(3, forged[2].hash, None)
    assert corrupt_at(fold(forged, unsigned, key=KEY)) == ("anchor-unsigned", 1)
    wrong_key = anchor_for(3, forged[2].hash, b"guessed")
    assert corrupt_at(fold(forged, wrong_key, key=KEY)) == ("anchor-signature-invalid", 1)


def test_a_record_rehashed_alone_breaks_the_next_link() -> None:
    records, anchor = build([("acct-a", "disabled"), ("acct-a", "enabled"), ("acct-b", "draining")])
    records[1] = rehashed(replace(records[1], state="draining"))
    assert corrupt_at(fold(records, anchor, key=KEY)) == ("link-broken", 3)


def test_emptying_or_unanchoring_a_chain_reads_corrupt() -> None:
    records, anchor = build([("acct-a", "disabled"), ("acct-b", "draining")])
    assert corrupt_at(fold([], anchor, key=KEY)) == ("truncated", 1)
    assert corrupt_at(fold(records, None, key=KEY)) == ("anchor-missing", 1)
    assert fold([], None, key=KEY).status == "absent"


def test_a_rollback_to_an_older_signed_anchor_is_caught_by_the_witness() -> None:
    records, _ = build([("acct-a", "disabled"), ("acct-a", "enabled"), ("acct-a", "disabled")])
    older_anchor = anchor_for(2, records[1].hash, KEY)
    rolled_back = records[:2]
    assert fold(rolled_back, older_anchor, key=KEY).status == "ok"  # coherent and signed

    witness = Witness(3, records[2].hash)
    assert corrupt_at(fold(rolled_back, older_anchor, key=KEY, witness=witness)) == (
        "behind-witness",
        3,
    )
    # emptying both the table and the anchor is caught by the witness alone
    assert corrupt_at(fold([], None, key=KEY, witness=witness)) == ("behind-witness", 1)


def test_a_witness_of_a_different_head_reads_corrupt() -> None:
    records, anchor = build([("acct-a", "disabled"), ("acct-b", "disabled")])
    assert corrupt_at(fold(records, anchor, key=KEY, witness=Witness(1, "f" * 64))) == (
        "witness-head-mismatch",
        1,
    )
    # a witness behind the chain (it missed the latest append) is fine
    assert fold(records, anchor, key=KEY, witness=Witness(1, records[0].hash)).status == "ok"


def test_signing_must_match_the_configuration() -> None:
    records, anchor = build([("acct-a", "disabled")], key=None)
    assert fold(records, anchor, key=None).status == "ok"
    assert corrupt_at(fold(records, anchor, key=KEY)) == ("anchor-unsigned", 1)
    signed_records, signed = build([("acct-a", "disabled")], key=KEY)
    assert corrupt_at(fold(signed_records, signed, key=None)) == ("anchor-signed-without-key", 1)


@pytest.mark.parametrize("unknown", ["suspended", "DISABLED", "", "enabled "])
def test_an_unknown_state_folds_as_disabled(unknown: str) -> None:
    records, anchor = build([("acct-a", "draining"), ("acct-a", unknown), ("acct-b", "enabled")])
    verdict = fold(records, anchor, key=KEY)
    assert verdict.status == "ok"
    assert verdict.overlay == {"acct-a": "disabled", "acct-b": "enabled"}


def test_a_corrupt_chain_is_never_extended() -> None:
    records, anchor = build([("acct-a", "disabled")])
    verdict = fold([], anchor, key=KEY)
    with pytest.raises(ValueError, match="corrupt"):
        extend(verdict, entry(), revoked_keys=0, key=KEY)
    assert records[0].prev_hash == GENESIS

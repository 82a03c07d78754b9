"""Fold and verify: a chain plus its anchor (and the witness, when there is one) become
`ok | absent | corrupt` and the admin overlay. Verified on every fold, never trusted.

What reads `corrupt`, and the `first_bad_seq` reported (the first sequence number at which
verification fails):

    sequence-gap            record k is missing (a middle record was deleted)         k
    link-broken             record k does not link to record k-1                       k
    hash-mismatch           record k's fields do not match its hash (an edit)          k
    truncated               fewer records than the anchor counts                       n+1
    unanchored-records      more records than the anchor counts                        count+1
    anchor-missing          records exist but the anchor does not                      1
    anchor-head-mismatch    the anchor's head is not the chain's head                  1
    anchor-unsigned         an audit key is set and the anchor carries no signature    1
    anchor-signature-invalid  the signature does not verify with the audit key         1
    anchor-signed-without-key the anchor is signed but no audit key is configured      1
    behind-witness          fewer records than the witness has seen (a rollback)       n+1
    witness-head-mismatch   record w is not the one the witness saw                    1

Where the evidence cannot say which record was rewritten (a coherent rewrite re-hashes
everything after it), 1 is reported: nothing in the chain can be trusted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import get_args

from leasegate.audit.chain import (
    ACCOUNT_STATE,
    GENESIS,
    TENANT_BUDGET,
    Anchor,
    AuditRecord,
    Entry,
    anchor_for,
    link,
    record_hash,
    signature_valid,
)
from leasegate.core.errors import GatewayError
from leasegate.core.ports.witness import Witness
from leasegate.core.records import AdminState
from leasegate.core.vocab import ChainStatus
from leasegate.spend import PERIODS, Period, TenantBudget
from leasegate.spend.prices import parse_amount

KNOWN_STATES: frozenset[str] = frozenset(get_args(AdminState))


CHAIN_DOES_NOT_VERIFY = "the admin audit chain does not verify"
"""The one wording of the chain's corruption, in every refusal it causes."""


def held_while_corrupt() -> GatewayError:
    """The refusal of whatever needs the account states (a mint, a view of the overlay)
    while the chain does not verify: nothing fails open."""
    return GatewayError(
        "account-state-unavailable",
        f"{CHAIN_DOES_NOT_VERIFY}: account states are held until an operator repairs it",
    )


def corrupt_error(verdict: ChainVerdict) -> GatewayError:
    """The refusal of an operator's change to a chain that does not verify, with where."""
    return GatewayError(
        "audit-chain-corrupt",
        f"{CHAIN_DOES_NOT_VERIFY} ({verdict.problem} at seq {verdict.first_bad_seq})",
        extra={"first_bad_seq": verdict.first_bad_seq, "problem": verdict.problem},
    )


@dataclass(frozen=True, slots=True)
class ChainVerdict:
    status: ChainStatus
    revision: int
    """The number of records read (the chain's length)."""
    head_hash: str
    """The hash of the last record read; GENESIS for an empty chain."""
    overlay: Mapping[str, AdminState] = field(default_factory=dict)
    """account id -> state, folded from the chain; empty when corrupt (nothing is trusted)."""
    first_bad_seq: int | None = None
    problem: str | None = None
    """One of the names in this module's docstring, when corrupt."""
    budgets: Mapping[str, TenantBudget] = field(default_factory=dict)
    """tenant -> its budget per period, folded from `tenant-budget` records (the last one per
    tenant wins; a cleared one removes it); empty when corrupt."""


def folded_state(state: str) -> AdminState:
    """A state this build does not know folds as `disabled`: every value the field has ever
    held is a withdrawal of some strength, so a newer build's record is far likelier a
    narrower withdrawal than a permission. Over-withdrawing is loud and reversible."""
    if state == "enabled":
        return "enabled"
    if state == "draining":
        return "draining"
    return "disabled"


def fold(
    records: Sequence[AuditRecord],
    anchor: Anchor | None,
    *,
    key: bytes | None,
    witness: Witness | None = None,
) -> ChainVerdict:
    """Verify `records` (ordered by seq) against `anchor`, the audit key and the witness."""
    overlay: dict[str, AdminState] = {}
    budgets: dict[str, TenantBudget] = {}
    head = GENESIS
    for position, record in enumerate(records, start=1):
        problem = _record_problem(record, position, head)
        if problem is not None:
            return _corrupt(len(records), head, position, problem)
        head = record.hash
        if record.kind == ACCOUNT_STATE:
            overlay[record.account_id] = folded_state(record.state)
        elif record.kind == TENANT_BUDGET and record.tenant is not None:
            _fold_budget(budgets, record)
    count = len(records)
    problem_at = _anchor_problem(records, anchor, key, head) or _witness_problem(records, witness)
    if problem_at is not None:
        problem, first_bad = problem_at
        return _corrupt(count, head, first_bad, problem)
    return ChainVerdict("ok" if count else "absent", count, head, overlay, budgets=budgets)


def folded_budget(record: AuditRecord) -> TenantBudget | None:
    """The budget a verified `tenant-budget` record sets; None when it clears it. A period
    or amount this build cannot read folds as None too (nothing to enforce is the only
    reading that never refuses on a guess)."""
    if record.period not in PERIODS or (record.max_tokens is None and record.max_cost is None):
        return None
    try:
        cost = None if record.max_cost is None else parse_amount(record.max_cost, "max_cost")
    except ValueError:
        return None
    period: Period = "day" if record.period == "day" else "month"
    return TenantBudget(period, record.max_tokens, cost)


def _fold_budget(budgets: dict[str, TenantBudget], record: AuditRecord) -> None:
    assert record.tenant is not None  # noqa: S101 - checked by the caller
    budget = folded_budget(record)
    if budget is None:
        budgets.pop(record.tenant, None)
    else:
        budgets[record.tenant] = budget


def _record_problem(record: AuditRecord, position: int, prev_hash: str) -> str | None:
    if record.seq != position:
        return "sequence-gap"
    if record.prev_hash != prev_hash:
        return "link-broken"
    if record_hash(record) != record.hash:
        return "hash-mismatch"
    return None


def _anchor_problem(
    records: Sequence[AuditRecord], anchor: Anchor | None, key: bytes | None, head: str
) -> tuple[str, int] | None:
    count = len(records)
    if anchor is None:
        return ("anchor-missing", 1) if count else None
    if key is not None and anchor.signature is None:
        return "anchor-unsigned", 1
    if key is not None and not signature_valid(anchor, key):
        return "anchor-signature-invalid", 1
    if key is None and anchor.signature is not None:
        return "anchor-signed-without-key", 1
    if count < anchor.count:
        return "truncated", count + 1
    if count > anchor.count:
        return "unanchored-records", anchor.count + 1
    if anchor.head_hash != head:
        return "anchor-head-mismatch", 1
    return None


def _witness_problem(
    records: Sequence[AuditRecord], witness: Witness | None
) -> tuple[str, int] | None:
    if witness is None or witness.revision <= 0:
        return None
    if len(records) < witness.revision:
        return "behind-witness", len(records) + 1
    if records[witness.revision - 1].hash != witness.head_hash:
        return "witness-head-mismatch", 1
    return None


def _corrupt(count: int, head: str, first_bad: int, problem: str) -> ChainVerdict:
    return ChainVerdict("corrupt", count, head, {}, first_bad, problem)


def extend(
    verdict: ChainVerdict, entry: Entry, *, revoked_keys: int, key: bytes | None
) -> tuple[AuditRecord, Anchor]:
    """The record that appends `entry` to a verified chain, and the anchor that goes with it."""
    if verdict.status == "corrupt":
        raise ValueError("a corrupt chain is never extended")
    record = link(
        entry, seq=verdict.revision + 1, prev_hash=verdict.head_hash, revoked_keys=revoked_keys
    )
    return record, anchor_for(record.seq, record.hash, key)

"""The spill file on a real disk, driven by Hypothesis: any interleaving of appends, replays
(written or failed) and process restarts hands back every row once, in order."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from leasegate.core.records import EvidenceRow
from leasegate.proxy.evidence_spill import SpillFile
from tests.integration.test_evidence_writer import BASE

URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/spill_model"


def _row(n: int) -> EvidenceRow:
    return replace(
        BASE,
        request_id=f"req-{n}",
        requested_model="gpt-x\ud800" if n % 7 == 0 else "gpt-4o",  # survives the file too
        started_at=BASE.started_at + timedelta(microseconds=n),
    )


class SpillMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="lg-spill-"))
        self.spill = SpillFile.open(self.root, URL)
        self.expected: list[EvidenceRow] = []
        self.next = 0

    @rule(count=st.integers(1, 30))
    def append(self, count: int) -> None:
        for _ in range(count):
            row = _row(self.next)
            self.next += 1
            assert self.spill.append(row)
            self.expected.append(row)

    @rule(limit=st.integers(1, 40), written=st.booleans())
    def replay(self, limit: int, written: bool) -> None:
        rows = self.spill.peek(limit)
        assert rows == self.expected[: len(rows)]
        assert rows or not self.expected
        if written:  # the database took them; else the write failed and they stay
            self.spill.consume()
            del self.expected[: len(rows)]

    @rule(synced=st.booleans())
    def restart(self, synced: bool) -> None:
        if synced:
            self.spill.sync()
        self.spill.close()
        self.spill = SpillFile.open(self.root, URL)

    @invariant()
    def counts_agree(self) -> None:
        assert self.spill.pending == len(self.expected)

    def teardown(self) -> None:
        self.spill.close()
        leftovers = list(self.root.rglob("*.jsonl"))
        shutil.rmtree(self.root)
        if not self.expected:
            assert leftovers == []  # nothing left behind once everything is replayed


SpillMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
test_spill_hands_back_every_row_once_in_order = SpillMachine.TestCase

"""The audit witness inside one process (embedded mode): it lasts as long as the process.

It catches a rollback done under a running gateway; across a restart only the anchor (and its
signature) stand guard. Production mode keeps the witness in Redis instead.
"""

from __future__ import annotations

from leasegate.core.ports.witness import Witness


class InProcessAuditWitness:
    def __init__(self) -> None:
        self._witness: Witness | None = None

    async def read(self) -> Witness | None:
        return self._witness

    async def advance(self, witness: Witness) -> None:
        if self._witness is None or witness.revision > self._witness.revision:
            self._witness = witness

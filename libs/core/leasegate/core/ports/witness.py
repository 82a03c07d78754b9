"""The audit chain's witness outside the database: a high-water mark that only moves forward.

A signed anchor cannot stop a rollback (old rows restored together with an older signed
anchor); a second copy of the head kept somewhere the database's owner does not write can.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Witness:
    revision: int
    """The highest chain length ever witnessed."""
    head_hash: str
    """The hash of record number `revision`."""


class AuditWitness(Protocol):
    async def read(self) -> Witness | None:
        """The high-water mark, or None when nothing was ever witnessed (or it was lost)."""

    async def advance(self, witness: Witness) -> None:
        """Record `witness` if its revision is higher than the stored one; never go back."""

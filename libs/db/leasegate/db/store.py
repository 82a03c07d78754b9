"""The one storage object services are handed: every repository over one Database."""

from __future__ import annotations

from leasegate.db.decisions import DecisionRepository
from leasegate.db.engine import Database
from leasegate.db.evidence import EvidenceRepository
from leasegate.db.hops import HopRepository
from leasegate.db.keys import KeyRepository
from leasegate.db.mint import MintRepository
from leasegate.db.pool import PoolRepository
from leasegate.db.usage import UsageRepository


class Store(
    KeyRepository,
    MintRepository,
    DecisionRepository,
    EvidenceRepository,
    HopRepository,
    PoolRepository,
    UsageRepository,
):
    """Implements the Protocols of leasegate.core.ports.storage; each call is one transaction.

    Services only ever see the dataclasses of leasegate.core.records and the refusals of
    leasegate.core.ports.storage, never a SQLAlchemy object.
    """

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.db = db

    @classmethod
    def connect(cls, url: str) -> Store:
        return cls(Database.connect(url))

    async def close(self) -> None:
        await self.db.dispose()

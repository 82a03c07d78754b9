"""The console's live sessions, shared by every control-plane replica.

A console cookie is signed (`leasegate.control_plane.console.session`), but a signature alone
cannot be taken back: a copy made before sign-out would stay valid until it expires. So a
session is valid only while it is also *open* here. Signing in opens it until its expiry;
signing out closes it; `retire` closes every session opened with a credential a replica no
longer holds (a token removed or changed, or a new console secret). This is an allow-list,
not a list of revocations: losing the store's data (a Redis restart without persistence)
signs everyone out instead of bringing signed-out sessions back.

A session is named by `credential` (a keyed fingerprint of the token it was opened with, never
the token) and `session_id` (random, in the signed cookie).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol


class ConsoleSessions(Protocol):
    async def open(self, credential: str, session_id: str, expires_at: float, now: float) -> None:
        """Record the session as open until `expires_at` (epoch seconds); forget every
        session that expired by `now`."""

    async def is_open(self, credential: str, session_id: str, now: float) -> bool:
        """Whether the session is open and not expired: one store round trip at most."""

    async def close(self, credential: str, session_id: str) -> None:
        """End the session for every replica (idempotent)."""

    async def retire(self, keep: Collection[str], now: float) -> int:
        """Close every open session whose credential is not in `keep`; how many were."""

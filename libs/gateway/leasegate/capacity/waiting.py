"""Oldest first among one tenant's mints waiting for a full pool: pure bookkeeping, no I/O.

The gateway never queues a mint: a full pool refuses it with a `Retry-After`, and the
dispatch comes back. Left at that, each lease that frees goes to whichever of the tenant's
waiting dispatches asks first after it frees, a lottery: on the fleet bench the batch
tenant's first turns waited 26 s at p99 and up to 49 s, and now and then one waited past its
60 s deadline while younger ones were served. `Waiting` keeps, per (model, tenant), when each
dispatch this process turned away began waiting and when it last asked. A mint that would
take a lease is held back while as many of its tenant's dispatches as there are free leases
waited longer and still ask (`ahead`); the one that has waited longest is told to come back
sooner (`HEAD_RETRY_S`), so a freed lease waits for it a fraction of a second instead of a
whole retry. A dispatch that stops asking for `ACTIVE_S` drops out. Times are epoch
seconds, given.

Each control-plane replica keeps its own: behind a load balancer a replica sees each waiting
dispatch every few of its retries, so the order is kept per replica (docs/capacity.md).
"""

from __future__ import annotations

from typing import NamedTuple

ACTIVE_S = 3.0
"""How long after its last ask a waiting dispatch still counts: a few of its retries."""
HEAD_RETRY_S = 0.1
"""The `Retry-After` of the tenant's longest-waiting dispatch: the next lease is its, and
the lease waits for it no longer than this (0.25 s cost the fleet bench about a point of
goodput in idle leases; one such dispatch per tenant and model asks this often)."""


class _Waiter(NamedTuple):
    began: float
    order: int
    """Of its first refusal among this process's: breaks ties of `began`."""
    last: float
    """When it last asked."""

    @property
    def place(self) -> tuple[float, int]:
        return self.began, self.order


class Waiting:
    """Which of each tenant's dispatches a full pool turned away, since when."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, str], dict[str, _Waiter]] = {}
        self._turned_away = 0

    def refused(self, model: str, tenant: str, dispatch_id: str, now: float) -> None:
        """The dispatch was turned away now: it waits since its first refusal. Every
        dispatch that stopped asking is dropped here, so what is kept follows what waits."""
        for pool in list(self._waiters):
            self._active(*pool, now)
        waiters = self._waiters.setdefault((model, tenant), {})
        known = waiters.get(dispatch_id)
        if known is None:
            self._turned_away += 1
            waiters[dispatch_id] = _Waiter(now, self._turned_away, now)
        else:
            waiters[dispatch_id] = known._replace(last=now)

    def served(self, model: str, tenant: str, dispatch_id: str) -> None:
        """The dispatch took a lease: it waits no more."""
        waiters = self._waiters.get((model, tenant))
        if waiters is not None:
            waiters.pop(dispatch_id, None)
            if not waiters:
                del self._waiters[(model, tenant)]

    def ahead(self, model: str, tenant: str, dispatch_id: str, now: float) -> int:
        """How many of the tenant's other dispatches, still asking, began waiting before this
        one (a dispatch never turned away began now)."""
        waiters = self._active(model, tenant, now)
        own = waiters.get(dispatch_id)
        place = own.place if own is not None else (now, self._turned_away + 1)
        return sum(1 for d, w in waiters.items() if d != dispatch_id and w.place < place)

    def head(self, model: str, tenant: str, dispatch_id: str, now: float) -> bool:
        """Whether the dispatch is the tenant's longest-waiting one still asking."""
        return dispatch_id in self._active(model, tenant, now) and not self.ahead(
            model, tenant, dispatch_id, now
        )

    def _active(self, model: str, tenant: str, now: float) -> dict[str, _Waiter]:
        waiters = self._waiters.get((model, tenant))
        if waiters is None:
            return {}
        for dispatch_id, waiter in list(waiters.items()):
            if now - waiter.last > ACTIVE_S:
                del waiters[dispatch_id]
        if not waiters:
            del self._waiters[(model, tenant)]
        return waiters

    def __len__(self) -> int:
        """The dispatches kept, every pool's."""
        return sum(len(waiters) for waiters in self._waiters.values())

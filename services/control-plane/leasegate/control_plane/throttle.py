"""How many wrong tokens one client address may try, at the console's sign-in and on the
control API's bearer tokens alike: one budget per address, whichever door the guesses use.

At most `max_failures` failed authentications from one address in any `window_s`: past that,
every attempt from the address, right token or wrong, is refused until the oldest of those
failures is `window_s` old (the wait is the answer's Retry-After). A refused attempt never
reaches the token check, so it cannot confirm a guess. A successful console sign-in clears the
address's failures; other addresses are never affected. The table is per process and bounded:
addresses whose failures are all older than the window are dropped first, then the least
recently failed. Pure: the caller passes the time (monotonic seconds).
"""

from __future__ import annotations

from collections import deque

MAX_FAILURES = 5
WINDOW_S = 60.0
MAX_ADDRESSES = 10_000


class FailedAuthThrottle:
    def __init__(
        self,
        max_failures: int = MAX_FAILURES,
        window_s: float = WINDOW_S,
        max_addresses: int = MAX_ADDRESSES,
    ) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self.max_addresses = max_addresses
        self._failures: dict[str, deque[float]] = {}

    def wait_s(self, address: str, now: float) -> float | None:
        """Seconds until `address` may try again, or None if it may try now."""
        failures = self._failures.get(address)
        if failures is None or len(failures) < self.max_failures:
            return None
        left = failures[0] + self.window_s - now
        return left if left > 0 else None

    def failed(self, address: str, now: float) -> None:
        failures = self._failures.pop(address, None)
        if failures is None:
            failures = deque(maxlen=self.max_failures)
            if len(self._failures) >= self.max_addresses:
                self._prune(now)
        failures.append(now)
        self._failures[address] = failures  # last in the dict: the most recently failed

    def succeeded(self, address: str) -> None:
        self._failures.pop(address, None)

    def _prune(self, now: float) -> None:
        stale = [a for a, times in self._failures.items() if times[-1] + self.window_s <= now]
        for address in stale:
            del self._failures[address]
        while len(self._failures) >= self.max_addresses:
            del self._failures[next(iter(self._failures))]

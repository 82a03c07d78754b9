"""Redis pub/sub channels listened to in the background on one connection, for every fan-out
that needs one (revocations, health news): a proxy holds one subscription for both, so one
heartbeat serves both (`buses_redis.redis_buses` builds it; a bus built alone has one of its
own).

Each owner registers its channel's handlers with `start`. An owner that joins a subscription
already live is told to reset at once (`on_reset`): what was published on its channel before
it joined was not kept for it. Every (re)connect resets every owner.

Pub/sub is fire-and-forget, so a subscriber that loses its connection may miss messages: on
every (re)connect it calls `on_reset`, and the owner falls back to the store (which always
knows) until it has caught up. The subscription never holds up start-up: it runs in the
background and reconnects with backoff (0.5 s doubling to 5 s; one log line when it goes
down, then one a minute).

A heartbeat bounds how long a subscription can be dead without anyone knowing, and it follows
the traffic, so an idle process sends almost nothing:

- `trusted()` is what a request asks before it relies on the subscription (the proxy's key
  cache, its health view): true only while the subscription is live and has delivered
  something (a message, a PONG) within `SILENT_HEARTBEATS * heartbeat_s`. Asked when the
  last PING is `heartbeat_s` old, it sends one (from the request's own turn of the loop: no
  timer); asked when a PING has gone unanswered for `SILENT_HEARTBEATS * heartbeat_s`, it
  drops the connection, which is replaced. So at the rates requests arrive the PINGs go
  every `heartbeat_s`, and a connection that stays open but silent (a partition, a middlebox
  that lost the flow, a frozen relay) is distrusted within `SILENT_HEARTBEATS * heartbeat_s`
  of its last sign of life, as before.
- Asked within `ASKED_WITHIN_S` but less often than the silence bound (admissions come in
  bursts with only open streams between them: a fleet's long answers), the listener sends a
  PING itself half a heartbeat before the last sign of life would outlast the bound, so the
  next burst finds the subscription trusted instead of every request of it asking Redis (and
  the key cache's short trust) for the admission. At steady rates the requests' own PINGs
  come first and this timer never fires.
- Nobody asking for `ASKED_WITHIN_S` (an idle process), the subscription pings itself every
  `IDLE_HEARTBEAT_S` and is dropped and replaced after `SILENT_HEARTBEATS` of those without a
  sign of life. The first request after an idle spell finds it not trusted (its last sign of
  life is older than the bound) and wakes a PING; it and those before the PONG are served as
  while the subscription is down (the key cache trusts an entry 1 s, the health view asks
  Redis), unless they ask `confirmed()`: then they wait (at most `CONFIRM_WITHIN_S`) for
  that one PONG, a single round trip for the whole burst, and rely on the subscription.

`ready` says whether the subscription is live (readiness, metrics), false from a failure or a
drop until a new subscription is confirmed; owners that cache trust their cache less while
`trusted()` is false.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from redis.asyncio import RedisCluster
from redis.asyncio.client import PubSub

from leasegate.core.tasks import stop_task
from leasegate.kv.errors import REDIS_ERRORS, unavailable
from leasegate.kv.redis_client import RedisClient

OnMessage = Callable[[bytes | str], None]
OnReset = Callable[[], None]

_FIRST_RETRY_S = 0.5
_MAX_RETRY_S = 5.0
"""Reconnection backs off from 0.5 s to 5 s: a Redis that returns is used within 5 s."""
_STILL_DOWN_LOG_EVERY_S = 60.0
SILENT_HEARTBEATS = 3
"""Heartbeats without a sign of life after which the subscription counts as dead."""
IDLE_HEARTBEAT_S = 10.0
"""The heartbeat of a subscription nobody has asked `trusted()` of for `ASKED_WITHIN_S`."""
ASKED_WITHIN_S = 5.0
CONFIRM_WITHIN_S = 0.25
"""How long `confirmed()` waits for the answer to the PING that asking sent."""


class RedisSubscription:
    """`name` says what the channels carry, in task names and log lines (on `logger`)."""

    def __init__(
        self,
        client: RedisClient,
        channels: Sequence[str],
        name: str,
        logger: str,
        *,
        reply_within_s: float = 2.0,
        heartbeat_s: float = 0.5,
    ) -> None:
        self._log = logging.getLogger(logger)
        self._client = client
        self._channels = tuple(channels)
        self._owners: dict[str, tuple[OnMessage, OnReset]] = {}
        """Channel -> its owner's handlers (`start`)."""
        self._name = name
        self._task: asyncio.Task[None] | None = None
        self._reply_within_s = reply_within_s
        self._heartbeat_s = heartbeat_s
        self._silent_after_s = SILENT_HEARTBEATS * heartbeat_s
        self._went_live = asyncio.Event()
        self._wanted = False
        self._live = False
        self._heard = self._pinged = self._asked = float("-inf")
        """Loop times: the last sign of life, the last PING, the last `trusted()`."""
        self._pubsub: PubSub | None = None
        self._pinging: asyncio.Task[None] | None = None
        self._dropping: asyncio.Task[None] | None = None
        self._sign: asyncio.Future[None] | None = None
        """Resolved by the listener at the next sign of life (or its end): `confirmed()`."""

    @property
    def ready(self) -> bool:
        """False while a subscription is wanted and not live (messages could be missed)."""
        return self._live or not self._wanted

    def trusted(self) -> bool:
        """Live and heard from within the silence bound: what it has delivered is all there
        is. Asking keeps the heartbeat going (see the module docstring)."""
        if not self._wanted:
            return True
        if not self._live or self._pubsub is None:
            return False
        loop = asyncio.get_running_loop()
        now, asked = loop.time(), self._asked
        self._asked = now
        waiting = self._pinged > self._heard
        if waiting and now - self._pinged > self._silent_after_s:
            self._drop(self._pubsub)
            return False
        if not waiting and (
            now - self._pinged >= self._heartbeat_s or now - asked >= ASKED_WITHIN_S
        ):
            # also the first ask after an idle spell: its PONG wakes the listener, which
            # keeps the heartbeat of an asked subscription from then on
            self._ping(self._pubsub, now)
        return now - self._heard <= self._silent_after_s

    async def confirmed(self) -> bool:
        """`trusted()`, or, when the subscription is live but has not been heard from lately
        (an idle spell), trusted once the PING that asking sent is answered within
        `CONFIRM_WITHIN_S`. Every request of a burst that asks meanwhile waits for that one
        answer instead of each asking the store; the answer comes after every message
        published before it, so what the owner holds is then complete."""
        if self.trusted():
            return True
        if not self._live or self._pubsub is None:
            return False
        if self._sign is None:
            self._sign = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CONFIRM_WITHIN_S):
                await asyncio.shield(self._sign)
        return self.trusted()

    def _signal(self) -> None:
        sign, self._sign = self._sign, None
        if sign is not None and not sign.done():
            sign.set_result(None)

    def _ping(self, pubsub: PubSub, now: float) -> None:
        if self._pinging is not None and not self._pinging.done():
            return
        self._pinged = now

        async def ping() -> None:
            # This task only writes: it never reconnects the connection the listener reads.
            # `pubsub.ping()` would, and a reconnect here racing the listener's own (Redis
            # restarted under both) opened two sockets and lost one unclosed. A connection
            # already down is the listener's to replace.
            connection = pubsub.connection
            if connection is None or not connection.is_connected:
                return
            with contextlib.suppress(*REDIS_ERRORS):
                await connection.send_command("PING", check_health=False)

        self._pinging = asyncio.get_running_loop().create_task(ping())

    def _drop(self, pubsub: PubSub) -> None:
        """A PING went unanswered: close the connection; the listener replaces it."""
        if self._dropping is not None and not self._dropping.done():
            return
        self._live = False
        self._log.warning(
            f"{self._name} subscription stopped answering; replacing it",
            extra={"store": "redis"},
        )

        async def drop() -> None:
            with contextlib.suppress(*REDIS_ERRORS):
                if pubsub.connection is not None:
                    await pubsub.connection.disconnect()

        self._dropping = asyncio.get_running_loop().create_task(drop())

    async def publish(self, channel: str, payload: str) -> None:
        try:
            await self._client.publish(channel, payload)
        except REDIS_ERRORS as exc:
            raise unavailable(exc) from exc

    async def start(self, channel: str, on_message: OnMessage, on_reset: OnReset) -> None:
        """Deliver `channel`'s messages to `on_message`, and
        start listening in the background if no owner has yet; return once live, or after
        `reply_within_s` anyway: a process started while Redis is down still binds its port,
        and `ready` turns true when the subscription is live."""
        if channel not in self._channels:
            raise ValueError(f"{channel!r} is not one of the {self._name} channels")
        self._owners[channel] = (on_message, on_reset)
        if self._task is None:
            self._wanted = True
            self._went_live = asyncio.Event()
            self._task = asyncio.create_task(self._listen(), name=self._name)
        elif self._live:
            on_reset()  # joined late: what its channel carried before was not kept
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._reply_within_s):
                await self._went_live.wait()

    def _on_message(self, channel: bytes | str, data: bytes | str) -> None:
        name = channel.decode() if isinstance(channel, bytes) else channel
        owner = self._owners.get(name)
        if owner is not None:
            owner[0](data)

    def _on_reset(self) -> None:
        for _, on_reset in list(self._owners.values()):
            on_reset()

    async def _listen(self) -> None:
        loop = asyncio.get_running_loop()
        delay, down_since, logged_at = _FIRST_RETRY_S, None, 0.0
        while True:
            try:
                await self._deliver(restored=down_since is not None)
            except REDIS_ERRORS as exc:
                self._live = False
                now = loop.time()
                if down_since is None or now - logged_at >= _STILL_DOWN_LOG_EVERY_S:
                    # the store's name and the error's type: never the URL (credentials)
                    self._log.warning(
                        f"{self._name} subscription down; retrying with backoff",
                        extra={"store": "redis", "error": type(exc).__name__},
                    )
                    logged_at = now
                down_since = down_since if down_since is not None else now
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_S)
                continue
            delay, down_since = _FIRST_RETRY_S, None

    async def _deliver(self, *, restored: bool) -> None:
        """Listen until the connection fails or goes silent (a partition): then raise. Live
        (`ready`, `on_reset` called) once Redis has confirmed the SUBSCRIBE."""
        loop = asyncio.get_running_loop()
        pubsub = self._client.pubsub()
        try:
            if isinstance(self._client, RedisCluster):
                # cluster pub/sub routes SUBSCRIBE by the slot map, loaded on first use
                await self._client.initialize()
            await pubsub.subscribe(*self._channels)  # one command: all at once
            self._pubsub = pubsub
            self._heard = self._pinged = loop.time()
            while True:
                wait = await self._heartbeat(pubsub, loop.time())
                message = await pubsub.get_message(timeout=max(wait, 0.001))
                if message is not None:
                    self._heard = loop.time()
                    kind = message.get("type")
                    if kind == "message":
                        self._on_message(message["channel"], message["data"])
                    elif kind == "subscribe" and not self._live:
                        self._on_reset()
                        self._live = True
                        self._went_live.set()
                        if restored:
                            self._log.info(
                                f"{self._name} subscription restored", extra={"store": "redis"}
                            )
                    self._signal()
        finally:
            self._live = False
            self._pubsub = None
            self._signal()
            with contextlib.suppress(*REDIS_ERRORS):
                await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _heartbeat(self, pubsub: PubSub, now: float) -> float:
        """What the heartbeat asks of the listener now: the PING it sends itself, the silence
        after which it raises (the connection is replaced); returns how long to listen."""
        if now - self._asked < ASKED_WITHIN_S:
            # requests ask `trusted()`: they send the PINGs and judge the silence; between
            # asks further apart than the bound (admissions in bursts, open streams between
            # them) the listener renews the trust before it lapses
            renew_at = self._heard + self._silent_after_s - self._heartbeat_s / 2
            answered = self._pinged <= self._heard
            if answered and now >= renew_at:
                self._ping(pubsub, now)
                answered = False
            wait = self._asked + ASKED_WITHIN_S - now
            if answered:
                wait = min(wait, renew_at - now)
        else:
            if now - self._pinged >= IDLE_HEARTBEAT_S:
                await pubsub.ping()
                self._pinged = now
            if now - self._heard > SILENT_HEARTBEATS * IDLE_HEARTBEAT_S:
                raise TimeoutError(f"the {self._name} subscription stopped answering")
            wait = min(
                self._pinged + IDLE_HEARTBEAT_S,
                self._heard + SILENT_HEARTBEATS * IDLE_HEARTBEAT_S,
            )
            wait -= now
        if not self._live:
            # unconfirmed (or dropped by `trusted()`): replaced once silent this long
            if now - self._heard > self._silent_after_s:
                raise TimeoutError(f"the {self._name} subscription is not answering")
            wait = min(wait, self._heard + self._silent_after_s - now)
        return wait

    async def aclose(self, channel: str) -> None:
        """`channel`'s owner is done with it; the listener stops once every owner is."""
        self._owners.pop(channel, None)
        if self._owners:
            return
        await stop_task(self._task)
        self._task = None

"""`make soak`: mixed load on the production proxy for a long time, its RSS and open file
descriptors sampled every 10 s, to show memory that follows live work and no leak.

    python -m bench.soak [--minutes 20] [--rate 20] [--streams 200] [--cool-s 60]

Starts the bench stack (bench/stack.py) and, against the slow upstream (bench/paced.py):
non-streaming 8 KB chat requests at `--rate` per second, one in a hundred of them to a model
whose only account answers 429 (with `retry-after`) and 500 in turn, `--streams` paced
streams held open back to back, and a mint and a revoke on the control plane every 50
requests (so the proxy's key cache and revocation list see keys come and go). After
`--minutes` the load stops and sampling goes on for `--cool-s`. Writes
bench/results/soak.csv (the samples) and bench/results/soak.svg (RSS and FDs over time), and
prints the RSS growth after warm-up (a linear fit over the load's second half), the FD range,
the RSS after the cool-down, and the evidence rows written against the requests sent (one
terminal row per request: they must be equal).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx

from bench.load import rss_kb
from bench.paced import FLAKY_MODEL, PACED_MODEL, chat_body, read_body, read_head, render
from bench.stack import CONTROL_TOKEN, Options, Stack, mint_key, start_stack

RESULTS = Path(__file__).parent / "results"
SAMPLE_S = 10.0
GROWTH_TARGET = 0.05
"""MiB per minute of RSS growth after warm-up that a day without growth allows (issue 26)."""
FD_SLACK = 5
"""How far the open descriptors may wander over the load's second half and still be flat
(or 2 % of them, when that is more)."""


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


FLAKY_EVERY = 100
"""One plain request in this many goes to the failing account."""


def _closed_while_idle(exc: BaseException) -> bool:
    """The connection was closed before any byte of an answer: the request never reached
    the proxy (its keep-alive timeout closed the idle connection first)."""
    return isinstance(exc, ConnectionError) or (
        isinstance(exc, asyncio.IncompleteReadError) and not exc.partial
    )


class _Load:
    def __init__(self, stack: Stack, key: str, flaky_key: str) -> None:
        self.stack = stack
        self.key = key
        self.flaky_key = flaky_key
        self.flaky_sent = 0
        self.sent = 0
        self.ok = 0
        self.answered = 0
        """Requests that got a whole answer, whatever its status."""
        self.lost = 0
        """Requests whose connection failed after the proxy may have read them."""
        self.stop = False
        parts = urlsplit(stack.proxy.url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80

    async def _exchange(
        self, request: bytes, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter]
    ) -> bool:
        conn[1].write(request)
        status, headers = await read_head(conn[0])
        await read_body(conn[0], headers, [])
        self.answered += 1
        return status == 200

    async def plain(self, rate: float) -> None:
        request = render(self.stack.proxy.url, self.key, chat_body(stream=False))
        flaky = render(
            self.stack.proxy.url, self.flaky_key, chat_body(stream=False, model=FLAKY_MODEL)
        )
        idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        tasks: set[asyncio.Task[None]] = set()

        async def one(sending: bytes) -> None:
            reused = bool(idle)
            conn = idle.pop() if idle else await asyncio.open_connection(self.host, self.port)
            try:
                ok = await self._exchange(sending, conn)
            except (OSError, asyncio.IncompleteReadError) as exc:
                conn[1].close()
                if not (reused and _closed_while_idle(exc)):
                    self.lost += 1
                    return
                # the proxy had closed the idle connection (its keep-alive timeout) before
                # reading the request: send it again on a new one, as an HTTP client does
                conn = await asyncio.open_connection(self.host, self.port)
                try:
                    ok = await self._exchange(sending, conn)
                except (OSError, asyncio.IncompleteReadError):
                    conn[1].close()
                    self.lost += 1
                    return
            self.ok += ok  # after the await: concurrent tasks must not overwrite it
            idle.append(conn)

        begin = time.perf_counter()
        plain_sent = 0
        while not self.stop:
            self.sent += 1
            plain_sent += 1
            to_flaky = plain_sent % FLAKY_EVERY == 0
            self.flaky_sent += to_flaky
            task = asyncio.ensure_future(one(flaky if to_flaky else request))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            if plain_sent % 50 == 0:
                await asyncio.to_thread(self._mint_and_revoke, plain_sent)
            await asyncio.sleep(max(0.0, begin + plain_sent / rate - time.perf_counter()))
        await asyncio.gather(*tasks)
        for _, writer in idle:
            writer.close()

    def _mint_and_revoke(self, n: int) -> None:
        url = self.stack.control_plane.url
        key = mint_key(url, f"soak-{n}", PACED_MODEL)
        key_id = key.split("_", 2)[1]
        httpx.delete(
            f"{url}/control/v2/keys/{key_id}",
            headers={"Authorization": f"Bearer {CONTROL_TOKEN}"},
            timeout=10,
        )

    async def streams(self, count: int) -> None:
        request = render(self.stack.proxy.url, self.key, chat_body(stream=True))

        async def worker(offset: float) -> None:
            await asyncio.sleep(offset)
            reader, writer = await asyncio.open_connection(self.host, self.port)
            try:
                while not self.stop:
                    self.sent += 1
                    ok = await self._exchange(request, (reader, writer))
                    self.ok += ok
            except (OSError, asyncio.IncompleteReadError):
                self.lost += 1
            finally:
                writer.close()

        await asyncio.gather(*(worker(i / count) for i in range(count)))


async def _soak(stack: Stack, args: argparse.Namespace) -> list[tuple[float, int, int, int]]:
    key = mint_key(stack.control_plane.url, "soak", PACED_MODEL)
    flaky_key = mint_key(stack.control_plane.url, "soak-flaky", FLAKY_MODEL)
    load = _Load(stack, key, flaky_key)
    pid = stack.proxy.pid
    samples: list[tuple[float, int, int, int]] = []
    start = time.monotonic()

    async def sample_until(end: float) -> None:
        while time.monotonic() < end:
            samples.append((time.monotonic() - start, rss_kb(pid), _fds(pid), load.sent))
            await asyncio.sleep(SAMPLE_S)

    loaded_until = start + args.minutes * 60
    work = asyncio.gather(load.plain(args.rate), load.streams(args.streams))
    await sample_until(loaded_until)
    load.stop = True
    stopped = time.monotonic()
    try:  # what is in flight ends within a stream's length; the cool-down starts after it
        await asyncio.wait_for(work, timeout=10)
    except TimeoutError:
        print("load generator: work still pending 10 s after the stop was cancelled")
    print(f"load drained in {time.monotonic() - stopped:.1f} s")
    await sample_until(time.monotonic() + args.cool_s)
    samples.append((time.monotonic() - start, rss_kb(pid), _fds(pid), load.sent))
    print(
        f"requests sent {load.sent} ({load.flaky_sent} to the failing account), "
        f"answered {load.answered} (200: {load.ok}), lost mid-answer {load.lost}"
    )
    rows = await _evidence_rows(stack.database_url)
    verdict = "equal" if rows == load.sent else f"DIFFER by {rows - load.sent:+d}"
    print(f"evidence rows {rows} for {load.sent} requests sent: {verdict}")
    return samples


async def _evidence_rows(database_url: str) -> int:
    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        count: int = await conn.fetchval("SELECT count(*) FROM evidence")
        return count
    finally:
        await conn.close()


def _slope_mib_per_min(points: list[tuple[float, int]]) -> float:
    if len(points) < 2:
        return float("nan")
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(r for _, r in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    cov = sum((t - mx) * (r - my) for t, r in points)
    return (cov / var) * 60 / 1024 if var else float("nan")


def _svg(samples: list[tuple[float, int, int, int]], loaded_s: float) -> str:
    width, height, pad = 720, 200, 40
    t_max = max(s[0] for s in samples) or 1.0

    def panel(y0: int, values: list[float], label: str, colour: str) -> str:
        top, bottom = max(values), min(values)
        span = (top - bottom) or 1.0
        points = " ".join(
            f"{pad + (t / t_max) * (width - 2 * pad):.1f},"
            f"{y0 + height - pad - ((v - bottom) / span) * (height - 2 * pad):.1f}"
            for (t, *_), v in zip(samples, values, strict=True)
        )
        stop_x = pad + (loaded_s / t_max) * (width - 2 * pad)
        return (
            f'<text x="{pad}" y="{y0 + 20}" font-size="13">{label}: {bottom:.1f} to {top:.1f}'
            f"</text>"
            f'<line x1="{stop_x:.1f}" y1="{y0 + pad}" x2="{stop_x:.1f}" y2="{y0 + height - pad}"'
            ' stroke="#999" stroke-dasharray="4"/>'
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>'
            f'<text x="{pad}" y="{y0 + height - 10}" font-size="11">0 min</text>'
            f'<text x="{width - pad - 40}" y="{y0 + height - 10}" font-size="11">'
            f"{t_max / 60:.1f} min</text>"
        )

    rss = [s[1] / 1024 for s in samples]
    fds = [float(s[2]) for s in samples]
    body = panel(0, rss, "proxy RSS, MiB", "#1f77b4") + panel(height, fds, "open FDs", "#d62728")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{2 * height}">'
        f'<rect width="100%" height="100%" fill="white"/>{body}</svg>\n'
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=20.0, help="plain requests per second")
    parser.add_argument("--streams", type=int, default=200, help="paced streams held open")
    parser.add_argument("--cool-s", type=float, default=60.0, help="sampling after the load")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with ExitStack() as resources:
        stack = start_stack(resources, RESULTS / "logs", Options())
        samples = asyncio.run(_soak(stack, args))
    loaded_s = args.minutes * 60
    RESULTS.mkdir(exist_ok=True)
    lines = ["seconds,rss_kb,open_fds,requests_sent"]
    lines += [f"{t:.1f},{r},{f},{n}" for t, r, f, n in samples]
    (RESULTS / "soak.csv").write_text("\n".join(lines) + "\n")
    (RESULTS / "soak.svg").write_text(_svg(samples, loaded_s))
    during = [(t, r) for t, r, _, _ in samples if loaded_s / 2 <= t <= loaded_s]
    warm = during[0][1] if during else samples[0][1]
    growth = _slope_mib_per_min(during)
    loaded_fds = [f for t, _, f, _ in samples if loaded_s / 2 <= t <= loaded_s]
    idle_fds = samples[0][2], samples[-1][2]
    after = samples[-1][1]
    print(f"1-min load average before/after: {load_before:.2f}/{os.getloadavg()[0]:.2f}")
    print(
        f"RSS growth over the load's second half: {growth:.3f} MiB/min "
        f"({_verdict(growth <= GROWTH_TARGET)} <= {GROWTH_TARGET})"
    )
    low, high = min(loaded_fds, default=0), max(loaded_fds, default=0)
    print(
        f"open FDs over the load's second half {low}-{high} "
        f"({_verdict(high - low <= max(FD_SLACK, high // 50))} flat); idle before the load "
        f"{idle_fds[0]}, after the cool-down {idle_fds[1]} (the pools' kept connections)"
    )
    print(
        f"RSS at the middle of the load {warm / 1024:.1f} MiB, at the end of the cool-down "
        f"{after / 1024:.1f} MiB ({_verdict(abs(after - warm) <= warm * 0.10)} within 10 %)"
    )
    print(f"wrote {RESULTS / 'soak.csv'} and {RESULTS / 'soak.svg'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

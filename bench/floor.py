"""The cost floor: the least a Python forwarder can do per request on this machine.

`python -m bench.floor --port P --upstream URL` serves a bare ASGI callable under uvicorn
(httptools, uvloop: the proxy's own server settings) that reads the body, parses it, rewrites
`model`, forwards it with aiohttp's client (one pooled session, as the proxy's) and relays the
answer: whole for a plain request, chunk by chunk for a stream. No key, no account, no
health, no evidence, no limits, no error handling. `bench.run` measures it beside the proxy so
that a figure read on a faster or slower machine keeps its scale: the proxy's cost per request
over the floor's is what the gateway itself adds.
"""

from __future__ import annotations

import argparse
from typing import Any

import aiohttp
import orjson
import uvicorn

SERVED_MODEL = "gpt-4o"
_RELAYED = {b"content-type"}


class Floor:
    def __init__(self, upstream: str, pool: int) -> None:
        self.upstream = upstream.rstrip("/")
        self.pool = pool
        self.session: aiohttp.ClientSession | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        payload = orjson.loads(b"".join(parts))
        payload["model"] = SERVED_MODEL
        assert self.session is not None  # noqa: S101 - made at start-up
        async with self.session.post(
            self.upstream + scope["path"],
            data=orjson.dumps(payload),
            headers={"content-type": "application/json", "authorization": "Bearer sk-floor"},
        ) as answer:
            headers = [
                (k.lower().encode(), v.encode())
                for k, v in answer.headers.items()
                if k.lower().encode() in _RELAYED
            ]
            await send({"type": "http.response.start", "status": answer.status, "headers": headers})
            if payload.get("stream"):
                async for chunk in answer.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            else:
                await send({"type": "http.response.body", "body": await answer.read()})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.session = aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=self.pool), auto_decompress=False
                )
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.session is not None:
                    await self.session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.floor")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument(
        "--pool", type=int, default=256, help="upstream connections at most (the proxy's default)"
    )
    args = parser.parse_args()
    uvicorn.run(
        Floor(args.upstream, args.pool),
        host="127.0.0.1",
        port=args.port,
        http="httptools",
        loop="uvloop",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()

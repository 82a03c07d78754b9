"""The provider-fidelity mock upstream: its own process, one port, several accounts.

    python -m bench.fleet.mock --port 8099 --accounts accounts.json

Each account (told apart by its credential: `Authorization: Bearer` or `x-api-key`) has token
buckets refilled continuously and empty at start (`bench.fleet.buckets`); a request draws one
request and its tokens (prompt + `max_tokens`, or for Anthropic input and output separately,
its input without the prompt-cache read: Anthropic's current models count no cache reads
toward the input-token limit).
Every answer carries the account's rate-limit headers (OpenAI's `x-ratelimit-*`, Anthropic's
`anthropic-ratelimit-*`, or none); a request the buckets cannot take is answered 429 with
`retry-after` (none for the headerless account) and the provider's rate-limit error body,
charging nothing. An admitted request is answered after `latency_s(max_tokens)`. A session
(named by the first message's first line) whose consecutive answered turns land on the same
account is a prompt-cache hit.

`POST /fleet/reset` empties every bucket and zeroes the counters; `GET /fleet/stats` reads them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from bench.fleet.buckets import (
    Bucket,
    admit,
    anthropic_headers,
    openai_headers,
    retry_after,
)
from bench.fleet.workload import CHARS_PER_TOKEN, WINDOW_S, latency_s


@dataclass
class Counters:
    received: int = 0
    answered: int = 0
    limited: int = 0
    requests: int = 0
    tokens: int = 0
    input_tokens: int = 0
    """Input the limits counted (Anthropic: without cache reads)."""
    output_tokens: int = 0
    cache_lookups: int = 0
    cache_hits: int = 0


@dataclass
class MockAccount:
    id: str
    headers: str
    served: str
    limits: dict[str, int]
    buckets: dict[str, Bucket] = field(default_factory=dict)
    counters: Counters = field(default_factory=Counters)

    def reset(self, now: float) -> None:
        self.buckets = {
            name: Bucket(float(cap), WINDOW_S, 0.0, now) for name, cap in self.limits.items()
        }
        self.counters = Counters()

    def rate_headers(self, now: float) -> dict[str, str]:
        if self.headers == "openai":
            return openai_headers(self.buckets, now)
        if self.headers == "anthropic":
            return anthropic_headers(self.buckets, now, time.time())
        return {}


class Mock:
    def __init__(self, accounts: list[MockAccount]) -> None:
        self.by_secret = {f"sk-fleet-{a.id}": a for a in accounts}
        self.accounts = accounts
        self.sessions: dict[str, tuple[str, int]] = {}
        """Session -> (account of its last answered turn, that turn's prompt tokens)."""
        self.reset()

    def reset(self) -> None:
        now = time.monotonic()
        for account in self.accounts:
            account.reset(now)
        self.sessions.clear()

    def account(self, request: web.Request) -> MockAccount | None:
        secret = request.headers.get("x-api-key") or request.headers.get(
            "authorization", ""
        ).removeprefix("Bearer ")
        return self.by_secret.get(secret)

    async def handle(self, request: web.Request) -> web.Response:
        account = self.account(request)
        anthropic = request.path == "/v1/messages"
        if account is None:
            return _error(401, "invalid_api_key", "authentication_error", anthropic)
        body: dict[str, Any] = await request.json()
        messages = body.get("messages") or []
        prompt = math.ceil(sum(len(str(m.get("content", ""))) for m in messages) / CHARS_PER_TOKEN)
        output = int(body.get("max_tokens") or 0)
        session = str(messages[0].get("content", "")).split("\n", 1)[0] if messages else ""
        last = self.sessions.get(session)
        cached = last[1] if last is not None and last[0] == account.id else 0
        if anthropic:
            # like Anthropic's current models: cache reads count toward no input-token limit
            uncached = float(prompt - cached)
            costs = {"requests": 1.0, "input-tokens": uncached, "output-tokens": float(output)}
        else:
            costs = {"requests": 1.0, "tokens": float(prompt + output)}
        counters = account.counters
        counters.received += 1
        now = time.monotonic()
        wait = admit(account.buckets, costs, now)
        if wait > 0:
            counters.limited += 1
            return self.limited(account, costs, wait, anthropic, now)
        headers = account.rate_headers(now)
        await asyncio.sleep(latency_s(output))
        if last is not None:
            counters.cache_lookups += 1
            counters.cache_hits += last[0] == account.id
        self.sessions[session] = (account.id, prompt)
        counters.answered += 1
        counters.requests += 1
        counters.tokens += prompt + output
        counters.input_tokens += prompt - cached if anthropic else prompt  # as the limit counts
        counters.output_tokens += output
        return web.json_response(
            _answer(account.served, prompt, output, cached, anthropic), headers=headers
        )

    def limited(
        self,
        account: MockAccount,
        costs: dict[str, float],
        wait: float,
        anthropic: bool,
        now: float,
    ) -> web.Response:
        lacking = [n for n, c in costs.items() if account.buckets[n].wait_for(c, now) > 0]
        headers = account.rate_headers(now)
        if account.headers != "none":
            headers["retry-after"] = retry_after(wait)
        dimension = "requests" if lacking == ["requests"] else "tokens"
        message = (
            f"Rate limit reached for {account.served} on {dimension} per min. "
            f"Please try again in {wait:.3f}s."
        )
        if anthropic:
            payload: dict[str, Any] = {
                "type": "error",
                "error": {"type": "rate_limit_error", "message": message},
            }
        else:
            payload = {
                "error": {
                    "message": message,
                    "type": dimension,
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            }
        return web.json_response(payload, status=429, headers=headers)

    def stats(self) -> dict[str, Any]:
        return {a.id: vars(a.counters) for a in self.accounts}


def _answer(served: str, prompt: int, output: int, cached: int, anthropic: bool) -> dict[str, Any]:
    text = ("lorem " * (output * CHARS_PER_TOKEN // 6 + 1))[: output * CHARS_PER_TOKEN]
    if anthropic:
        return {
            "id": "msg_fleet",
            "type": "message",
            "role": "assistant",
            "model": served,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": prompt - cached,
                "cache_read_input_tokens": cached,
                "cache_creation_input_tokens": 0,
                "output_tokens": output,
            },
        }
    return {
        "id": "chatcmpl-fleet",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": served,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


def _error(status: int, code: str, kind: str, anthropic: bool) -> web.Response:
    if anthropic:
        return web.json_response(
            {"type": "error", "error": {"type": kind, "message": code}}, status=status
        )
    return web.json_response(
        {"error": {"message": code, "type": kind, "param": None, "code": code}}, status=status
    )


def app(mock: Mock) -> web.Application:
    async def reset(_: web.Request) -> web.Response:
        mock.reset()
        return web.json_response({"reset": True})

    async def stats(_: web.Request) -> web.Response:
        return web.json_response(mock.stats())

    application = web.Application()
    application.router.add_post("/v1/chat/completions", mock.handle)
    application.router.add_post("/v1/messages", mock.handle)
    application.router.add_post("/fleet/reset", reset)
    application.router.add_get("/fleet/stats", stats)
    return application


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet.mock")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--accounts", type=Path, required=True)
    args = parser.parse_args()
    specs = json.loads(args.accounts.read_text())
    accounts = [MockAccount(s["id"], s["headers"], s["served"], s["limits"]) for s in specs]
    web.run_app(app(Mock(accounts)), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()

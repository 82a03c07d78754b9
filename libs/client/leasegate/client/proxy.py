"""Plain-httpx calls through the proxy, for callers that use no SDK. Both raise
`ProxyFailure` on a non-2xx answer and on an error event inside a stream (OpenAI's
`data: {"error": ...}`, Anthropic's `event: error`), so a failed call never looks like an
answer and `Dispatch` can tell what happened.

    async def call(key: str, proxy_url: str) -> dict[str, Any]:
        return await post_json(http, proxy_url, key, "/v1/chat/completions", body)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from leasegate.client import wire
from leasegate.client.errors import ProxyFailure


async def post_json(
    http: httpx.AsyncClient, proxy_url: str, key: str, path: str, body: Mapping[str, Any]
) -> dict[str, Any]:
    """POST a JSON body with the key; the decoded JSON answer."""
    response = await http.post(f"{proxy_url}{path}", json=body, headers=_auth(key))
    if response.status_code >= 400:
        raise failure_of(response)
    answer: dict[str, Any] = response.json()
    return answer


async def stream_events(
    http: httpx.AsyncClient, proxy_url: str, key: str, path: str, body: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """POST with `"stream": true`; every JSON `data:` payload of the SSE stream, in order."""
    events: list[dict[str, Any]] = []
    async with http.stream(
        "POST", f"{proxy_url}{path}", json={**body, "stream": True}, headers=_auth(key)
    ) as response:
        if response.status_code >= 400:
            await response.aread()
            raise failure_of(response)
        event_name: str | None = None
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event_name = line[6:].strip()
            elif line.startswith("data:"):
                payload = _payload(line[5:].strip())
                if payload is not None:
                    _raise_stream_error(event_name, payload, response.status_code)
                    events.append(payload)
            elif not line:
                event_name = None
    return events


def failure_of(response: httpx.Response) -> ProxyFailure:
    """The failure a non-2xx proxy answer describes (the gateway's envelope or the upstream's
    own error body, which the proxy passes through unchanged)."""
    try:
        decoded: Any = response.json()
    except ValueError:
        decoded = None
    error = decoded.get("error") if isinstance(decoded, dict) else None
    seen = wire.failed_answer(error, response.headers)
    return ProxyFailure(
        response.status_code,
        seen.code,
        seen.message if isinstance(error, dict) else response.reason_phrase,
        retry_after_s=seen.retry_after_s,
        gateway=seen.gateway,
        context_fallback=seen.context_fallback,
    )


def _raise_stream_error(event: str | None, payload: Mapping[str, Any], status: int) -> None:
    error = payload.get("error")
    if event == "error" or error:
        seen = wire.failed_answer(error if isinstance(error, Mapping) else payload, None)
        raise ProxyFailure(
            status,
            seen.code or "in-stream-error",
            seen.message or "error event in the stream",
            gateway=seen.gateway,
        )


def _payload(data: str) -> dict[str, Any] | None:
    if not data or data == "[DONE]":
        return None
    try:
        decoded = json.loads(data)
    except ValueError:
        return None  # one malformed chunk: the proxy passes it through, we skip it
    return decoded if isinstance(decoded, dict) else None


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}

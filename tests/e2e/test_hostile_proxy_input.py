"""Hostile input at the proxy: every case is a 4xx envelope with the request id, exactly one
evidence row that lands (Postgres included), and later rows keep landing (issue 10)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from leasegate.demo.upstream_script import MockRequest, Reply
from tests.fixtures.gateways import Gateway

NEST = 100_000

# (name, raw body, content-type, expected status)
HOSTILE_BODIES: list[tuple[str, bytes, str, int]] = [
    ("nul in model", b'{"model": "gpt-x\\u0000"}', "application/json", 400),
    ("lone surrogate in model", b'{"model": "gpt-x\\ud800"}', "application/json", 400),
    ("10 KB model", b'{"model": "' + b"m" * 10_240 + b'"}', "application/json", 400),
    ("control char in model", b'{"model": "gpt-4o\\n"}', "application/json", 400),
    ("deep arrays", b"[" * NEST + b"]" * NEST, "application/json", 400),
    (
        "deep in a field",
        b'{"model": "gpt-4o", "x": ' + b"[" * NEST + b"]" * NEST + b"}",
        "application/json",
        400,
    ),
    ("deep objects", b'{"a":' * NEST + b"1" + b"}" * NEST, "application/json", 400),
    ("invalid utf-8", b'{"model": "gpt-4o\xff\xfe"}', "application/json", 400),
    ("utf-16 body", '{"model": "gpt-4o"}'.encode("utf-16"), "application/json", 400),
    ("NaN", b'{"model": "gpt-4o", "temperature": NaN}', "application/json", 400),
    ("Infinity", b'{"model": "gpt-4o", "temperature": -Infinity}', "application/json", 400),
    ("huge integer", b'{"model": "gpt-4o", "n": ' + b"9" * 5000 + b"}", "application/json", 400),
    ("stream is a string", b'{"model": "gpt-4o", "stream": "yes"}', "application/json", 400),
    ("stream is 1", b'{"model": "gpt-4o", "stream": 1}', "application/json", 400),
    ("model is a list", b'{"model": ["gpt-4o"]}', "application/json", 400),
    ("not an object", b'"gpt-4o"', "application/json", 400),
    ("empty body", b"", "application/json", 400),
    ("form body", b"model=gpt-4o", "application/x-www-form-urlencoded", 415),
    ("other model", b'{"model": "gpt-4o-mini"}', "application/json", 403),
]


async def _assert_lands(gateway: Gateway, minted: dict[str, Any], count: int) -> list[Any]:
    rows = await gateway.evidence_for(minted["mint_decision_id"], count)
    assert len(rows) == count
    return rows


@pytest.mark.parametrize(("name", "body", "content_type", "status"), HOSTILE_BODIES)
async def test_hostile_body_gets_an_envelope_and_one_row(
    gateway: Gateway, name: str, body: bytes, content_type: str, status: int
) -> None:
    minted = await gateway.minted(dispatch_id="hostile")
    response = await gateway.client.post(
        f"{gateway.url}/v1/chat/completions",
        content=body,
        headers={"Authorization": f"Bearer {minted['key']}", "Content-Type": content_type},
    )
    assert response.status_code == status, (name, response.text[:300])
    error = response.json()["error"]
    assert error["code"] == ("model-not-permitted" if status == 403 else "invalid-request")
    assert "gpt-x" not in error["message"]
    assert "mmmm" not in error["message"]
    request_id = response.headers["x-leasegate-request-id"]

    (row,) = await _assert_lands(gateway, minted, 1)
    assert row["request_id"] == request_id
    assert row["outcome"] == "refused"
    assert row["qualifying"] is False
    if row["requested_model"] is not None:
        assert "\x00" not in row["requested_model"]
        assert len(row["requested_model"]) <= 200

    # The writer is not stuck: a later request's row lands too.
    ok = await gateway.chat(minted["key"])
    assert ok.status_code == 200, ok.text
    rows = await _assert_lands(gateway, minted, 2)
    assert {r["outcome"] for r in rows} == {"refused", "success"}


async def test_unstorable_models_keep_a_safe_echo(gateway: Gateway) -> None:
    minted = await gateway.minted(dispatch_id="echo")
    for raw in (b'"gpt-x\\u0000"', b'"gpt-x\\ud800"'):
        response = await gateway.client.post(
            f"{gateway.url}/v1/chat/completions",
            content=b'{"model": ' + raw + b"}",
            headers={
                "Authorization": f"Bearer {minted['key']}",
                "Content-Type": "application/json",
            },
        )
        assert response.status_code == 400
    rows = await _assert_lands(gateway, minted, 2)
    assert sorted(r["requested_model"] for r in rows) == ["gpt-x\ufffd", "gpt-x\ufffd"]
    assert {r["refusal_reason"] for r in rows} == {"invalid-request"}


async def test_stream_must_be_a_boolean_and_true_streams(gateway: Gateway) -> None:
    minted = await gateway.minted(dispatch_id="stream-bool")
    response = await gateway.chat(minted["key"], stream="yes")
    assert response.status_code == 400
    assert "'stream'" in response.json()["error"]["message"]
    assert not any(r.stream for r in gateway.upstreams[0].requests)


async def test_duplicate_keys_send_the_checked_model(gateway: Gateway) -> None:
    minted = await gateway.minted(dispatch_id="dup")
    response = await gateway.client.post(
        f"{gateway.url}/v1/chat/completions",
        content=b'{"model": "not-mine", "model": "gpt-4o", "messages": []}',
        headers={"Authorization": f"Bearer {minted['key']}", "Content-Type": "application/json"},
    )
    assert response.status_code == 200, response.text
    seen = gateway.upstreams[0].requests[-1]
    assert seen.body.count(b'"model"') == 1
    assert seen.json is not None
    assert seen.json["model"] == "gpt-4o-2024-08-06"


async def _raw_post(url: str, head_lines: list[bytes], body: bytes) -> int:
    """POST over a raw socket (httpx refuses to send a bad header value); the status."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        lines = [b"POST /v1/chat/completions HTTP/1.1", b"Host: x", *head_lines]
        lines += [b"Connection: close", b"Content-Length: " + str(len(body)).encode()]
        writer.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 10)
        return int(status_line.split()[1])
    finally:
        writer.close()


@pytest.mark.parametrize(
    "value",
    [b"a\x00b", b"a\x7fb", b"a\rInjected: 1", b"a\nInjected: 1", b"\xff\xfe", b"tab\tok"],
)
async def test_crlf_and_controls_in_header_values_never_reach_the_upstream(
    gateway: Gateway, value: bytes
) -> None:
    minted = await gateway.minted(dispatch_id="crlf")
    upstream = gateway.upstreams[0]
    before = upstream.count
    auth = b"Authorization: Bearer " + minted["key"].encode()
    body = b'{"model": "gpt-4o", "messages": []}'
    status = await _raw_post(
        gateway.url, [auth, b"Content-Type: application/json", b"X-Title: " + value], body
    )
    assert status < 500
    new = upstream.count - before
    for seen in list(upstream.requests)[len(upstream.requests) - new :]:
        assert "injected" not in seen.headers
        assert "\x00" not in seen.headers.get("x-title", "")


def _drop_big_headers(request: MockRequest) -> Reply | None:
    if len(request.headers.get("user-agent", "")) > 2000:
        return Reply(reset=True)
    return None


async def test_header_over_the_cap_is_431_and_never_sent(gateway: Gateway) -> None:
    upstream = gateway.upstreams[0]
    upstream.script = _drop_big_headers
    minted = await gateway.minted(dispatch_id="big-header")
    before = upstream.count
    for _ in range(5):
        response = await gateway.client.post(
            f"{gateway.url}/v1/chat/completions",
            json={"model": "gpt-4o", "messages": []},
            headers={"Authorization": f"Bearer {minted['key']}", "User-Agent": "u" * 100_000},
        )
        assert response.status_code == 431, response.text
        assert response.json()["error"]["code"] == "request-header-too-large"
        assert response.headers["x-leasegate-request-id"]
    assert upstream.count == before  # nothing went upstream
    rows = await _assert_lands(gateway, minted, 5)
    assert {(r["outcome"], r["refusal_reason"], r["qualifying"]) for r in rows} == {
        ("refused", "request-header-too-large", False)
    }
    ok = await gateway.chat(minted["key"])
    assert ok.status_code == 200


async def test_upstream_dropping_a_callers_request_never_opens_the_circuit(
    gateway: Gateway,
) -> None:
    """Under the cap, an upstream that drops the connection on what the caller sent is a
    model-scope failure at most: the account circuit stays closed however often it happens."""
    gateway.upstreams[0].script = _drop_big_headers
    minted = await gateway.minted(dispatch_id="drop", model="gpt-4o-mini")
    for _ in range(6):
        response = await gateway.client.post(
            f"{gateway.url}/v1/chat/completions",
            json={"model": "gpt-4o-mini", "messages": []},
            headers={"Authorization": f"Bearer {minted['key']}", "User-Agent": "u" * 4000},
        )
        assert response.status_code in (502, 503), response.text
    accounts = await gateway.control_get("/accounts/openai-main")
    assert accounts["circuit"]["open"] is False
    rows = await gateway.evidence_for(minted["mint_decision_id"], 6)
    dropped = [r for r in rows if r["outcome"] != "refused"]
    assert dropped, rows
    assert {(r["outcome"], r["scope"], r["error_code"]) for r in dropped} == {
        ("upstream-error", "model", "connection-dropped")
    }


async def test_a_client_hanging_up_mid_body_is_client_abort_without_an_error_log(
    gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    minted = await gateway.minted(dispatch_id="hang-up")
    host, port = gateway.url.removeprefix("http://").split(":")
    for _ in range(3):
        _reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + minted["key"].encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
            + b'{"model": "gpt-4o", "messages": ['
        )
        await writer.drain()
        await asyncio.sleep(0.2)  # the proxy is now waiting for the rest of the body
        writer.close()
        await writer.wait_closed()
    rows = await _assert_lands(gateway, minted, 3)
    assert {(r["outcome"], r["qualifying"]) for r in rows} == {("client-abort", False)}
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]

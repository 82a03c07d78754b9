"""One reader of the caller's key: every header a kind's callers present their key in is
taken by the proxy's admission and named in the access log, in one ranked order."""

from __future__ import annotations

import logging

import pytest
from starlette.types import Message, Receive, Scope, Send

from leasegate.keys import new_key
from leasegate.providers import KEY_HEADERS, KINDS, presented_key
from leasegate.web.access_log import AccessLog


def test_every_kind_states_where_its_callers_present_their_key() -> None:
    for name, kind in KINDS.items():
        assert kind.caller_key_headers, name
        for header in kind.caller_key_headers:
            assert header.name.encode() in KEY_HEADERS, (name, header)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([(b"authorization", b"Bearer lg_a")], "lg_a"),
        ([(b"authorization", b"bearer   lg_a ")], "lg_a"),
        ([(b"x-api-key", b" lg_b ")], "lg_b"),
        ([(b"x-goog-api-key", b"lg_c")], "lg_c"),
        # Bearer is preferred, whatever the order the headers come in
        ([(b"x-goog-api-key", b"lg_c"), (b"authorization", b"Bearer lg_a")], "lg_a"),
        ([(b"x-goog-api-key", b"lg_c"), (b"x-api-key", b"lg_b")], "lg_b"),
        # a scheme other than Bearer, or an empty value, presents nothing
        ([(b"authorization", b"Basic abc"), (b"x-goog-api-key", b"lg_c")], "lg_c"),
        ([(b"authorization", b"Bearer "), (b"x-api-key", b"  ")], None),
        ([(b"authorization", b"Bearerlg_a")], None),
        ([(b"cookie", b"lg_a")], None),
        ([], None),
    ],
)
def test_presented_key(headers: list[tuple[bytes, bytes]], expected: str | None) -> None:
    assert presented_key(headers) == expected


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


@pytest.mark.parametrize("header", [b"authorization", b"x-api-key", b"x-goog-api-key"])
async def test_the_access_log_names_the_key_of_every_kind_of_caller(
    header: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    token, parsed = new_key()
    value = b"Bearer " + token.encode() if header == b"authorization" else token.encode()
    scope: Scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1beta/models/gemini-2.0-flash:generateContent",
        "headers": [(b"content-type", b"application/json"), (header, value)],
    }

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def send(message: Message) -> None:
        return None

    with caplog.at_level(logging.INFO, logger="leasegate.access"):
        await AccessLog(_app)(scope, receive, send)
    (record,) = [r for r in caplog.records if r.name == "leasegate.access"]
    assert getattr(record, "key_id", None) == parsed.key_id
    assert token not in record.getMessage()

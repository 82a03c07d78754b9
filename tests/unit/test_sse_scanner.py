"""The stream scanner reads usage, errors and completion the same way however bytes arrive."""

from __future__ import annotations

import itertools
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leasegate.upstream.sse import (
    StreamError,
    StreamScanner,
    Usage,
    error_event,
    usage_from_body,
)


def _data(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _event(name: str, obj: object) -> bytes:
    return f"event: {name}\n".encode() + _data(obj)


def _chunk(content: str | None = None, finish: str | None = None, **extra: object) -> bytes:
    delta = {} if content is None else {"content": content}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return _data({"id": "c1", "object": "chat.completion.chunk", "choices": [choice], **extra})


OPENAI_USAGE = {
    "prompt_tokens": 31,
    "completion_tokens": 7,
    "total_tokens": 38,
    "prompt_tokens_details": {"cached_tokens": 16},
}
OPENAI_BODY = (
    _chunk("", usage=None)
    + _chunk("Hello")
    + _chunk(" world")
    + _chunk(finish="stop")
    + _data({"id": "c1", "choices": [], "usage": OPENAI_USAGE})
)
OPENAI_STREAM = OPENAI_BODY + b"data: [DONE]\n\n"
OPENAI_CUT = _chunk("Hello") + _chunk(" wor")
OPENROUTER_ERROR = (
    _chunk("Hel")
    + b": OPENROUTER PROCESSING\n\n"
    + _data(
        {
            "id": "gen-1",
            "object": "chat.completion.chunk",
            "error": {"code": 502, "message": "Provider returned error: secret prompt text"},
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        }
    )
)

_MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [],
    "usage": {
        "input_tokens": 25,
        "output_tokens": 1,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 8,
    },
}
ANTHROPIC_HEAD = (
    _event("message_start", {"type": "message_start", "message": _MESSAGE})
    + _event("content_block_start", {"type": "content_block_start", "index": 0})
    + _event("ping", {"type": "ping"})
    + _event(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    )
)
ANTHROPIC_STREAM = (
    ANTHROPIC_HEAD
    + _event("content_block_stop", {"type": "content_block_stop", "index": 0})
    + _event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 15},
        },
    )
    + _event("message_stop", {"type": "message_stop"})
)
ANTHROPIC_OVERLOADED = ANTHROPIC_HEAD + _event(
    "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
)

_RESPONSE_USAGE = {
    "input_tokens": 40,
    "input_tokens_details": {"cached_tokens": 32},
    "output_tokens": 9,
    "total_tokens": 49,
}
RESPONSES_HEAD = _event(
    "response.created",
    {"type": "response.created", "response": {"id": "r1", "error": None, "usage": None}},
) + _event("response.output_text.delta", {"type": "response.output_text.delta", "delta": "Yo"})
RESPONSES_STREAM = RESPONSES_HEAD + _event(
    "response.completed",
    {"type": "response.completed", "response": {"id": "r1", "usage": _RESPONSE_USAGE}},
)
RESPONSES_ERROR = RESPONSES_HEAD + _event(
    "error", {"type": "error", "code": "server_error", "message": "boom", "param": None}
)

FIXTURES: list[tuple[str, bytes]] = [
    ("openai", OPENAI_STREAM),
    ("openai", OPENAI_CUT),
    ("openai", OPENROUTER_ERROR),
    ("anthropic", ANTHROPIC_STREAM),
    ("anthropic", ANTHROPIC_OVERLOADED),
    ("responses", RESPONSES_STREAM),
    ("responses", RESPONSES_ERROR),
]


def scan(dialect: str, *pieces: bytes) -> StreamScanner:
    scanner = StreamScanner(dialect)
    for piece in pieces:
        scanner.feed(piece)
    scanner.close()
    return scanner


def summary(s: StreamScanner) -> tuple[Usage, StreamError | None, bool, int, int]:
    return s.usage, s.error, s.completed, s.malformed, s.events


@pytest.mark.parametrize(("dialect", "stream"), FIXTURES)
def test_split_at_every_byte_boundary_gives_the_same_result(dialect: str, stream: bytes) -> None:
    whole = summary(scan(dialect, stream))
    for cut in range(1, len(stream)):
        assert summary(scan(dialect, stream[:cut], stream[cut:])) == whole, cut


@pytest.mark.parametrize(("dialect", "stream"), FIXTURES)
def test_byte_by_byte_and_crlf_line_endings_give_the_same_result(
    dialect: str, stream: bytes
) -> None:
    whole = summary(scan(dialect, stream))
    assert summary(scan(dialect, *(stream[i : i + 1] for i in range(len(stream))))) == whole
    assert summary(scan(dialect, stream.replace(b"\n", b"\r\n"))) == whole


@settings(max_examples=60, deadline=None)
@given(fixture=st.sampled_from(FIXTURES), cuts=st.lists(st.integers(min_value=0), max_size=12))
def test_any_chunking_gives_the_same_result(fixture: tuple[str, bytes], cuts: list[int]) -> None:
    dialect, stream = fixture
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    pieces = [stream[a:b] for a, b in itertools.pairwise(points)]
    assert summary(scan(dialect, *pieces)) == summary(scan(dialect, stream))


def test_openai_usage_in_the_final_chunk_and_done_completes() -> None:
    s = scan("openai", OPENAI_STREAM)
    assert s.usage == Usage(input_tokens=31, output_tokens=7, cache_read_input_tokens=16)
    assert s.completed
    assert s.error is None
    assert s.malformed == 0


def test_openai_stream_without_done_is_complete_by_its_finish_reason() -> None:
    s = scan("openai", OPENAI_BODY)
    assert s.completed
    assert s.usage.output_tokens == 7


def test_openai_stream_cut_mid_answer_is_not_complete() -> None:
    s = scan("openai", OPENAI_CUT)
    assert not s.completed
    assert s.error is None
    assert s.usage == Usage()


def test_openrouter_error_inside_a_200_stream_is_recorded_without_its_message() -> None:
    s = scan("openai", OPENROUTER_ERROR)
    assert s.error == StreamError(type=None, code="502")
    assert "secret" not in repr(s.error)


def test_anthropic_overloaded_error_event() -> None:
    s = scan("anthropic", ANTHROPIC_OVERLOADED)
    assert s.error == StreamError(type="overloaded_error", code=None)
    assert not s.completed
    assert s.usage.input_tokens == 25


def test_anthropic_usage_merges_message_start_and_message_delta() -> None:
    s = scan("anthropic", ANTHROPIC_STREAM)
    assert s.completed
    assert s.usage == Usage(
        input_tokens=25,
        output_tokens=15,
        cache_read_input_tokens=100,
        cache_creation_input_tokens=8,
    )


def test_anthropic_stream_without_message_stop_is_truncated() -> None:
    assert not scan("anthropic", ANTHROPIC_HEAD).completed
    # [DONE] is OpenAI's terminator, not Anthropic's
    assert not scan("anthropic", ANTHROPIC_HEAD + b"data: [DONE]\n\n").completed


def test_responses_usage_and_completion() -> None:
    s = scan("responses", RESPONSES_STREAM)
    assert s.completed
    assert s.usage == Usage(input_tokens=40, output_tokens=9, cache_read_input_tokens=32)
    assert not scan("responses", RESPONSES_HEAD).completed


def test_responses_error_event_and_failed_response() -> None:
    assert scan("responses", RESPONSES_ERROR).error == StreamError(None, "server_error")
    failed = _event(
        "response.failed",
        {"type": "response.failed", "response": {"error": {"code": "rate_limit_exceeded"}}},
    )
    s = scan("responses", RESPONSES_HEAD + failed)
    assert s.error == StreamError(None, "rate_limit_exceeded")
    assert not s.completed


def test_one_malformed_chunk_in_a_complete_stream_is_counted() -> None:
    garbled = b'data: {"id":"c1","choices":[{"delta":{"content":"Hi"\n\n'
    s = scan("openai", _chunk("Hello") + garbled + OPENAI_STREAM)
    assert s.malformed == 1
    assert s.completed
    assert s.error is None
    assert s.usage.input_tokens == 31


def test_the_first_error_wins() -> None:
    first = _data({"error": {"type": "server_error", "code": "a"}})
    second = _data({"error": {"type": "server_error", "code": "b"}})
    assert scan("openai", first + second).error == StreamError("server_error", "a")


def test_marker_words_inside_generated_text_are_not_events() -> None:
    decoys = (
        _chunk('"error"')
        + _chunk("finish_reason")
        + _chunk('{"usage": 1}')
        + _chunk("[DONE]")
        + _chunk("message_stop")
    )
    s = scan("openai", decoys)
    assert (s.error, s.completed, s.usage, s.malformed) == (None, False, Usage(), 0)
    text = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "message_stop"}}
    assert not scan("anthropic", _event("content_block_delta", text)).completed


def test_last_event_without_a_blank_line_still_counts() -> None:
    s = scan("openai", _chunk(finish="length").rstrip(b"\n"))
    assert s.completed


def test_error_event_renders_in_each_providers_own_shape() -> None:
    for dialect in ("openai", "anthropic", "responses"):
        s = scan(dialect, _chunk_for(dialect) + error_event(dialect, "upstream-timeout", "idle"))
        assert s.error is not None
        assert s.error.code == "upstream-timeout"
    anthropic = error_event("anthropic", "upstream-timeout", "idle")
    assert anthropic.startswith(b"event: error\ndata: ")
    body = json.loads(anthropic.split(b"data: ", 1)[1])
    assert body["type"] == "error"
    assert body["error"]["type"] == "api_error"
    openai = json.loads(error_event("openai", "upstream-timeout", "idle")[6:])
    assert openai["error"]["code"] == "upstream-timeout"


def _chunk_for(dialect: str) -> bytes:
    return {"openai": _chunk("x"), "anthropic": ANTHROPIC_HEAD, "responses": RESPONSES_HEAD}[
        dialect
    ]


def test_usage_from_non_streaming_bodies() -> None:
    chat = json.dumps({"choices": [], "usage": OPENAI_USAGE}).encode()
    assert usage_from_body("openai", chat) == Usage(31, 7, 16, None)
    embeddings = json.dumps({"usage": {"prompt_tokens": 5, "total_tokens": 5}}).encode()
    assert usage_from_body("openai", embeddings) == Usage(input_tokens=5)
    message = json.dumps({"type": "message", "usage": _MESSAGE["usage"]}).encode()
    assert usage_from_body("anthropic", message) == Usage(25, 1, 100, 8)
    response = json.dumps({"object": "response", "usage": _RESPONSE_USAGE}).encode()
    assert usage_from_body("responses", response) == Usage(40, 9, 32, None)
    for junk in (b"", b"not json", b"[1]", b'{"usage": null}', b'{"usage": {"prompt_tokens": -1}}'):
        assert usage_from_body("openai", junk) == Usage()


def test_unknown_wire_is_refused() -> None:
    with pytest.raises(ValueError, match="wire"):
        StreamScanner("cohere")


def test_scanning_costs_well_under_the_per_chunk_budget() -> None:
    pieces = [c + b"\n\n" for c in OPENAI_STREAM.split(b"\n\n") if c] * 4
    streams = 500
    started = time.process_time()
    for _ in range(streams):
        scanner = StreamScanner("openai")
        for piece in pieces:
            scanner.feed(piece)
        scanner.close()
    per_chunk_ms = (time.process_time() - started) * 1000 / (streams * len(pieces))
    assert per_chunk_ms < 0.05


# -- drop_malformed: whole events out, byte-exact, minus the ones that are not JSON ------------

_GOOD_EVENTS = st.lists(
    st.one_of(
        st.text(max_size=20).map(lambda t: _chunk(t)),
        st.just(b": keep-alive\n\n"),
        st.just(b'event: ping\r\ndata: {"type": "ping"}\r\n\r\n'),
        st.just(b"data: [DONE]\n\n"),
    ),
    max_size=12,
)
_BAD_EVENTS = st.sampled_from(
    [
        b'data: {"choices": [{"delta": {"content": "cut\n\n',
        b"data: {not json}\n\n",
        b'data: {"a": 1,}\n\n',
        b"data: garbage\n\n",
    ]
)


def _pieces(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(stream) + 1) for c in cuts})
    return [stream[a:b] for a, b in itertools.pairwise([0, *points, len(stream)])]


def _filtered(stream: bytes, cuts: list[int]) -> tuple[bytes, StreamScanner]:
    scanner = StreamScanner("openai", drop_malformed=True)
    out = b"".join(scanner.feed(piece) for piece in _pieces(stream, cuts))
    return out + scanner.close(), scanner


@given(events=_GOOD_EVENTS, cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_a_good_stream_passes_byte_exact_however_it_is_cut(
    events: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(events)
    out, scanner = _filtered(stream, cuts)
    assert out == stream
    assert scanner.malformed == 0


@given(
    events=_GOOD_EVENTS,
    bad=st.lists(st.tuples(st.integers(0, 12), _BAD_EVENTS), min_size=1, max_size=3),
    cuts=st.lists(st.integers(0, 10_000), max_size=8),
)
def test_malformed_data_events_are_dropped_and_counted(
    events: list[bytes], bad: list[tuple[int, bytes]], cuts: list[int]
) -> None:
    mixed = list(events)
    for position, event in sorted(bad, reverse=True):
        mixed.insert(min(position, len(mixed)), event)
    out, scanner = _filtered(b"".join(mixed), cuts)
    assert out == b"".join(events)
    assert scanner.malformed == len(bad)


def test_events_only_a_lenient_json_reader_takes_are_relayed_not_dropped() -> None:
    """NaN and a lone surrogate escape are outside strict JSON; the relay took them before
    its reader became strict-first, and still does (its text is counted too)."""
    stream = (
        b'data: {"choices": [{"delta": {"content": "ab"}}], "score": NaN}\n\n'
        b'data: {"choices": [{"delta": {"content": "\\ud800"}}]}\n\n'
        b"data: [DONE]\n\n"
    )
    out, scanner = _filtered(stream, [])
    assert out == stream
    assert scanner.malformed == 0
    assert scanner.text_chars == 3


def test_an_unterminated_last_event_is_forwarded_as_it_came_unless_malformed() -> None:
    out, _ = _filtered(_chunk("a") + b"data: [DONE]", [])
    assert out == _chunk("a") + b"data: [DONE]"
    out, scanner = _filtered(_chunk("a") + b'data: {"cut', [])
    assert (out, scanner.malformed) == (_chunk("a"), 1)


def test_a_malformed_error_event_still_reaches_the_caller() -> None:
    event = b"event: error\ndata: overloaded\n\n"
    out, scanner = _filtered(_chunk("a") + event, [])
    assert out == _chunk("a") + event
    assert scanner.error is not None


def test_pass_through_returns_every_chunk_unchanged() -> None:
    scanner = StreamScanner("openai")
    bad = b'data: {"cut\n\n'  # counted by shape; pass-through parses only what it needs
    assert [scanner.feed(p) for p in (b"data: {", b"}\n\n", bad)] == [b"data: {", b"}\n\n", bad]
    assert scanner.close() == b""
    assert scanner.malformed == 1

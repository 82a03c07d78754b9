"""A stream's usage when the caller did not ask for it: the ask the proxy adds to the body,
the usage-only event it strips from what the caller receives, and the estimate charged when
no usage ever arrives."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasegate.demo.upstream_payloads import render, route, usage_asked
from leasegate.providers import OptionError, Usage, kind_named, wire_named
from leasegate.providers.estimate import (
    CHARS_PER_TOKEN,
    estimated_usage,
    settled_usage,
    tokens_for,
)
from leasegate.providers.openai import CHAT, COMPLETIONS
from leasegate.upstream.sse import StreamScanner

CHAT_WIRE = wire_named("openai")


def _data(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chunk(content: str, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": finish}
    return _data(
        {"id": "c1", "object": "chat.completion.chunk", "choices": [choice], "usage": None}
    )


USAGE = {"prompt_tokens": 31, "completion_tokens": 7, "total_tokens": 38}
USAGE_ONLY = _data({"id": "c1", "object": "chat.completion.chunk", "choices": [], "usage": USAGE})
DONE = b"data: [DONE]\n\n"


def _pieces(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(stream) + 1) for c in cuts})
    return [stream[a:b] for a, b in itertools.pairwise([0, *points, len(stream)])]


def _relayed(stream: bytes, cuts: list[int], **modes: bool) -> tuple[bytes, StreamScanner]:
    scanner = StreamScanner("openai", **modes)
    out = b"".join(scanner.feed(piece) for piece in _pieces(stream, cuts))
    return out + scanner.close(), scanner


# -- the ask ----------------------------------------------------------------------------------


def test_a_stream_that_did_not_ask_is_made_to_report_usage() -> None:
    body: dict[str, object] = {"model": "m", "stream": True}
    assert CHAT_WIRE.ask_usage(body) is True
    assert body["stream_options"] == {"include_usage": True}


def test_include_usage_false_is_overridden_and_other_stream_options_are_kept() -> None:
    body: dict[str, object] = {"stream_options": {"include_usage": False, "x": 1}}
    assert CHAT_WIRE.ask_usage(body) is True
    assert body["stream_options"] == {"include_usage": True, "x": 1}


def test_a_caller_that_asked_is_left_as_it_is() -> None:
    options = {"include_usage": True}
    body: dict[str, object] = {"stream_options": options}
    assert CHAT_WIRE.ask_usage(body) is False
    assert body["stream_options"] is options


def test_stream_options_that_are_not_an_object_are_the_upstreams_to_refuse() -> None:
    body: dict[str, object] = {"stream_options": "yes"}
    assert CHAT_WIRE.ask_usage(body) is False
    assert body == {"stream_options": "yes"}


def test_wires_whose_streams_always_report_usage_leave_the_body_alone() -> None:
    for name in ("anthropic", "responses", "gemini"):
        body: dict[str, object] = {"stream": True}
        assert wire_named(name).ask_usage(body) is False
        assert body == {"stream": True}


def test_azure_is_asked_only_from_the_first_api_version_that_takes_stream_options() -> None:
    azure = kind_named("azure-openai")
    for version, asks in (("2024-02-01", False), ("2024-08-01-preview", True), (None, True)):
        options = azure.options({} if version is None else {"api_version": version})
        body: dict[str, object] = {"model": "m", "stream": True}
        assert azure.ask_usage(CHAT, body, options) is asks
        assert ("stream_options" in body) is asks


def test_an_openai_compatible_server_that_refuses_stream_options_can_be_left_unasked() -> None:
    compatible = kind_named("openai-compatible")
    entries: list[tuple[dict[object, object], bool]] = [
        ({}, True),
        ({"ask_stream_usage": True}, True),
        ({"ask_stream_usage": False}, False),
    ]
    for entry, asks in entries:
        options = compatible.options(entry)
        body: dict[str, object] = {"model": "m", "stream": True}
        assert compatible.ask_usage(CHAT, body, options) is asks
        assert ("stream_options" in body) is asks
    with pytest.raises(OptionError, match="true or false"):
        compatible.options({"ask_stream_usage": "no"})


# -- the strip ---------------------------------------------------------------------------------

_CONTENT = st.lists(st.text(max_size=12).map(_chunk), max_size=8)
_KEEPALIVE = st.sampled_from([b"", b": keep-alive\n\n"])


@given(
    content=_CONTENT,
    keepalive=_KEEPALIVE,
    done=st.booleans(),
    drop=st.booleans(),
    cuts=st.lists(st.integers(0, 10_000), max_size=8),
)
def test_the_usage_only_event_is_stripped_byte_exact_however_the_stream_is_cut(
    content: list[bytes], keepalive: bytes, done: bool, drop: bool, cuts: list[int]
) -> None:
    head = b"".join(content) + keepalive + _chunk("", "stop")
    tail = DONE if done else b""
    out, scanner = _relayed(
        head + USAGE_ONLY + tail, cuts, drop_malformed=drop, strip_usage_only=True
    )
    assert out == head + tail
    assert scanner.usage == Usage(input_tokens=31, output_tokens=7)
    assert scanner.stripped == 1
    assert scanner.completed


@given(content=_CONTENT, drop=st.booleans(), cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_a_caller_that_asked_receives_its_usage_event(
    content: list[bytes], drop: bool, cuts: list[int]
) -> None:
    stream = b"".join(content) + _chunk("", "stop") + USAGE_ONLY + DONE
    out, scanner = _relayed(stream, cuts, drop_malformed=drop)
    assert out == stream
    assert scanner.usage == Usage(input_tokens=31, output_tokens=7)


def test_an_event_with_choices_or_an_error_is_never_stripped() -> None:
    with_choices = _data(
        {
            "choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}],
            "usage": USAGE,
        }
    )
    with_error = _data({"choices": [], "usage": USAGE, "error": {"code": 502}})
    stream = with_choices + with_error
    out, scanner = _relayed(stream, [], drop_malformed=True, strip_usage_only=True)
    assert out == stream
    assert scanner.stripped == 0
    assert scanner.error is not None


def test_pass_through_with_the_strip_keeps_a_malformed_event() -> None:
    bad = b'data: {"cut\n\n'
    stream = _chunk("a") + bad + USAGE_ONLY
    out, scanner = _relayed(stream, [], strip_usage_only=True)
    assert out == _chunk("a") + bad
    assert scanner.malformed == 1


# -- what an estimate counts -----------------------------------------------------------------


def test_generated_text_is_counted_from_content_tool_arguments_and_legacy_text() -> None:
    tool = {"index": 0, "function": {"name": "f", "arguments": '{"city":'}}
    events = (
        _chunk("héllo")
        + _data({"choices": [{"delta": {"tool_calls": [tool]}, "finish_reason": None}]})
        + _data({"choices": [{"delta": {"reasoning_content": "hm"}}]})
        + _data({"choices": [{"index": 0, "text": "abc", "finish_reason": None}]})
        + _chunk("", "stop")
    )
    _, scanner = _relayed(events, [], drop_malformed=True)
    assert scanner.text_chars == len("héllo") + len('{"city":') + len("hm") + len("abc")


def test_without_parsing_every_event_the_whole_data_counts_as_text() -> None:
    _, scanner = _relayed(_chunk("hi"), [])
    assert scanner.text_chars == len(_chunk("hi")) - len(b"data: \n\n")


def test_a_responses_stream_counts_its_deltas() -> None:
    scanner = StreamScanner("responses", drop_malformed=True)
    scanner.feed(_data({"type": "response.output_text.delta", "delta": "four"}))
    assert scanner.text_chars == 4


# -- the estimate --------------------------------------------------------------------------------


@given(chars=st.integers(min_value=-10, max_value=10**9))
def test_tokens_round_up_so_any_text_is_at_least_a_token(chars: int) -> None:
    tokens = tokens_for(chars)
    assert tokens == (math.ceil(chars / CHARS_PER_TOKEN) if chars > 0 else 0)
    assert (tokens > 0) == (chars > 0)


@given(body=st.integers(0, 10**8), text=st.integers(0, 10**8))
def test_an_estimate_is_marked_and_never_free(body: int, text: int) -> None:
    usage = estimated_usage(body, text)
    assert usage.estimated
    assert usage.input_tokens is not None
    assert usage.input_tokens >= 1
    assert usage.output_tokens == tokens_for(text)
    assert usage.cache_read_input_tokens is None


def test_reported_usage_is_charged_as_reported_and_none_is_estimated() -> None:
    reported = Usage(input_tokens=0, output_tokens=0)
    assert settled_usage(reported, 4000, 400) is reported
    assert settled_usage(Usage(output_tokens=5), 4000, 400).estimated is False
    assert settled_usage(Usage(), 4000, 400) == Usage(1000, 100, estimated=True)


# -- the demo upstream answers like OpenAI -------------------------------------------------------


def test_the_demo_upstream_reports_stream_usage_only_when_asked() -> None:
    for endpoint in (CHAT, COMPLETIONS):
        plain = {"model": "m", "stream": True}
        asked = {**plain, "stream_options": {"include_usage": True}}
        assert not usage_asked(endpoint, plain)
        assert usage_asked(endpoint, asked)
        assert plain == {"model": "m", "stream": True}  # the question changes nothing
        where = route(endpoint.path)
        assert where is not None
        full = render(where, True, 3).chunks
        bare = render(where, True, 3, usage_asked=False).chunks
        assert len(bare) == len(full) - 1
        assert not any(b'"usage": {' in c or b'"usage":{' in c for c in bare)
        assert full[-1] == bare[-1] == DONE

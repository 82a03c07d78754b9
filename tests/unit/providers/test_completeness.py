"""Every registered provider kind implements every part of the seam, its behaviour table
(tests/unit/providers/test_<its module>.py) covers usage, in-stream errors, error
classification and the error event the gateway appends, on every wire it speaks, and the demo
has examples of it (leasegate.demo.examples) that the gateway reads back."""

from __future__ import annotations

import importlib
import json
from types import ModuleType

import pytest

from leasegate.demo.examples import EXAMPLES
from leasegate.demo.wires.base import INPUT_TOKENS
from leasegate.providers import KINDS, Endpoint, ErrorVocabulary, ProviderKind, Wire
from leasegate.routing.classify import classify
from leasegate.upstream.failures import response_observation, stream_observation
from leasegate.upstream.sse import StreamScanner, usage_from_body
from tests.unit.providers.tables import BodyUsage, Classified, Rendered, StreamReading

NAMES = list(KINDS)


def table_module(kind: ProviderKind) -> ModuleType | None:
    """The kind's test module (named after its module); None when there is none."""
    module = type(kind).__module__.rsplit(".", 1)[-1]
    try:
        return importlib.import_module(f"tests.unit.providers.test_{module}")
    except ModuleNotFoundError:
        return None


def rows(table: str) -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for name in NAMES:
        module = table_module(KINDS[name])
        found.extend((name, row) for row in getattr(module, table, []))
    return found


def scan(wire: Wire, stream: bytes) -> StreamScanner:
    scanner = StreamScanner(wire)
    scanner.feed(stream)
    scanner.close()
    return scanner


def as_sse(kind: ProviderKind, stream: bytes) -> bytes:
    """A stream as the proxy relays it: a cloud's own framing decoded into SSE first."""
    decoder = kind.stream_decoder()
    return stream if decoder is None else decoder.feed(stream)


@pytest.mark.parametrize("name", NAMES)
def test_every_kind_has_a_table_for_every_part_of_every_wire(name: str) -> None:
    kind = KINDS[name]
    module = table_module(kind)
    assert module is not None, f"no tests/unit/providers/test_<module>.py for kind {name!r}"
    assert name in module.COVERS
    usage: list[BodyUsage] = module.USAGE
    streams: list[StreamReading] = module.STREAMS
    classified: list[Classified] = module.CLASSIFIED
    rendered: list[Rendered] = module.RENDERED
    wires = {e.wire for e in kind.endpoints}
    streaming = {e.wire for e in kind.endpoints if e.streams}
    assert wires <= {row.endpoint.wire for row in usage}
    assert streaming <= {row.endpoint.wire for row in streams}
    assert streaming <= {row.endpoint.wire for row in rendered}
    assert any(row.error is not None for row in streams)
    classes = {(row.status is None, row.scope, row.qualifying) for row in classified}
    # a credential fault, a model fault, the caller's fault, and an error inside a stream
    assert {(False, "account", True), (False, "model", True), (False, None, False)} <= classes
    assert any(row.status is None for row in classified)
    endpoints = [
        *(row.endpoint for row in usage),
        *(row.endpoint for row in streams),
        *(row.endpoint for row in classified),
        *(row.endpoint for row in rendered),
    ]
    for endpoint in endpoints:
        assert kind.serves(endpoint), (name, endpoint.path)


STATED = ("caller_key_headers", "forwarded_headers", "relayed_headers")
"""Seam parts with no default: a kind (or the kind it extends) states each in its module."""


@pytest.mark.parametrize("name", NAMES)
def test_every_kind_states_its_headers(name: str) -> None:
    kind = KINDS[name]
    for part in STATED:
        owners = [c for c in type(kind).__mro__ if part in vars(c) and c is not ProviderKind]
        assert owners, f"kind {name!r} does not state {part}"
    assert kind.caller_key_headers
    assert all(h.name == h.name.lower() for h in kind.caller_key_headers)
    assert kind.forwarded_headers
    assert "content-type" in kind.relayed_headers
    assert all(h == h.lower() for h in kind.relayed_headers)
    assert all(h == h.lower() for h in kind.forwarded_headers)
    # never the caller's key, in any header a caller may present it in
    caller_keys = {h.name for other in KINDS.values() for h in other.caller_key_headers}
    assert not kind.forwarded_headers & caller_keys
    assert not kind.forwarded_headers & {"cookie", "host", "content-length", "openai-organization"}


@pytest.mark.parametrize("name", NAMES)
def test_every_wire_of_every_kind_states_its_end_marker(name: str) -> None:
    for endpoint in KINDS[name].endpoints:
        wire = type(endpoint.wire)
        owners = [c for c in wire.__mro__ if "done_completes" in vars(c) and c is not Wire]
        assert owners, f"wire {wire.__name__} does not state done_completes"


@pytest.mark.parametrize("name", NAMES)
def test_every_kind_implements_every_part(name: str) -> None:
    kind = KINDS[name]
    assert kind.name == name
    assert kind.endpoints
    assert isinstance(kind.errors, ErrorVocabulary)
    assert isinstance(kind.input_includes_cache, bool)
    credential = kind.credential_headers("sk-seam-test")
    assert [value for _, value in credential if "sk-seam-test" in value]
    defaults = {header for header, _ in kind.default_headers()}
    assert not defaults & {header for header, _ in credential}
    module = table_module(kind)
    options = kind.options(getattr(module, "ENTRY", {}))
    assert set(options) <= kind.option_fields
    assert kind.served_problem("model-1") is None
    for endpoint in kind.endpoints:
        upstream = kind.upstream_path(endpoint, "model-1", options)
        route = kind.upstream_route(upstream.partition("?")[0])
        assert route is not None, upstream
        assert route.endpoint is endpoint
        assert route.model in (None, "model-1")


@pytest.mark.parametrize("name", NAMES)
def test_the_demo_has_examples_of_every_kind_and_the_gateway_reads_them(name: str) -> None:
    """The demo upstream serves each kind's examples (leasegate.demo.examples); the gateway
    reads them back as it reads that kind's upstream: a cloud's framing decoded, its error
    payloads put in the caller's wire's shape, its vocabulary applied."""
    kind = KINDS[name]
    examples = EXAMPLES.get(name)
    assert examples is not None, f"leasegate.demo.examples has no examples of kind {name!r}"
    for endpoint in kind.endpoints:
        wire = endpoint.wire
        assert wire.name in examples.wires, f"{name}: no examples of wire {wire.name!r}"
        body = examples.answer(endpoint, False, 3).body
        if endpoint.completion and not endpoint.always_streams:
            assert body is not None
            assert usage_from_body(wire, body).input_tokens == INPUT_TOKENS
        if endpoint.streams:
            chunks = examples.answer(endpoint, True, 3).chunks
            framed = [examples.frame(chunk) for chunk in chunks]
            whole = scan(wire, as_sse(kind, b"".join(framed)))
            assert whole.completed
            assert whole.error is None
            assert whole.usage.input_tokens == INPUT_TOKENS
            failed = scan(wire, as_sse(kind, framed[0] + examples.error_event(endpoint)))
            assert failed.error is not None
            observation = stream_observation(failed, 200)
            assert classify(observation, kind.errors).outcome == "in-stream-error"
        for status, scope in ((429, "model"), (401, "account")):
            headers, payload = examples.error(endpoint, status)
            payload = kind.error_body(status, headers, payload) or payload
            observation = response_observation(status, headers, payload, wire=wire)
            assert classify(observation, kind.errors).scope == scope, (status, payload)


def test_the_demo_has_examples_of_no_kind_that_does_not_exist() -> None:
    assert set(EXAMPLES) == set(KINDS)


def _ids(row: tuple[str, object]) -> str:
    name, item = row
    endpoint: Endpoint = getattr(item, "endpoint")  # noqa: B009 - every table row has one
    return f"{name}:{endpoint.path}"


@pytest.mark.parametrize("row", rows("USAGE"), ids=_ids)
def test_usage_table(row: tuple[str, BodyUsage]) -> None:
    _, case = row
    assert usage_from_body(case.endpoint.wire, case.body) == case.usage


@pytest.mark.parametrize("row", rows("STREAMS"), ids=_ids)
def test_stream_table(row: tuple[str, StreamReading]) -> None:
    name, case = row
    stream = as_sse(KINDS[name], case.stream)
    scanner = scan(case.endpoint.wire, stream)
    assert (scanner.usage, scanner.completed, scanner.error) == (
        case.usage,
        case.completed,
        case.error,
    )
    # the same stream cut anywhere reads the same
    pieces = StreamScanner(case.endpoint.wire)
    decoder = KINDS[name].stream_decoder()
    for i in range(0, len(case.stream), 7):
        piece = case.stream[i : i + 7]
        pieces.feed(piece if decoder is None else decoder.feed(piece))
    pieces.close()
    assert (pieces.usage, pieces.completed, pieces.error) == (
        scanner.usage,
        scanner.completed,
        scanner.error,
    )


@pytest.mark.parametrize("row", rows("CLASSIFIED"), ids=_ids)
def test_classification_table(row: tuple[str, Classified]) -> None:
    name, case = row
    wire = case.endpoint.wire
    kind = KINDS[name]
    if case.status is None:
        observation = stream_observation(scan(wire, as_sse(kind, case.payload)), 200)
    else:
        # as the proxy relays it: a cloud's error payload put in the caller's wire's shape
        payload = kind.error_body(case.status, case.headers, case.payload) or case.payload
        observation = response_observation(case.status, case.headers, payload, wire=wire)
    got = classify(observation, KINDS[name].errors)
    assert (got.outcome, got.scope, got.qualifying, got.reason) == (
        case.outcome,
        case.scope,
        case.qualifying,
        case.reason,
    )


@pytest.mark.parametrize("row", rows("RENDERED"), ids=_ids)
def test_appended_error_event_table(row: tuple[str, Rendered]) -> None:
    """The event the gateway appends is in the wire's own shape, and its own scanner reads
    it as an error carrying the gateway's code."""
    _, case = row
    wire = case.endpoint.wire
    raw = wire.error_event(case.code, "the upstream stalled")
    lines = raw.decode().strip("\n").split("\n")
    event = lines[0].removeprefix("event: ") if lines[0].startswith("event: ") else None
    assert raw.endswith(b"\n\n")
    assert event == case.event
    assert json.loads(lines[-1].removeprefix("data: ")) == case.data
    scanner = scan(wire, raw)
    assert scanner.error is not None
    assert scanner.error.code == case.code

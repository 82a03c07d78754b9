"""OpenTelemetry tracing, on only with OTEL_EXPORTER_OTLP_ENDPOINT: the spans of a mint and a
proxied request, children of the caller's W3C traceparent, recorded by the SDK's in-memory
exporter (the process's tracer provider is set once, here, before any gateway starts)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.gateway import Gateway, account_entry, gateway_env, running_gateway

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    trace.set_tracer_provider(provider)
    yield _EXPORTER
    provider.shutdown()  # later tests' spans (if any) go nowhere


@pytest.fixture
async def traced(
    tmp_path: Path, spans: InMemorySpanExporter
) -> AsyncIterator[tuple[Gateway, InMemorySpanExporter]]:
    async with MockUpstream(chunks=4) as upstream:
        accounts = [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o-2024-08-06"})]
        # never reached: the test's provider, set first, is kept (no OTLP exporter is made)
        extra = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
        env = gateway_env(tmp_path, accounts, extra=extra)
        async with running_gateway(env, [upstream]) as gw:
            spans.clear()
            yield gw, spans


def _named(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def _ancestors(span: ReadableSpan, spans: tuple[ReadableSpan, ...]) -> set[int]:
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    found: set[int] = set()
    parent = span.parent
    while parent is not None and parent.span_id not in found:
        found.add(parent.span_id)
        above = by_id.get(parent.span_id)
        parent = above.parent if above is not None else None
    return found


async def test_a_mint_is_a_child_of_the_callers_trace_with_its_steps(
    traced: tuple[Gateway, InMemorySpanExporter],
) -> None:
    gw, exporter = traced
    response = await gw.client.post(
        f"{gw.url}/control/v2/keys",
        json={"tenant": "acme/web", "dispatch_id": "d-1", "model": "gpt-4o"},
        headers={**gw.control, "traceparent": TRACEPARENT},
    )
    assert response.status_code == 201
    finished = exporter.get_finished_spans()
    server = _named(finished, "POST /control/v2/keys")
    assert server.context is not None
    assert server.parent is not None
    assert (f"{server.context.trace_id:032x}", f"{server.parent.span_id:016x}") == (
        TRACE_ID,
        PARENT_ID,
    )
    assert server.attributes is not None
    assert server.attributes["http.response.status_code"] == 201
    for step in ("mint.facts", "mint.selection", "mint.commit"):
        assert server.context.span_id in _ancestors(_named(finished, step), finished)
    assert all(gw.env["LEASEGATE_CONTROL_TOKEN"] not in str(s.to_json()) for s in finished)


async def test_a_proxied_request_is_a_span_named_after_its_endpoint(
    traced: tuple[Gateway, InMemorySpanExporter],
) -> None:
    gw, exporter = traced
    minted = await gw.minted()
    exporter.clear()
    response = await gw.client.post(
        f"{gw.url}/v1/chat/completions",
        json={"model": "gpt-4o", "messages": [{"role": "user", "content": "a secret prompt"}]},
        headers={"Authorization": f"Bearer {minted['key']}", "traceparent": TRACEPARENT},
    )
    assert response.status_code == 200
    server = _named(exporter.get_finished_spans(), "POST /v1/chat/completions")
    assert server.context is not None
    assert f"{server.context.trace_id:032x}" == TRACE_ID
    text = str(server.to_json())
    assert minted["key"] not in text
    assert "a secret prompt" not in text


async def test_without_an_endpoint_nothing_is_traced(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    async with MockUpstream(chunks=4) as upstream:
        accounts = [account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o-2024-08-06"})]
        async with running_gateway(gateway_env(tmp_path, accounts), [upstream]) as gw:
            spans.clear()
            minted = await gw.minted()
            assert (await gw.chat(minted["key"])).status_code == 200
            names = {s.name for s in spans.get_finished_spans()}
            assert not any(name.startswith(("POST", "GET")) for name in names)

"""OpenTelemetry tracing, on only with OTEL_EXPORTER_OTLP_ENDPOINT: the spans of a mint and a
proxied request, children of the caller's W3C traceparent, recorded by the SDK's in-memory
exporter (the process's tracer provider is set once, here, before any gateway starts), in the
embedded gateway (FastAPI makes the server spans) and in the production proxy's own app
(Starlette: `ServerSpans` makes them); and the trace headers an upstream receives, only from
an account with `propagate_trace: true`."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from leasegate.demo.upstream import MockUpstream
from tests.fixtures.gateways import (
    Gateway,
    account_entry,
    gateway_env,
    in_process_gateway,
    in_process_split_gateway,
)
from tests.fixtures.services import production_stores

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
TRACESTATE = "vendor=abc,other=1"

_EXPORTER = InMemorySpanExporter()
_DISPATCHES = itertools.count()


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
        accounts = _accounts(upstream)
        # never reached: the test's provider, set first, is kept (no OTLP exporter is made)
        extra = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
        env = gateway_env(tmp_path, accounts, extra=extra)
        async with in_process_gateway(env, [upstream]) as gw:
            spans.clear()
            yield gw, spans


def _accounts(upstream: MockUpstream) -> list[dict[str, object]]:
    """`openai-main` (gpt-4o) keeps traces to itself; `openai-traced` (gpt-4o-mini, with a
    request ceiling) propagates them."""
    return [
        account_entry("openai-main", upstream, {"gpt-4o": "gpt-4o-2024-08-06"}),
        account_entry(
            "openai-traced",
            upstream,
            {"gpt-4o-mini": "gpt-4o-mini"},
            propagate_trace=True,
            request_capacity=4,
        ),
    ]


async def _call(gw: Gateway, model: str, headers: dict[str, str], **body: object) -> str:
    """Mint for `model`, call the proxy with the caller's `headers`; the key."""
    minted = await gw.minted(model=model, dispatch_id=f"d-{next(_DISPATCHES)}")
    response = await gw.client.post(
        f"{gw.url}/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "a secret prompt"}], **body},
        headers={"Authorization": f"Bearer {minted['key']}", **headers},
    )
    assert response.status_code == 200, response.text
    return str(minted["key"])


def _named(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def _assert_served_under_the_caller(server: ReadableSpan, status: int) -> None:
    """`server` is a child of the caller's `traceparent` and carries the answer's status."""
    assert server.context is not None
    assert server.parent is not None
    assert (f"{server.context.trace_id:032x}", f"{server.parent.span_id:016x}") == (
        TRACE_ID,
        PARENT_ID,
    )
    assert server.attributes is not None
    assert server.attributes["http.response.status_code"] == status


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
        headers={**gw.control_headers, "traceparent": TRACEPARENT},
    )
    assert response.status_code == 201
    finished = exporter.get_finished_spans()
    server = _named(finished, "POST /control/v2/keys")
    _assert_served_under_the_caller(server, 201)
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


async def test_a_proxied_request_has_a_span_for_each_step(
    traced: tuple[Gateway, InMemorySpanExporter],
) -> None:
    gw, exporter = traced
    key = await _call(gw, "gpt-4o-mini", {"traceparent": TRACEPARENT}, stream=True)
    await _until(lambda: any(s.name == "proxy.request" for s in exporter.get_finished_spans()))
    finished = exporter.get_finished_spans()
    server = _named(finished, "POST /v1/chat/completions")
    request = _named(finished, "proxy.request")
    assert request.parent is not None
    assert server.context is not None
    assert request.parent.span_id == server.context.span_id
    assert request.context is not None
    steps = ("proxy.admit", "proxy.health", "proxy.slot", "proxy.upstream", "proxy.finish")
    for step in steps:
        span = _named(finished, step)
        assert span.parent is not None
        assert span.parent.span_id == request.context.span_id, step
    ordered = sorted(steps, key=lambda step: _named(finished, step).start_time or 0)
    assert ordered == list(steps)
    assert _named(finished, "proxy.upstream").kind is SpanKind.CLIENT
    events = [event.name for event in request.events]
    assert events == ["first-token", "evidence"]
    assert request.attributes is not None
    assert request.attributes["leasegate.outcome"] == "success"
    assert request.attributes["leasegate.account"] == "openai-traced"
    assert request.attributes["leasegate.served_model"] == "gpt-4o-mini"
    text = "".join(str(span.to_json()) for span in finished)
    assert key not in text
    assert "a secret prompt" not in text
    assert "sk-" not in text  # no credential either


async def test_a_refused_request_names_its_code_and_never_goes_upstream(
    traced: tuple[Gateway, InMemorySpanExporter],
) -> None:
    gw, exporter = traced
    minted = await gw.minted()
    exporter.clear()
    response = await gw.chat(minted["key"], model="gpt-4o-mini")  # not the key's model
    assert response.status_code == 403, response.text
    await _until(lambda: any(s.name == "proxy.request" for s in exporter.get_finished_spans()))
    finished = exporter.get_finished_spans()
    request = _named(finished, "proxy.request")
    assert request.attributes is not None
    assert request.attributes["leasegate.outcome"] == "refused"
    assert request.attributes["leasegate.refusal_code"] == "model-not-permitted"
    assert {s.name for s in finished} & {"proxy.health", "proxy.upstream"} == set()


async def test_only_an_account_that_allows_it_receives_the_proxys_trace_context(
    traced: tuple[Gateway, InMemorySpanExporter],
) -> None:
    gw, exporter = traced
    upstream = gw.upstreams[0]
    caller = {"traceparent": TRACEPARENT, "tracestate": TRACESTATE}
    await _call(gw, "gpt-4o", caller)
    kept = upstream.requests[-1].headers
    assert "traceparent" not in kept
    assert "tracestate" not in kept
    exporter.clear()
    await _call(gw, "gpt-4o-mini", caller)
    sent = upstream.requests[-1].headers
    await _until(lambda: any(s.name == "proxy.upstream" for s in exporter.get_finished_spans()))
    client = _named(exporter.get_finished_spans(), "proxy.upstream")
    assert client.context is not None
    # the upstream's parent is the proxy's client span, in the caller's trace
    assert sent["traceparent"] == f"00-{TRACE_ID}-{client.context.span_id:016x}-01"
    assert sent["tracestate"] == TRACESTATE


async def test_untraced_only_the_allowed_account_gets_the_callers_trace_headers(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    async with MockUpstream(chunks=4) as upstream:
        async with in_process_gateway(gateway_env(tmp_path, _accounts(upstream)), [upstream]) as gw:
            spans.clear()
            caller = {"traceparent": TRACEPARENT, "tracestate": TRACESTATE}
            await _call(gw, "gpt-4o", caller)
            assert "traceparent" not in upstream.requests[-1].headers
            await _call(gw, "gpt-4o-mini", caller)
            sent = upstream.requests[-1].headers
            assert (sent["traceparent"], sent["tracestate"]) == (TRACEPARENT, TRACESTATE)
            await _call(gw, "gpt-4o-mini", {"traceparent": "00-not-a-trace-01"})
            assert "traceparent" not in upstream.requests[-1].headers
            names = {s.name for s in spans.get_finished_spans()}
            assert not any(name.startswith(("POST", "GET", "proxy.")) for name in names)


async def test_the_production_proxy_makes_the_server_span_its_steps_hang_from(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    extra = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    async with production_stores() as stores, MockUpstream(chunks=4) as upstream:
        env = gateway_env(tmp_path, _accounts(upstream), extra=extra, **stores)
        async with in_process_split_gateway(env, [upstream]) as (gw, proxy):
            minted = await gw.minted(model="gpt-4o-mini")
            spans.clear()
            response = await gw.client.post(
                f"{proxy}/v1/chat/completions",
                json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": f"Bearer {minted['key']}", "traceparent": TRACEPARENT},
            )
            assert response.status_code == 200, response.text
            missing = await gw.client.get(f"{proxy}/nowhere", headers={"traceparent": TRACEPARENT})
            assert missing.status_code == 404
            await _until(lambda: any(s.name == "proxy.finish" for s in spans.get_finished_spans()))
            finished = spans.get_finished_spans()
    server = _named(finished, "POST /v1/chat/completions")
    assert server.kind is SpanKind.SERVER
    _assert_served_under_the_caller(server, 200)
    assert server.attributes is not None
    assert server.attributes["http.route"] == "/v1/chat/completions"
    request = _named(finished, "proxy.request")
    assert request.parent is not None
    assert request.parent.span_id == server.context.span_id
    for step in ("proxy.admit", "proxy.upstream", "proxy.finish"):
        assert server.context.span_id in _ancestors(_named(finished, step), finished)
    unknown = _named(finished, "GET")  # no route: the method alone
    assert unknown.attributes is not None
    assert unknown.attributes["http.response.status_code"] == 404
    assert minted["key"] not in "".join(str(span.to_json()) for span in finished)


async def _until(done: Callable[[], bool]) -> None:
    """A relay ends its request just after the last byte: wait briefly for its spans."""
    for _ in range(100):
        if done():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the spans did not arrive")

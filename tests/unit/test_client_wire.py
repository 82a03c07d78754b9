"""The client's pure parts: reading the error envelope, and what a failed call means."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasegate.client import (
    GatewayRefusal,
    Held,
    ProtocolError,
    ProxyFailure,
    Rejected,
    classify_failure,
    parse,
    wire,
)
from leasegate.client.control import AsyncControlClient, ControlClient
from leasegate.client.records import PassOver


def test_the_envelope_becomes_a_typed_refusal() -> None:
    body = {
        "error": {
            "type": "service_unavailable",
            "code": "no-eligible-account",
            "message": "no account can serve the requested model now",
            "disposition": "held",
            "retry_after_s": 12.5,
            "passed_over": [{"account_id": "a", "code": "model-cooling"}],
            "cooldown_scope": "model",
            "mint_decision_id": "md_1",
        }
    }
    refusal = wire.refusal(503, {"retry-after": "13"}, body)
    assert isinstance(refusal, Held)
    assert (refusal.status, refusal.code, refusal.retry_after_s) == (
        503,
        "no-eligible-account",
        12.5,
    )
    assert refusal.passed_over == (PassOver(account_id="a", code="model-cooling"),)
    assert (refusal.cooldown_scope, refusal.mint_decision_id) == ("model", "md_1")


def test_retry_after_falls_back_to_the_header_and_odd_bodies_still_raise() -> None:
    held = wire.refusal(503, {"retry-after": "2"}, {"error": {"code": "x", "disposition": "held"}})
    assert held.retry_after_s == 2.0
    rejected = wire.refusal(409, {}, {"error": {"code": "y", "disposition": "rejected"}})
    assert isinstance(rejected, Rejected)
    assert rejected.retry_after_s is None
    bare = wire.refusal(502, {}, "<html>bad gateway</html>")
    assert type(bare) is GatewayRefusal
    assert (bare.status, bare.code, bare.disposition) == (502, "unknown", None)


def _upstream(status: int, code: str = "whatever") -> ProxyFailure:
    return ProxyFailure(status, code, "upstream said no")


@given(st.integers(min_value=500, max_value=599))
def test_every_upstream_5xx_hops(status: int) -> None:
    assert classify_failure(_upstream(status)).action == "hop"


@given(
    st.integers(min_value=400, max_value=499).filter(lambda s: s not in {401, 402, 403, 408, 429})
)
def test_other_upstream_4xx_stop(status: int) -> None:
    assert classify_failure(_upstream(status, "invalid_request")).action == "stop"


def test_gateway_refusals_are_read_by_their_code() -> None:
    def gateway(status: int, code: str) -> ProxyFailure:
        return ProxyFailure(status, code, "", gateway=True, retry_after_s=3.0)

    assert classify_failure(gateway(503, "model-cooling")).action == "hop"
    assert classify_failure(gateway(503, "circuit-open")).action == "hop"
    capacity = classify_failure(gateway(429, "account-request-capacity-exhausted"))
    assert (capacity.action, capacity.retry_after_s) == ("again", 3.0)
    quota = classify_failure(gateway(429, "account-quota-exhausted"))
    assert (quota.action, quota.retry_after_s) == ("again", 3.0)  # never a hop: the gateway's
    assert classify_failure(gateway(401, "key-revoked")).action == "stop"
    assert classify_failure(gateway(400, "invalid-request")).action == "stop"


def test_transport_failures_and_stream_errors_hop() -> None:
    request = httpx.Request("POST", "http://proxy/v1/chat/completions")
    assert classify_failure(httpx.ReadTimeout("slow", request=request)).action == "hop"
    assert classify_failure(httpx.ConnectError("refused", request=request)).action == "hop"
    assert classify_failure(ProxyFailure(200, "overloaded_error", "in stream")).action == "hop"
    response = httpx.Response(429, json={"error": {"code": "rate_limit_exceeded"}}, request=request)
    status_error = httpx.HTTPStatusError("429", request=request, response=response)
    assert classify_failure(status_error).action == "hop"
    assert classify_failure(KeyError("a bug in the caller")).action == "stop"


def test_an_account_without_a_request_ceiling_reads_no_in_flight_count() -> None:
    # the control plane counts request slots only under a ceiling and reports null otherwise
    base = {
        "provider": "openai",
        "configured": True,
        "admin_state": "enabled",
        "health": "healthy",
        "cooling_models": [],
        "circuit": {"open": False, "until": None, "reason": None},
        "lease_capacity": None,
        "spend_today": {"requests": 0, "input_tokens": 0, "output_tokens": 0, "cost": None},
    }
    body = {
        "accounts": [
            {**base, "id": "free", "leases_held": 1,
             "requests_in_flight": None, "request_capacity": None},
            {**base, "id": "slots", "leases_held": 0,
             "requests_in_flight": 3, "request_capacity": 5},
        ],
        "revision": 0,
        "chain": "absent",
    }  # fmt: skip
    free, slots = parse.accounts(body).accounts
    assert (free.requests_in_flight, free.request_capacity) == (None, None)
    assert (slots.requests_in_flight, slots.request_capacity) == (3, 5)


def test_an_incomplete_answer_is_a_protocol_error() -> None:
    op = wire.accounts()
    with pytest.raises(ProtocolError):
        wire.outcome(op, 200, {}, b'{"accounts": [{"id": "a"}], "revision": 0, "chain": "ok"}')


def test_transient_failures_are_those_where_nothing_reached_the_caller() -> None:
    def upstream(status: int, code: str | None = None, **headers: str) -> httpx.HTTPStatusError:
        request = httpx.Request("POST", "http://proxy/v1/chat/completions")
        body = {"error": {"code": code}} if code else {}
        response = httpx.Response(status, json=body, headers=headers, request=request)
        return httpx.HTTPStatusError(str(status), request=request, response=response)

    assert classify_failure(upstream(500)).transient
    assert classify_failure(upstream(503, **{"retry-after": "2"})).transient
    limited = classify_failure(upstream(429, **{"retry-after-ms": "250"}))
    assert (limited.transient, limited.retry_after_s) == (True, 0.25)
    assert not classify_failure(upstream(429)).transient  # no hint how long: hop
    quota = upstream(429, "insufficient_quota", **{"retry-after": "1"})
    assert not classify_failure(quota).transient
    assert not classify_failure(upstream(401)).transient
    reset = ProxyFailure(502, "upstream-unreachable", "", gateway=True)
    assert classify_failure(reset).transient
    assert not classify_failure(ProxyFailure(504, "upstream-timeout", "", gateway=True)).transient
    # a failure inside a 200 stream: content may already be with the caller
    assert not classify_failure(ProxyFailure(200, "overloaded_error", "in stream")).transient
    request = httpx.Request("POST", "http://proxy/v1/chat/completions")
    assert not classify_failure(httpx.ReadError("cut", request=request)).transient


def test_upstream_errors_are_read_with_every_provider_kinds_vocabulary() -> None:
    """The client cannot know the account's kind: any kind's quota or missing-model name
    counts, as the gateway classifies it (leasegate.providers)."""
    request = httpx.Request("POST", "http://proxy/v1/chat/completions")

    def upstream(status: int, body: object, **headers: str) -> httpx.HTTPStatusError:
        response = httpx.Response(status, json=body, headers=headers, request=request)
        return httpx.HTTPStatusError(str(status), request=request, response=response)

    gemini_quota = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "BILLING_DISABLED"}
            ],
        }
    }
    assert not classify_failure(upstream(429, gemini_quota, **{"retry-after": "1"})).transient
    anthropic_billing = {"type": "error", "error": {"type": "billing_error", "message": "-"}}
    assert not classify_failure(upstream(429, anthropic_billing, **{"retry-after": "1"})).transient
    # a missing model: Anthropic's not_found_error, OpenRouter's numeric 404, Gemini's status
    assert classify_failure(upstream(404, {"error": {"type": "not_found_error"}})).action == "hop"
    assert classify_failure(upstream(404, {"error": {"code": 404}})).action == "hop"
    gemini_missing = {"error": {"code": 404, "status": "NOT_FOUND", "message": "-"}}
    assert classify_failure(upstream(404, gemini_missing)).action == "hop"
    assert classify_failure(upstream(404, {"error": {"code": "no_such_route"}})).action == "stop"


def _bound_operations(cls: type) -> set[str]:
    return {
        name
        for name, value in vars(cls).items()
        if getattr(value, "__qualname__", "").endswith("<locals>.call")
    }


def test_both_control_clients_offer_every_operation_of_the_wire() -> None:
    # the two clients bind the same builders, one line each: a builder added to `wire` and
    # bound on one client only fails here
    builders = {
        name
        for name, value in vars(wire).items()
        if callable(value)
        and str(getattr(value, "__annotations__", {}).get("return", "")).startswith("Operation[")
    }
    assert {"mint", "renew", "set_account_state"} <= builders
    assert _bound_operations(ControlClient) == _bound_operations(AsyncControlClient) == builders

"""The SPEC §4 failure-class table, case by case and provider by provider."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasegate.core.observation import Classification, Observation
from leasegate.routing.classify import classify


def _c(
    outcome: str, scope: str | None, qualifying: bool, reason: str | None
) -> tuple[str, str | None, bool, str | None]:
    return (outcome, scope, qualifying, reason)


def _summary(c: Classification) -> tuple[str, str | None, bool, str | None]:
    return (c.outcome, c.scope, c.qualifying, c.reason)


def test_a_complete_2xx_is_a_success_that_resets_the_streak() -> None:
    for status in (200, 201, 204):
        result = classify(Observation("response", status=status))
        assert _summary(result) == _c("success", None, False, None)
        assert result.resets_streak


def test_only_a_success_resets_the_streak() -> None:
    failures = [
        Observation("response", status=429),
        Observation("stream-error", status=200, error_type="overloaded_error"),
        Observation("truncated", status=200),
        Observation("client-abort"),
        Observation("refused", refusal_code="model-cooling"),
    ]
    assert not any(classify(o).resets_streak for o in failures)


OPENAI = [
    pytest.param(
        Observation("response", 429, "requests", "rate_limit_exceeded"),
        _c("upstream-error", "model", True, "rate_limit_exceeded"),
        id="rate-limit-429",
    ),
    pytest.param(
        Observation("response", 429, "insufficient_quota", "insufficient_quota"),
        _c("upstream-error", "account", True, "insufficient_quota"),
        id="insufficient-quota-arrives-as-429",
    ),
    pytest.param(
        Observation("response", 400, "invalid_request_error", "billing_hard_limit_reached"),
        _c("upstream-error", "account", True, "billing_hard_limit_reached"),
        id="billing-hard-limit",
    ),
    pytest.param(
        Observation("response", 401, "invalid_request_error", "invalid_api_key"),
        _c("upstream-error", "account", True, "invalid_api_key"),
        id="invalid-api-key-401",
    ),
    pytest.param(
        Observation("response", 403, None, None),
        _c("upstream-error", "model", True, "http-403"),
        id="bare-403-is-no-account-matter",
    ),
    pytest.param(
        Observation("response", 404, "invalid_request_error", "model_not_found"),
        _c("upstream-error", "model", True, "model_not_found"),
        id="model-not-found-404",
    ),
    pytest.param(
        Observation("response", 404, "invalid_request_error", None),
        _c("upstream-error", None, False, "http-404"),
        id="other-404-is-the-callers",
    ),
    pytest.param(
        Observation("response", 400, "invalid_request_error", "context_length_exceeded"),
        _c("upstream-error", None, False, "http-400"),
        id="context-length-400-is-the-callers",
    ),
    pytest.param(
        Observation("response", 500, "server_error", None),
        _c("upstream-error", "model", True, "http-500"),
        id="server-error-500",
    ),
    pytest.param(
        Observation("response", 503, None, None),
        _c("upstream-error", "model", True, "http-503"),
        id="unavailable-503",
    ),
    pytest.param(
        Observation("stream-error", 200, "server_error", None),
        _c("in-stream-error", "model", True, "server_error"),
        id="error-object-in-stream",
    ),
    pytest.param(
        Observation("stream-error", 200, "insufficient_quota", "insufficient_quota"),
        _c("in-stream-error", "account", True, "insufficient_quota"),
        id="quota-error-in-stream-is-account-scope",
    ),
]

ANTHROPIC = [
    pytest.param(
        Observation("response", 529, "overloaded_error", None),
        _c("upstream-error", "model", True, "overloaded_error"),
        id="overloaded-529",
    ),
    pytest.param(
        Observation("stream-error", 200, "overloaded_error", None),
        _c("in-stream-error", "model", True, "overloaded_error"),
        id="event-error-overloaded",
    ),
    pytest.param(
        Observation("response", 429, "rate_limit_error", None),
        _c("upstream-error", "model", True, "rate_limit_error"),
        id="rate-limit-429",
    ),
    pytest.param(
        Observation("response", 401, "authentication_error", None),
        _c("upstream-error", "account", True, "authentication_error"),
        id="authentication-401",
    ),
    pytest.param(
        Observation("response", 403, "permission_error", None),
        _c("upstream-error", "account", True, "permission_error"),
        id="permission-403",
    ),
    pytest.param(
        Observation("response", 400, "billing_error", None),
        _c("upstream-error", "account", True, "billing_error"),
        id="billing-error-whatever-the-status",
    ),
    pytest.param(
        Observation("response", 404, "not_found_error", None),
        _c("upstream-error", "model", True, "not_found_error"),
        id="not-found-404",
    ),
    pytest.param(
        Observation("response", 400, "invalid_request_error", None),
        _c("upstream-error", None, False, "http-400"),
        id="invalid-request-400",
    ),
    pytest.param(
        Observation("response", 413, "request_too_large", None),
        _c("upstream-error", None, False, "http-413"),
        id="too-large-413",
    ),
    pytest.param(
        Observation("response", 500, "api_error", None),
        _c("upstream-error", "model", True, "http-500"),
        id="api-error-500",
    ),
    pytest.param(
        Observation("stream-error", 200, "api_error", None),
        _c("in-stream-error", "model", True, "api_error"),
        id="event-error-api-error",
    ),
]

OPENROUTER = [
    pytest.param(
        # {"error": {"code": 502, "message": "...exceeds the maximum usage size allowed
        # during peak load..."}} as an SSE event after a 200
        Observation("stream-error", 200, None, "502"),
        _c("in-stream-error", "model", True, "http-502"),
        id="peak-load-refusal-in-200-stream",
    ),
    pytest.param(
        Observation("stream-error", 200, None, "402"),
        _c("in-stream-error", "account", True, "http-402"),
        id="out-of-credits-in-stream",
    ),
    pytest.param(
        Observation("stream-error", 200, None, None),
        _c("in-stream-error", "model", True, "stream-error"),
        id="bare-error-event",
    ),
    pytest.param(
        Observation("response", 402, None, "402"),
        _c("upstream-error", "account", True, "http-402"),
        id="insufficient-credits-402",
    ),
    pytest.param(
        Observation("response", 404, None, "404"),
        _c("upstream-error", "model", True, "model-not-found"),
        id="no-endpoints-for-model-404",
    ),
    pytest.param(
        Observation("response", 429, None, "429"),
        _c("upstream-error", "model", True, "rate-limited"),
        id="rate-limited-429",
    ),
    pytest.param(
        Observation("response", 408, None, "408"),
        _c("upstream-error", "model", True, "http-408"),
        id="request-timeout-408",
    ),
    pytest.param(
        Observation("response", 502, None, "502"),
        _c("upstream-error", "model", True, "http-502"),
        id="provider-down-502",
    ),
    pytest.param(
        Observation("response", 400, None, "400"),
        _c("upstream-error", None, False, "http-400"),
        id="bad-request-400",
    ),
]


@pytest.mark.parametrize(("observation", "expected"), OPENAI)
def test_openai(observation: Observation, expected: tuple[object, ...]) -> None:
    assert _summary(classify(observation)) == expected


@pytest.mark.parametrize(("observation", "expected"), ANTHROPIC)
def test_anthropic(observation: Observation, expected: tuple[object, ...]) -> None:
    assert _summary(classify(observation)) == expected


@pytest.mark.parametrize(("observation", "expected"), OPENROUTER)
def test_openrouter(observation: Observation, expected: tuple[object, ...]) -> None:
    assert _summary(classify(observation)) == expected


@pytest.mark.parametrize(
    ("observation", "expected"),
    [
        (Observation("truncated", 200), _c("in-stream-error", "model", True, "truncated")),
        (Observation("timeout"), _c("timeout", "model", True, "timeout")),
        (Observation("timeout", 200), _c("timeout", "model", True, "timeout")),
        (Observation("connect-error"), _c("connect-error", "account", True, "connect-error")),
        (Observation("dropped"), _c("upstream-error", "model", True, "connection-dropped")),
        (Observation("client-abort", 200), _c("client-abort", None, False, "client-abort")),
        (
            Observation("gateway-shutdown", 200),
            _c("gateway-shutdown", None, False, "gateway-shutdown"),
        ),
        (Observation("response", 504), _c("upstream-error", "model", True, "http-504")),
        (Observation("response", 599), _c("upstream-error", "model", True, "http-599")),
        (Observation("response", 302), _c("upstream-error", "model", True, "http-302")),
        (Observation("response", 409), _c("upstream-error", None, False, "http-409")),
        (Observation("response", 422), _c("upstream-error", None, False, "http-422")),
    ],
)
def test_transport_and_generic_statuses(
    observation: Observation, expected: tuple[object, ...]
) -> None:
    assert _summary(classify(observation)) == expected


@pytest.mark.parametrize("code", ["model-cooling", "circuit-open"])
def test_a_cooldown_refusal_qualifies_on_the_gateways_own_evidence(code: str) -> None:
    assert _summary(classify(Observation("refused", refusal_code=code))) == _c(
        "refused", None, True, code
    )


@pytest.mark.parametrize(
    "code",
    [
        "key-invalid",
        "key-revoked",
        "key-expired",
        "account-disabled",
        "model-not-permitted",
        "account-request-capacity-exhausted",
        "upstream-pool-exhausted",
        "invalid-request",
    ],
)
def test_other_refusals_do_not_qualify(code: str) -> None:
    assert _summary(classify(Observation("refused", refusal_code=code))) == _c(
        "refused", None, False, code
    )


def test_error_names_are_matched_case_insensitively() -> None:
    result = classify(Observation("response", 429, "Insufficient_Quota", None))
    assert (result.scope, result.reason) == ("account", "insufficient_quota")


@given(
    status=st.integers(min_value=100, max_value=599),
    error_type=st.none() | st.text(max_size=30),
    error_code=st.none() | st.text(max_size=30),
)
def test_every_upstream_answer_gets_a_consistent_class(
    status: int, error_type: str | None, error_code: str | None
) -> None:
    result = classify(Observation("response", status, error_type, error_code))
    assert result.resets_streak == (200 <= status < 300)
    # scope and qualifying travel together for upstream answers: a scoped failure can
    # license a hop, an unscoped one is the caller's (or nobody's) fault
    assert result.qualifying == (result.scope is not None)
    assert result.reason is None or result.reason.strip() == result.reason
    if status >= 500:
        assert result.scope is not None


@given(
    error_type=st.none() | st.text(max_size=30),
    error_code=st.none() | st.text(max_size=30) | st.integers(0, 999).map(str),
)
def test_every_in_stream_error_qualifies_and_names_a_scope(
    error_type: str | None, error_code: str | None
) -> None:
    result = classify(Observation("stream-error", 200, error_type, error_code))
    assert (result.outcome, result.qualifying) == ("in-stream-error", True)
    assert result.scope in ("model", "account")
    assert result.reason


RATE_LIMITS = [
    pytest.param(Observation("response", 429, "tokens", "rate_limit_exceeded"), id="openai"),
    pytest.param(Observation("response", 429, "rate_limit_error", None), id="anthropic"),
    pytest.param(Observation("response", 429, None, "429"), id="azure-openrouter-numeric"),
    pytest.param(Observation("response", 429, rate_limit_wait_s=0.6), id="headers-say-when"),
    pytest.param(Observation("stream-error", 200, "rate_limit_error", None), id="in-stream"),
]


@pytest.mark.parametrize("observation", RATE_LIMITS)
def test_a_rate_limit_is_no_health_failure_but_still_lets_the_dispatch_hop(
    observation: Observation,
) -> None:
    result = classify(observation)
    assert result.rate_limited
    assert result.health_scope is None  # neither the streak nor the circuit hears of it
    assert result.qualifying
    assert result.scope == "model"  # the row names the pair that is out of quota


def test_a_bare_429_saying_nothing_is_a_fault_as_before() -> None:
    result = classify(Observation("response", 429))
    assert not result.rate_limited
    assert result.health_scope == "model"


def test_quota_exhaustion_on_a_429_stays_an_account_matter() -> None:
    result = classify(Observation("response", 429, "insufficient_quota", "insufficient_quota"))
    assert not result.rate_limited
    assert result.health_scope == "account"


@pytest.mark.parametrize("status", [401, 402, 403])
def test_a_waf_page_never_opens_the_account_circuit(status: int) -> None:
    # an HTML 403 from an edge: no provider JSON, so no error identifiers at all
    result = classify(Observation("response", status))
    assert result.health_scope == "model"
    assert result.reason == f"http-{status}"


@pytest.mark.parametrize(
    ("observation", "reason"),
    [
        (Observation("response", 401, "authentication_error", None), "authentication_error"),
        (Observation("response", 403, "permission_error", None), "permission_error"),
        (Observation("response", 402, None, "402"), "http-402"),
        (
            Observation("response", 401, "invalid_request_error", "invalid_api_key"),
            "invalid_api_key",
        ),
        (Observation("stream-error", 200, None, "401"), "http-401"),
    ],
)
def test_the_providers_own_auth_or_billing_error_is_account_scope(
    observation: Observation, reason: str
) -> None:
    result = classify(observation)
    assert (result.health_scope, result.reason) == ("account", reason)


def test_an_overload_is_model_scope_marked_for_the_short_window() -> None:
    result = classify(Observation("response", 529, "overloaded_error", None))
    assert (result.health_scope, result.overloaded) == ("model", True)
    streamed = classify(Observation("stream-error", 200, "overloaded_error", None))
    assert (streamed.health_scope, streamed.overloaded) == ("model", True)

"""Failure classification: what the proxy observed -> (outcome, scope, qualifying, reason).

Only the upstream's status line and *error* payload (`error.type`, `error.code`), stream
events, transport failures and the gateway's own refusals inform a class; a request body
never does (an `Observation` cannot even carry one).

| observed                                              | outcome          | scope   | qual. |
|-------------------------------------------------------|------------------|---------|-------|
| 2xx, body or stream complete                          | success (resets) | -       | no    |
| a billing/quota/auth code, any status or in-stream    | upstream-error / | account | yes   |
|   (`insufficient_quota` even as a 429)                |  in-stream-error |         |       |
| error event in a 200 stream, truncated stream         | in-stream-error  | model   | yes   |
| 401, 402, 403 with the provider's JSON naming no auth | upstream-error   | model   | yes   |
|   or billing code (a WAF/CDN page: never the circuit) |                  |         |       |
| 429 that is a rate limit (a rate-limit code, a numeric| upstream-error   | model*  | yes   |
|   429 code, or headers saying when to retry)          |                  |         |       |
| 404 with a model-not-found code                       | upstream-error   | model   | yes   |
| 408, a bare 429, every 5xx (Anthropic 529: short     | upstream-error   | model   | yes   |
|   window), any non-2xx/4xx                            |                  |         |       |
| headers / first-token / idle / read timeout           | timeout          | model   | yes   |
| connect, DNS or TLS failure                           | connect-error    | account | yes   |
| connection dropped after the request went out, before | upstream-error   | model   | yes   |
|   a status line (the request may be the cause)        |                  |         |       |
| 4xx saying the context window was exceeded           | context-length-  | model*  | no**  |
|   (OpenAI, Anthropic, OpenRouter shapes)              |  exceeded        |         |       |
| any other 4xx                                         | upstream-error   | -       | no    |
| client went away                                      | client-abort     | -       | no    |
| stream cut by the gateway's shutdown after the drain  | gateway-shutdown | -       | no    |
| refused `model-cooling` / `circuit-open`              | refused          | -       | yes   |
| any other gateway refusal                             | refused          | -       | no    |

* not a health failure (`Classification.health_scope` is None): a context-length error is
the request's fault; a rate limit is the provider's quota, waited out by the proxy's quota
view until its reset (`rate_limited`). ** qualifies only for a hop to
the model's declared `context_fallback` (leasegate.routing.fallback).

Which error identifiers mean a credential or billing fault, a missing model or an overload is
the account's kind's to say (`ProviderKind.errors`, leasegate.providers); `classify` takes
that vocabulary, by default the OpenAI-shaped family's (`COMMON_ERRORS`). OpenRouter's `code`
is numeric and echoes an HTTP status (its peak-load refusal is `{"error": {"code": 502, ...}}`
inside a 200 stream, and "no endpoints for this model" is a 404 with code 404), so a numeric
in-stream code of 401, 402 or 403 is read as account scope, and a 404 whose code echoes 404 as
model-not-found; Gemini's numeric codes are HTTP statuses too.

`reason` is the most specific name available: a recognised code or type (e.g.
`insufficient_quota`, `overloaded_error`, `model_not_found`), else `http-<status>` (an
in-stream numeric code counts as a status), else the observation kind.
"""

from __future__ import annotations

from leasegate.core.observation import Classification, Observation
from leasegate.providers import COMMON_ERRORS, ErrorVocabulary

ACCOUNT_STATUSES = frozenset({401, 402, 403})
MODEL_STATUSES = frozenset({408, 429})
COOLDOWN_REFUSALS = frozenset({"model-cooling", "circuit-open"})


def classify(observation: Observation, errors: ErrorVocabulary = COMMON_ERRORS) -> Classification:
    """`errors`: the vocabulary of the account's kind."""
    match observation.kind:
        case "response":
            return _classify_response(observation, errors)
        case "stream-error":
            return _classify_stream_error(observation, errors)
        case "truncated":
            return Classification("in-stream-error", "model", True, "truncated")
        case "timeout":
            return Classification("timeout", "model", True, "timeout")
        case "connect-error":
            return Classification("connect-error", "account", True, "connect-error")
        case "dropped":
            # A caller can provoke this with its own request: never account-level.
            return Classification("upstream-error", "model", True, "connection-dropped")
        case "client-abort":
            return Classification("client-abort", None, False, "client-abort")
        case "gateway-shutdown":
            # the gateway's own doing: neither the account's health nor a hop's license
            return Classification("gateway-shutdown", None, False, "gateway-shutdown")
        case "refused":
            code = observation.refusal_code or "refused"
            return Classification("refused", None, code in COOLDOWN_REFUSALS, code)


def _classify_response(observation: Observation, errors: ErrorVocabulary) -> Classification:
    status = observation.status
    if status is not None and 200 <= status < 300:
        return Classification("success", None, False, None, resets_streak=True)
    if observation.context_length and status is not None and 400 <= status < 500:
        # model scope on the row, yet no health failure and no ordinary hop: only a hop to
        # the model's declared context_fallback (routing.fallback) may cite it
        return Classification("context-length-exceeded", "model", False, "context_length_exceeded")
    names = _error_names(observation)
    if account_code := _first_in(names, errors.account):
        return Classification("upstream-error", "account", True, account_code)
    numeric = _numeric_code(observation.error_code)
    status_reason = f"http-{status}" if status is not None else "http-unknown"
    if numeric in ACCOUNT_STATUSES:
        # the provider's own JSON names an auth/billing/permission failure (OpenRouter,
        # Azure and Gemini echo the status as a numeric code)
        return Classification("upstream-error", "account", True, f"http-{numeric}")
    if status in ACCOUNT_STATUSES:
        # no credential or billing code in the provider's shape: a WAF or CDN page, or the
        # caller's own request refused. Never the account's circuit: one caller could take
        # the account out for every tenant.
        return Classification("upstream-error", "model", True, status_reason)
    if status == 429 and (rate := _rate_limit(observation, names, numeric, errors)):
        return Classification("upstream-error", "model", True, rate, rate_limited=True)
    if status == 404:
        if found := _first_in(names, errors.model_not_found):
            return Classification("upstream-error", "model", True, found)
        if numeric == 404:
            return Classification("upstream-error", "model", True, "model-not-found")
        return Classification("upstream-error", None, False, status_reason)
    if status is not None and 400 <= status < 500 and status not in MODEL_STATUSES:
        return Classification("upstream-error", None, False, status_reason)
    # 408, 429, 5xx and anything that is neither 2xx nor 4xx: the upstream's trouble
    if overloaded := _first_in(names, errors.overloaded):
        return Classification("upstream-error", "model", True, overloaded, overloaded=True)
    return Classification("upstream-error", "model", True, status_reason)


def _rate_limit(
    observation: Observation, names: list[str], numeric: int | None, errors: ErrorVocabulary
) -> str | None:
    """The reason of a 429 that is a rate limit (by its code, or by headers saying when to
    retry); None for a bare 429 that says neither (a fault, as any other)."""
    if found := _first_in(names, errors.rate_limited):
        return found
    if numeric == 429 or observation.rate_limit_wait_s is not None:
        return "rate-limited"
    return None


def _classify_stream_error(observation: Observation, errors: ErrorVocabulary) -> Classification:
    names = _error_names(observation)
    if account_code := _first_in(names, errors.account):
        return Classification("in-stream-error", "account", True, account_code)
    numeric = _numeric_code(observation.error_code)
    if numeric in ACCOUNT_STATUSES:
        return Classification("in-stream-error", "account", True, f"http-{numeric}")
    if rate := _first_in(names, errors.rate_limited):
        return Classification("in-stream-error", "model", True, rate, rate_limited=True)
    if overloaded := _first_in(names, errors.overloaded):
        return Classification("in-stream-error", "model", True, overloaded, overloaded=True)
    if names:
        reason = names[0]
    elif numeric is not None:
        reason = f"http-{numeric}"
    else:
        reason = "stream-error"
    return Classification("in-stream-error", "model", True, reason)


def _error_names(observation: Observation) -> list[str]:
    """The non-numeric error code, then the error type, lower-cased: the most specific first."""
    names = []
    for raw in (observation.error_code, observation.error_type):
        name = (raw or "").strip().lower()
        if name and _numeric_code(name) is None:
            names.append(name)
    return names


def _first_in(names: list[str], table: frozenset[str]) -> str | None:
    return next((name for name in names if name in table), None)


def _numeric_code(raw: str | None) -> int | None:
    if raw is None:
        return None
    text = raw.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 3 else None

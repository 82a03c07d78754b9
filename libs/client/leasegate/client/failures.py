"""What a failed call means for a dispatch, decided from what the caller saw.

The gateway grants a hop only on its own qualifying evidence (SPEC §4); this guesses, from the
outside, which failures the gateway will have classified as qualifying, so that a dispatch
asks for a hop only when one can be granted and stops at once when none ever will:

    hop    429/408/every 5xx, 401/402/403 of the upstream (account scope), a model-not-found 404,
           an error event inside a 200 stream, a stream event the SDK could not decode
           (`json.JSONDecodeError`), a timeout or a broken connection, and the proxy's own
           `model-cooling` / `circuit-open` refusals
    again  the proxy refused for a moment on its own account (`account-request-capacity-
           exhausted`, `upstream-pool-exhausted`): not qualifying, so no hop; the same key
           may succeed after `retry_after_s`
    fallback  the proxy named the model's `context_fallback` (`x-leasegate-context-fallback`)
           on an upstream's context-length error: hop to that model
    stop   anything else: the caller's own request is at fault (400, 404, 413, 422 ...) or
           the key itself was refused (revoked, expired, disabled account)

A hop verdict is also `transient` when no content can have reached the caller and the same
lease may well succeed at once: an upstream 5xx or 429 answered with an error status (never a
failure inside a 200 stream), or the proxy's `upstream-unreachable` (the upstream reset or
refused the connection before any response byte). `Dispatch` retries those once on the same
lease before hopping; a 429 only when it says how long to wait (`Retry-After`).

Which upstream error identifiers mean a quota or credential fault or a missing model is the
provider kinds' to say (`leasegate.providers.ANY_KIND_ERRORS`, every kind's vocabulary at
once: the caller does not know the account's kind), read from the payload as any wire reads
it (`error_names`), the same tables the gateway classifies with. Errors of the official SDKs
are read by shape (`status_code`, `body`, the class names of
their connection errors), so this package does not depend on them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from leasegate.client import wire
from leasegate.client.errors import ProxyFailure
from leasegate.providers import ANY_KIND_ERRORS, error_names

Action = Literal["hop", "again", "stop", "fallback"]

_HOP_STATUSES = frozenset({401, 402, 403, 408, 429})  # and every 5xx (Anthropic's 529 too)
_HOP_GATEWAY_CODES = frozenset(
    {"model-cooling", "circuit-open", "upstream-timeout", "upstream-unreachable"}
)
_AGAIN_GATEWAY_CODES = frozenset(
    {"account-request-capacity-exhausted", "account-quota-exhausted", "upstream-pool-exhausted"}
)
# the SDKs' connection failures (openai/anthropic APIConnectionError, APITimeoutError)
_CONNECTION_CLASS_NAMES = frozenset({"APIConnectionError", "APITimeoutError"})


@dataclass(frozen=True, slots=True)
class Verdict:
    action: Action
    reason: str
    """A short description for the dispatch's chain (e.g. "status 429", "in-stream error")."""
    retry_after_s: float | None = None
    transient: bool = False
    """Worth one more try on the same lease: nothing reached the caller yet."""
    model: str | None = None
    """For "fallback": the model to hop to (the request exceeded this one's context)."""


@dataclass(frozen=True, slots=True)
class _Seen:
    status: int | None
    code: str | None
    gateway: bool
    retry_after_s: float | None
    context_fallback: str | None = None
    names: tuple[str, ...] = ()
    """The upstream error's identifiers, lower-cased, most specific first."""


def classify_failure(error: BaseException) -> Verdict:
    if isinstance(error, json.JSONDecodeError):
        # an SDK could not decode a stream event (one the proxy relayed byte-exact): a stream
        # failure after content may have reached the caller, not a bug in the call
        return Verdict("hop", "stream: malformed event")
    seen = _seen(error)
    if seen is None:
        if _is_connection_failure(error):
            return Verdict("hop", f"connection: {type(error).__name__}")
        if _stream_error_body(error) is not None:
            return Verdict("hop", "in-stream error")
        return Verdict("stop", f"unclassified: {type(error).__name__}")
    return _by_status(seen)


def _by_status(seen: _Seen) -> Verdict:
    label = f"status {seen.status}" + (f" {seen.code}" if seen.code else "")
    if seen.context_fallback and not seen.gateway:
        return Verdict("fallback", label, model=seen.context_fallback)
    if seen.status is None or seen.status < 300:
        # an error event inside a 200 stream: the provider's, or the one the proxy appends
        # when the upstream stalls or cuts the stream; either way qualifying evidence
        return Verdict("hop", "in-stream error" + (f" {seen.code}" if seen.code else ""))
    if seen.gateway:
        if seen.code in _HOP_GATEWAY_CODES:
            transient = seen.code == "upstream-unreachable"
            return Verdict("hop", label, seen.retry_after_s, transient=transient)
        if seen.code in _AGAIN_GATEWAY_CODES:
            return Verdict("again", label, seen.retry_after_s)
        return Verdict("stop", label)
    if seen.status in _HOP_STATUSES or seen.status >= 500:
        transient = seen.status >= 500 or (seen.status == 429 and seen.retry_after_s is not None)
        if _any_in(seen.names, ANY_KIND_ERRORS.account):
            transient = False  # a quota or credential fault does not pass in a moment
        return Verdict("hop", label, seen.retry_after_s, transient=transient)
    if seen.status == 404 and (
        _any_in(seen.names, ANY_KIND_ERRORS.model_not_found) or "404" in seen.names
    ):
        return Verdict("hop", label)  # the model is missing (a numeric code echoes the status)
    return Verdict("stop", label)


def _seen(error: BaseException) -> _Seen | None:
    """Status, code and origin of a failure that carried an HTTP answer; None otherwise."""
    if isinstance(error, ProxyFailure):
        names = (error.code.lower(),) if error.code else ()
        return _Seen(
            error.status,
            error.code,
            error.gateway,
            error.retry_after_s,
            error.context_fallback,
            names,
        )
    if isinstance(error, httpx.HTTPStatusError):
        response = error.response
        try:
            body: Any = response.json()
        except (httpx.ResponseNotRead, ValueError):
            body = None
        return _from_body(response.status_code, body, response.headers)
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        headers = getattr(getattr(error, "response", None), "headers", None)
        return _from_body(status, getattr(error, "body", None), headers)
    return None


def _from_body(status: int, body: Any, headers: Mapping[str, str] | None) -> _Seen:
    # an SDK's `body` may be the error object itself (OpenAI's) or the whole payload
    error = body.get("error", body) if isinstance(body, Mapping) else None
    seen = wire.failed_answer(error, headers)
    names = () if seen.gateway or error is None else error_names({"error": error})
    return _Seen(status, seen.code, seen.gateway, seen.retry_after_s, seen.context_fallback, names)


def _any_in(names: tuple[str, ...], table: frozenset[str]) -> bool:
    return any(name in table for name in names)


def _is_connection_failure(error: BaseException) -> bool:
    if isinstance(error, httpx.TransportError | TimeoutError | ConnectionError):
        return True
    return any(cls.__name__ in _CONNECTION_CLASS_NAMES for cls in type(error).__mro__)


def _stream_error_body(error: BaseException) -> Mapping[str, Any] | None:
    """The error payload an SDK raised from inside a stream (OpenAI's `APIError(body=...)`)."""
    body = getattr(error, "body", None)
    return body if isinstance(body, Mapping) and body else None

"""A proxied request from arrival to the moment the upstream's headers are in hand.

Order of checks (each refusal is recorded as evidence with its code):
key -> account -> endpoint -> in-flight bound -> caller headers -> body -> model -> budget
-> health -> quota -> request slot -> upstream. When tracing is on, the steps are spans
(proxy/tracing.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from starlette.types import ASGIApp

from leasegate.accounts import Account
from leasegate.core.clock import new_id
from leasegate.core.errors import GatewayError
from leasegate.core.observation import Observation
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.health import Cooldown
from leasegate.core.records import KeyRecord
from leasegate.keys import parse_key
from leasegate.providers import KEY_HEADER_NAMES, Endpoint, presented_key
from leasegate.proxy.attempt import Attempt
from leasegate.proxy.body import (
    ProxyBody,
    check_content_type,
    encode_body,
    model_problem,
    parse_body,
    parse_object,
)
from leasegate.proxy.keys import KeyRefused
from leasegate.proxy.relay import BufferedRelay, StreamRelay, refusal_response
from leasegate.proxy.runtime import ProxyRuntime
from leasegate.proxy.tracing import caller_trace_headers, in_step, with_headers
from leasegate.routing.health import block_code
from leasegate.routing.quota import Estimate, estimate, output_cap
from leasegate.upstream.caller_headers import check_header_cap
from leasegate.upstream.errors import UpstreamError
from leasegate.upstream.failures import send_failure
from leasegate.web.body_limit import BodyReadTimeout, BodyTooLarge


class BodyRefused(GatewayError):
    """The body could not be read whole (too large, too slow): the rest of it may still be on
    the wire, so the refusal closes the connection (`Connection: close`)."""


class ClientGone(Exception):
    """The caller disconnected before its request body was in (its row is already queued)."""


Body = Callable[[], Awaitable[bytes]]
"""Reads the whole request body once; raises ClientGone if the caller goes away."""


async def forward(
    runtime: ProxyRuntime,
    endpoint: Endpoint,
    headers: list[tuple[bytes, bytes]],
    body: Body,
    path_model: str | None = None,
    *,
    shed: bool = False,
) -> ASGIApp:
    """The ASGI app that answers this request: a relay of the upstream's answer, or a
    refusal. `headers`: the ASGI scope's (lower-case names); `path_model`: the model the
    path names, for an endpoint with the model in its path; `shed`: the process is at its
    in-flight bound, so once the key is known the request is refused at once (503
    `gateway-overloaded`), its body unread and the upstream not called."""
    clock = runtime.clock
    attempt = Attempt(new_id("req"), endpoint.path, clock.now(), clock.monotonic())
    attempt.feeds_health = endpoint.completion
    token = presented_key(headers)
    content_type = _content_type(headers)
    if token is None:
        error = GatewayError("key-invalid", _NO_KEY)
        return refusal_response(error, attempt.request_id)
    if runtime.tracer is not None:
        attempt.trace = runtime.tracer.begin(attempt.request_id, endpoint.path)
    trace = attempt.trace
    try:
        admit = _admit_key(runtime, endpoint, attempt, token, shed)
        key, account = await in_step(trace, "proxy.admit", admit)
        pairs = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in headers]
        allowed = account.kind.forwarded_headers
        check_header_cap(pairs, allowed, runtime.settings.max_forwarded_header_bytes)
        payload, cost = await _rewrite_body(
            runtime, content_type, body, attempt, key, account, endpoint, path_model, pairs
        )
        await runtime.spend.check(key, attempt.started_at)
        await in_step(trace, "proxy.health", _check_health(runtime, attempt, key))
        _check_quota(runtime, attempt, key, cost)
        if (capacity := account.request_capacity) is not None:  # else nothing is counted
            await in_step(trace, "proxy.slot", _take_slot(runtime, attempt, account.id, capacity))
    except ClientGone:
        # The caller hung up while its body was being read: one row, nobody to answer.
        await runtime.finish(attempt, Observation("client-abort"))
        raise
    except GatewayError as refusal:
        await runtime.finish(attempt, Observation("refused", refusal_code=refusal.code))
        closing = isinstance(refusal, BodyRefused)
        return refusal_response(refusal, attempt.request_id, attempt.key, close=closing)
    except StoreError as exc:
        unavailable = GatewayError(
            "unavailable",
            f"a backing store is unavailable ({exc.reason})",
            retry_after_s=1.0,
        )
        await runtime.finish(attempt, Observation("refused", refusal_code=unavailable.code))
        return refusal_response(unavailable, attempt.request_id, attempt.key)
    upstream_request = runtime.clients.build_request(
        account, endpoint, payload, pairs, served_model=key.served_model, stream=attempt.stream
    )
    if account.propagate_trace and trace is None:
        upstream_request = with_headers(upstream_request, caller_trace_headers(pairs))
    try:
        if trace is None:
            upstream = await runtime.clients.send(upstream_request)
        else:
            propagate = account.propagate_trace
            upstream = await trace.send(runtime.clients, upstream_request, propagate=propagate)
    except UpstreamError as exc:
        failure = send_failure(exc, account.id)
        await runtime.finish(attempt, failure.observation)
        return refusal_response(failure.error, attempt.request_id, key)
    except BaseException:
        # Cancelled while waiting for headers (client gone, or shutdown): still one row,
        # and the slot goes back.
        await runtime.finish(attempt, Observation("client-abort"))
        raise
    attempt.upstream_status = upstream.status
    attempt.first_byte_mono = clock.monotonic()
    _read_quota(runtime, attempt, endpoint, account, upstream.headers)
    is_sse = upstream.headers.get("content-type", "").startswith("text/event-stream")
    deadlines = runtime.clients.deadlines(account.id)
    if attempt.stream and is_sse and upstream.is_success:
        return StreamRelay(runtime, attempt, endpoint, upstream, deadlines)
    return BufferedRelay(runtime, attempt, endpoint, upstream, deadlines)


def _read_quota(
    runtime: ProxyRuntime,
    attempt: Attempt,
    endpoint: Endpoint,
    account: Account,
    headers: Mapping[str, str],
) -> None:
    """The rate-limit buckets the answer's headers state, for the quota view. Token counting
    has limits of its own: never read as the pair's quota."""
    if endpoint.completion:
        now = runtime.clock.now().timestamp()
        attempt.quota_buckets = account.kind.quota_buckets(headers, now)


async def _admit_key(
    runtime: ProxyRuntime, endpoint: Endpoint, attempt: Attempt, token: str, shed: bool
) -> tuple[KeyRecord, Account]:
    parsed = parse_key(token)
    if parsed is None:
        raise GatewayError("key-invalid", "the key is not valid")
    attempt.key_id = parsed.key_id
    try:
        key = await runtime.resolver.resolve(parsed)
    except KeyRefused as refused:
        attempt.key = refused.record
        raise
    attempt.key = key
    account = runtime.registry.account(key.account_id)
    if account is None or not account.configured:
        raise GatewayError("account-disabled", "the key's account is not available")
    attempt.errors = account.kind.errors
    attempt.relayed_headers = account.kind.relayed_headers
    if not account.kind.serves(endpoint):
        raise GatewayError(
            "endpoint-not-served", f"{endpoint.path} is not served by the key's account"
        )
    if shed:
        raise GatewayError(
            "gateway-overloaded",
            "the gateway is at its bound of requests in flight; retry shortly",
            retry_after_s=1.0,
        )
    return key, account


_NO_KEY = f"no key: send it as one of {KEY_HEADER_NAMES}"


def _content_type(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name == b"content-type":
            return value.decode("latin-1")
    return None


async def _rewrite_body(
    runtime: ProxyRuntime,
    content_type: str | None,
    read: Body,
    attempt: Attempt,
    key: KeyRecord,
    account: Account,
    endpoint: Endpoint,
    path_model: str | None,
    pairs: list[tuple[str, str]],
) -> tuple[bytes, Estimate | None]:
    """The body to send upstream, and its quota estimate when the pair's quota is known (else
    None: nothing to check). The body has `model` set to the served name (always re-encoded:
    the upstream reads exactly what was checked, duplicate keys included) and, on a stream
    whose wire reports usage only when asked, the ask (`Wire.ask_usage`). For an endpoint with
    the model in its path, the path's model is checked and the body left as it is (the kind
    puts the served name in the upstream path). A cloud kind moves `model` into the path
    (`ProviderKind.rewrite_fields`). On a provider SDK's own path (Azure's deployments) the
    path's model is the requested one, whatever the body says."""
    check_content_type(content_type)
    try:
        raw = await read()
    except BodyTooLarge as too_large:
        raise BodyRefused("invalid-request", too_large.detail, status=413) from None
    except BodyReadTimeout as timed_out:
        raise BodyRefused("request-timeout", timed_out.detail) from None
    attempt.body_bytes = len(raw)
    if path_model is None:
        body = parse_body(raw)
    elif endpoint.model_in_path:
        body = ProxyBody(parse_object(raw), path_model, endpoint.always_streams)
    else:  # a provider SDK's own path names the model (Azure's deployment): it wins
        body = parse_body(raw, model=path_model)
    attempt.requested_model = body.model  # the row keeps a safe copy (Attempt.evidence)
    attempt.stream = body.stream
    if (refusal := model_problem(body.model)) is not None:
        raise refusal
    if body.model not in (key.model, key.served_model) and (
        runtime.registry.context_fallback(body.model) != key.model
    ):
        # a key minted for a model's context_fallback also takes the original model's name,
        # so a worker that keeps sending it reaches the larger window unchanged
        raise GatewayError("model-not-permitted", "this key may not call that model")
    cost = None
    if endpoint.completion and runtime.quota.watches(key.account_id, key.served_model):
        default = runtime.quota.output_estimate(key.account_id, key.served_model)
        cost = estimate(len(raw), output_cap(body.fields), default)
    if not endpoint.model_in_path:
        account.kind.rewrite_fields(body.fields, key.served_model, pairs)
        if body.stream and endpoint.streams:
            # the stream's usage is what its cost and budgets are counted from
            attempt.strip_usage = account.kind.ask_usage(endpoint, body.fields, account.options)
    return encode_body(body.fields), cost


def _check_quota(
    runtime: ProxyRuntime, attempt: Attempt, key: KeyRecord, cost: Estimate | None
) -> None:
    """Refuse at once what the provider has said it will refuse now; never wait for room.
    `cost` None: nothing is known of the pair's quota."""
    if cost is None:
        return
    now = runtime.clock.now().timestamp()
    when = runtime.quota.admit(key.account_id, key.served_model, cost, now, attempt.request_id)
    if when is not None:
        raise GatewayError(
            "account-quota-exhausted",
            f"account {key.account_id} has no {key.served_model} quota left for this request "
            "until its provider's limit refills",
            retry_after_s=max(0.0, when - now),
        )
    attempt.quota_cost = cost


async def _check_health(runtime: ProxyRuntime, attempt: Attempt, key: KeyRecord) -> None:
    """The store admits or refuses atomically; a half-open pair or circuit lets exactly one
    request through (the trial), which says so when it records its outcome."""
    now = runtime.clock.now().timestamp()
    admission = await runtime.health.admit(key.account_id, key.served_model, now)
    if isinstance(admission, Cooldown):
        model = admission.model
        subject = key.account_id if model is None else f"{key.account_id}/{model}"
        raise GatewayError(
            block_code(admission),
            f"{subject} is resting after failures ({admission.reason})",
            retry_after_s=max(0.0, admission.until - now),
        )
    if admission.trial:
        attempt.health_trial = admission


async def _take_slot(
    runtime: ProxyRuntime, attempt: Attempt, account_id: str, capacity: int
) -> None:
    try:
        admitted = await runtime.slots.acquire(account_id, attempt.request_id, capacity)
    except StoreError:
        raise GatewayError(
            "unavailable", "the request-slot store is unreachable", retry_after_s=1.0
        ) from None
    if not admitted:
        raise GatewayError(
            "account-request-capacity-exhausted",
            f"account {account_id} is at its request ceiling; the gateway does not queue",
            retry_after_s=1.0,
        )
    attempt.slot_account = account_id

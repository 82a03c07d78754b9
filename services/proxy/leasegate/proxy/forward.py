"""A proxied request from arrival to the moment the upstream's headers are in hand: its
admission (an `Admission`, proxy/request.py, admitted or refused), the send, and the relay
that will end it (proxy/relay.py).

Order of checks (each refusal is recorded as evidence with its code):
key -> account -> endpoint -> in-flight bound -> caller headers -> body -> model -> budget
-> health -> quota -> request slot -> upstream. When tracing is on, the steps are spans
(proxy/tracing.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import NamedTuple

from starlette.types import ASGIApp

from leasegate.accounts import Account
from leasegate.core.clock import new_id
from leasegate.core.errors import GatewayError
from leasegate.core.observation import Observation
from leasegate.core.ports.errors import StoreError
from leasegate.core.ports.health import Admitted, Cooldown
from leasegate.core.ports.quota import Bucket, QuotaDimension
from leasegate.core.records import KeyRecord
from leasegate.keys import parse_key
from leasegate.providers import KEY_HEADER_NAMES, Endpoint, presented_key
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
from leasegate.proxy.request import NO_BUCKETS, Admission, Ended
from leasegate.proxy.runtime import ProxyRuntime
from leasegate.proxy.tracing import caller_trace_headers, in_step, with_headers
from leasegate.routing.health import block_code
from leasegate.routing.quota import Estimate, estimate, output_cap
from leasegate.upstream.caller_headers import check_header_cap
from leasegate.upstream.clients import UpstreamRequest
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


class Sending(NamedTuple):
    """An admitted request, ready to go upstream."""

    key: KeyRecord
    account: Account
    request: UpstreamRequest
    caller_headers: list[tuple[str, str]]


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
    request_id = new_id("req")
    token = presented_key(headers)
    if token is None:
        return refusal_response(GatewayError("key-invalid", _NO_KEY), request_id)
    admission, admitted = await admit(
        runtime, endpoint, request_id, token, headers, body, path_model, shed
    )
    if not isinstance(admitted, Sending):
        return await _refused(runtime, admission, admitted)
    return await _send(runtime, admission, admitted)


async def admit(
    runtime: ProxyRuntime,
    endpoint: Endpoint,
    request_id: str,
    token: str,
    headers: list[tuple[bytes, bytes]],
    read: Body,
    path_model: str | None,
    shed: bool,
) -> tuple[Admission, Sending | GatewayError | StoreError | ClientGone]:
    """Every check, in order, up to the request to send (or the refusal that stopped it),
    and the request's `Admission`: built once, from what each step found."""
    clock = runtime.clock
    started_at, started_mono = clock.now(), clock.monotonic()
    trace = None if runtime.tracer is None else runtime.tracer.begin(request_id, endpoint.path)
    key_id: str | None = None
    key: KeyRecord | None = None
    account: Account | None = None
    body: ProxyBody | None = None
    body_bytes = 0
    strip_usage = False
    trial: Admitted | None = None
    cost: Estimate | None = None
    slot: str | None = None
    admitted: Sending | GatewayError | StoreError | ClientGone
    try:
        parsed = parse_key(token)
        if parsed is None:
            raise GatewayError("key-invalid", "the key is not valid")
        key_id = parsed.key_id
        try:
            key = await in_step(trace, "proxy.admit", runtime.resolver.resolve(parsed))
        except KeyRefused as refused:
            key = refused.record
            raise
        account = _configured_account(runtime, key)
        _check_served(account, endpoint, shed)
        pairs = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in headers]
        allowed = account.kind.forwarded_headers
        check_header_cap(pairs, allowed, runtime.settings.max_forwarded_header_bytes)
        check_content_type(_content_type(headers))
        raw = await _read(read)
        body_bytes = len(raw)
        body = _parse(raw, endpoint, path_model)
        _check_model(runtime, body.model, key)
        estimated = _estimate(runtime, endpoint, key, body, len(raw))
        payload, strip_usage = _rewrite(endpoint, account, key, body, pairs)
        await runtime.spend.check(key, started_at)
        trial = await in_step(trace, "proxy.health", _check_health(runtime, key))
        cost = _check_quota(runtime, request_id, key, estimated)
        if (capacity := account.request_capacity) is not None:  # else nothing is counted
            take = _take_slot(runtime, request_id, account.id, capacity)
            slot = await in_step(trace, "proxy.slot", take)
        request = runtime.clients.build_request(
            account, endpoint, payload, pairs, served_model=key.served_model, stream=body.stream
        )
        admitted = Sending(key, account, request, pairs)
    except (GatewayError, StoreError, ClientGone) as refusal:
        admitted = refusal
    admission = Admission(
        request_id,
        endpoint,
        started_at,
        started_mono,
        trace,
        key_id,
        key,
        account,
        None if body is None else body.model,  # the row keeps a safe copy (evidence_row)
        False if body is None else body.stream,
        body_bytes,
        strip_usage,
        trial,
        cost,
        slot,
    )
    return admission, admitted


async def _refused(
    runtime: ProxyRuntime, admission: Admission, refusal: GatewayError | StoreError | ClientGone
) -> ASGIApp:
    if isinstance(refusal, ClientGone):
        # The caller hung up while its body was being read: one row, nobody to answer.
        await runtime.finish(admission, Ended(Observation("client-abort")))
        raise refusal
    if isinstance(refusal, StoreError):
        refusal = GatewayError(
            "unavailable",
            f"a backing store is unavailable ({refusal.reason})",
            retry_after_s=1.0,
        )
    refused = Observation("refused", refusal_code=refusal.code, retry_after_s=refusal.retry_after_s)
    await runtime.finish(admission, Ended(refused))
    closing = isinstance(refusal, BodyRefused)
    return refusal_response(refusal, admission.request_id, admission.key, close=closing)


async def _send(runtime: ProxyRuntime, admission: Admission, sending: Sending) -> ASGIApp:
    """Send upstream; the relay of its answer once its headers are in (or the refusal)."""
    key, account, request, pairs = sending
    trace = admission.trace
    if account.propagate_trace and trace is None:
        request = with_headers(request, caller_trace_headers(pairs))
    try:
        if trace is None:
            upstream = await runtime.clients.send(request)
        else:
            propagate = account.propagate_trace
            upstream = await trace.send(runtime.clients, request, propagate=propagate)
    except UpstreamError as exc:
        failure = send_failure(exc, account.id)
        await runtime.finish(admission, Ended(failure.observation))
        return refusal_response(failure.error, admission.request_id, key)
    except BaseException:
        # Cancelled while waiting for headers (client gone, or shutdown): still one row,
        # and the slot goes back.
        await runtime.finish(admission, Ended(Observation("client-abort")))
        raise
    first_byte_mono = runtime.clock.monotonic()
    buckets = _quota_buckets(runtime, admission.endpoint, account, upstream.headers)
    if admission.quota_cost is not None and runtime.quota.probing(account.id, key.served_model):
        now, ref = runtime.clock.now().timestamp(), admission.request_id
        runtime.quota.replied(account.id, key.served_model, buckets, upstream.status, now, ref)
    is_sse = upstream.headers.get("content-type", "").startswith("text/event-stream")
    deadlines = runtime.clients.deadlines(account.id)
    relay = StreamRelay if admission.stream and is_sse and upstream.is_success else BufferedRelay
    return relay(runtime, admission, upstream, deadlines, first_byte_mono, buckets)


def _quota_buckets(
    runtime: ProxyRuntime, endpoint: Endpoint, account: Account, headers: Mapping[str, str]
) -> Mapping[QuotaDimension, Bucket]:
    """The rate-limit buckets the answer's headers state, for the quota view. Token counting
    has limits of its own: never read as the pair's quota."""
    if not endpoint.completion:
        return NO_BUCKETS
    return account.kind.quota_buckets(headers, runtime.clock.now().timestamp())


def _configured_account(runtime: ProxyRuntime, key: KeyRecord) -> Account:
    account = runtime.registry.account(key.account_id)
    if account is None or not account.configured:
        raise GatewayError("account-disabled", "the key's account is not available")
    return account


def _check_served(account: Account, endpoint: Endpoint, shed: bool) -> None:
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


_NO_KEY = f"no key: send it as one of {KEY_HEADER_NAMES}"


def _content_type(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name == b"content-type":
            return value.decode("latin-1")
    return None


async def _read(read: Body) -> bytes:
    try:
        return await read()
    except BodyTooLarge as too_large:
        raise BodyRefused("invalid-request", too_large.detail, status=413) from None
    except BodyReadTimeout as timed_out:
        raise BodyRefused("request-timeout", timed_out.detail) from None


def _parse(raw: bytes, endpoint: Endpoint, path_model: str | None) -> ProxyBody:
    """For an endpoint with the model in its path, the path's model is checked and the body
    left as it is (the kind puts the served name in the upstream path). On a provider SDK's
    own path (Azure's deployments) the path's model is the requested one, whatever the body
    says."""
    if path_model is None:
        return parse_body(raw)
    if endpoint.model_in_path:
        return ProxyBody(parse_object(raw), path_model, endpoint.always_streams)
    return parse_body(raw, model=path_model)  # a provider SDK's own path names the model


def _check_model(runtime: ProxyRuntime, model: str, key: KeyRecord) -> None:
    if (refusal := model_problem(model)) is not None:
        raise refusal
    if model not in (key.model, key.served_model) and (
        runtime.registry.context_fallback(model) != key.model
    ):
        # a key minted for a model's context_fallback also takes the original model's name,
        # so a worker that keeps sending it reaches the larger window unchanged
        raise GatewayError("model-not-permitted", "this key may not call that model")


def _estimate(
    runtime: ProxyRuntime, endpoint: Endpoint, key: KeyRecord, body: ProxyBody, size: int
) -> Estimate | None:
    """The request's quota estimate when the pair's quota is known (else None: nothing to
    check)."""
    if not endpoint.completion or not runtime.quota.watches(key.account_id, key.served_model):
        return None
    default = runtime.quota.output_estimate(key.account_id, key.served_model)
    return estimate(size, output_cap(body.fields), default)


def _rewrite(
    endpoint: Endpoint,
    account: Account,
    key: KeyRecord,
    body: ProxyBody,
    pairs: list[tuple[str, str]],
) -> tuple[bytes, bool]:
    """The body to send upstream, and whether it asks for the stream's usage the caller did
    not ask for. The body has `model` set to the served name (always re-encoded: the upstream
    reads exactly what was checked, duplicate keys included) and, on a stream whose wire
    reports usage only when asked, the ask (`Wire.ask_usage`). A cloud kind moves `model`
    into the path (`ProviderKind.rewrite_fields`). Where the model is in the path the body
    is left as it is."""
    strip_usage = False
    if not endpoint.model_in_path:
        account.kind.rewrite_fields(body.fields, key.served_model, pairs)
        if body.stream and endpoint.streams:
            # the stream's usage is what its cost and budgets are counted from
            strip_usage = account.kind.ask_usage(endpoint, body.fields, account.options)
    return encode_body(body.fields), strip_usage


def _check_quota(
    runtime: ProxyRuntime, request_id: str, key: KeyRecord, cost: Estimate | None
) -> Estimate | None:
    """Refuse at once what the provider has said it will refuse now; never wait for room.
    `cost` None: nothing is known of the pair's quota, and it is not probed. Returns what the
    view let the request through at."""
    if cost is None:
        return None
    now = runtime.clock.now().timestamp()
    when = runtime.quota.admit(key.account_id, key.served_model, cost, now, request_id)
    if when is None:
        return cost
    account, model = key.account_id, key.served_model
    if runtime.quota.probing(account, model):
        why = "is not known yet: its provider's first answer, still awaited, states it"
    else:
        why = "has no room for this request until its provider's limit refills"
    raise GatewayError(
        "account-quota-exhausted",
        f"account {account}'s {model} quota {why}",
        retry_after_s=max(0.0, when - now),
    )


async def _check_health(runtime: ProxyRuntime, key: KeyRecord) -> Admitted | None:
    """The store admits or refuses atomically; a half-open pair or circuit lets exactly one
    request through (the trial, returned), which says so when it records its outcome."""
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
    return admission if admission.trial else None


async def _take_slot(runtime: ProxyRuntime, request_id: str, account_id: str, capacity: int) -> str:
    """Returns the account whose slot the request now holds."""
    try:
        admitted = await runtime.slots.acquire(account_id, request_id, capacity)
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
    return account_id

"""The provider seam: what a provider kind is, as one small typed interface.

A *kind* (`ProviderKind`) is what an account's `provider:` names. It says which endpoints its
accounts serve, how its credential is sent, which account fields it adds, how the upstream
path is built from the served model (and which of its endpoints an upstream path is), and how
its error identifiers are classified.

A *wire* (`Wire`) is the shape of bodies and events on a family of endpoints, shared by the
kinds that speak it (the OpenAI chat shape is spoken by four kinds): where usage is in a body
and in a stream's events, what ends a stream, how an error payload names itself, and how an
error event the gateway appends is rendered.

Both are abstract base classes in the manner of httpx's transport base: a few class
attributes and abstract methods; a kind that leaves a part out cannot be instantiated. Every
object here is pure (no I/O) and built once per process; the proxy resolves an account's kind
at start-up, so none of this costs a look-up per request beyond one attribute read.

What the demo upstream answers for each kind is the demo's (leasegate.demo.examples), not
the seam's.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from leasegate.core.ports.quota import Bucket, QuotaDimension


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the provider reported them; None where it reported nothing."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    estimated: bool = False
    """The provider reported nothing: the gateway's estimate (leasegate.providers.estimate)."""

    @property
    def reported(self) -> bool:
        """Whether any input or output count is known."""
        return self.input_tokens is not None or self.output_tokens is not None


@dataclass(frozen=True, slots=True)
class StreamError:
    """The first error event of a stream: identifiers only, never the message."""

    type: str | None
    code: str | None


class StreamFacts(Protocol):
    """What a wire's event reader writes to while a stream goes by (the scanner)."""

    usage: Usage
    completed: bool

    def record_error(self, type_: str | None, code: str | None) -> None: ...


@dataclass(frozen=True, slots=True)
class ErrorVocabulary:
    """Which error identifiers (an error's code or type, lower-cased) mean what.

    `account`: a credential, billing or quota fault, whatever the status (account scope);
    `model_not_found`: a 404 naming a missing model (model scope, qualifying);
    `overloaded`: used as the reason of a 408/429/5xx instead of `http-<status>`;
    `rate_limited`: a 429 naming one of these is a rate limit, not a fault (a 429 whose
    provider JSON echoes the numeric code 429, or whose headers say when to retry, is too).
    """

    account: frozenset[str]
    model_not_found: frozenset[str]
    overloaded: frozenset[str] = frozenset()
    rate_limited: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class KeyHeader:
    """A request header in which a caller's SDK presents its key to the gateway (the SDK of
    the wire the kind's callers speak: OpenAI's `Authorization: Bearer`, Anthropic's
    `x-api-key`, Google's `x-goog-api-key`)."""

    name: str
    """Lower-case header name."""
    scheme: str | None = None
    """Lower-case auth scheme the value starts with (`bearer`); None: the value is the key."""


class OptionError(ValueError):
    """An account field of a kind is wrong: names the field; the message is the why."""

    def __init__(self, field_name: str, why: str) -> None:
        super().__init__(why)
        self.field_name = field_name


class Wire(ABC):
    """The shape of bodies and events on one family of endpoints."""

    name: ClassVar[str]
    gate: ClassVar[re.Pattern[bytes]]
    """One C-speed search per stream event decides whether it is parsed at all: a key that
    can carry usage, an error or the end of the answer."""
    preamble_events: ClassVar[frozenset[bytes]] = frozenset()
    """Event names a stream opens with before the model has produced anything."""
    done_completes: ClassVar[bool]
    """Whether `data: [DONE]` ends the answer normally (the stream's end marker: stated by
    every wire; a wire whose streams end otherwise reads its own end in `read_event`)."""

    def ask_usage(self, body: dict[str, Any]) -> bool:
        """Make a streaming request's answer report its usage, when the caller did not ask
        for it (one edit of the body the proxy re-encodes anyway). True when this was done:
        the events that carry only the usage are then the gateway's, not the caller's
        (`usage_only`). Wires whose streams always report usage leave the body alone."""
        return False

    def usage_only(self, obj: Mapping[str, object]) -> bool:
        """Whether a parsed stream event carries the usage and nothing for the caller: the
        event `ask_usage` brought about, stripped from what that caller receives."""
        return False

    counts_text: ClassVar[bool] = False
    """Whether the stream scanner asks `text_chars` of every event it parses: a wire whose
    streams report usage before the answer (Anthropic's `message_start`, Gemini's every
    chunk) has nothing to estimate and pays nothing for it."""

    def text_chars(self, obj: Mapping[str, object]) -> int:
        """Characters of generated text (content, tool-call arguments, reasoning) in one
        parsed stream event: what a usage estimate counts when a stream never reports its
        usage (leasegate.providers.estimate)."""
        return 0

    @abstractmethod
    def usage(self, body: Mapping[str, object]) -> Usage:
        """Usage of a parsed non-streaming answer (empty where it says nothing usable)."""

    @abstractmethod
    def read_event(self, facts: StreamFacts, event: bytes, obj: dict[str, object]) -> None:
        """Record what one parsed stream event says (usage, an error, the end)."""

    @abstractmethod
    def error_fields(self, obj: Mapping[str, object]) -> tuple[str | None, str | None]:
        """(type, code) of an error payload or error event: identifiers only."""

    @abstractmethod
    def context_length(self, obj: Mapping[str, object]) -> bool:
        """Whether an error payload says the request exceeded the model's context window."""

    @abstractmethod
    def error_event(self, code: str, message: str, error_type: str = "api_error") -> bytes:
        """An SSE error event in this wire's own shape, so the caller's SDK raises on it.
        `message` goes to the caller: it must never carry a credential or upstream text."""


MODEL_SLOT = "{model}"


@dataclass(frozen=True, slots=True, eq=False)
class Endpoint:
    """A caller-facing endpoint. Compared by identity: each is defined once, by its wire's
    module, and listed by every kind that serves it.

    `path` is exact, or a template with `{model}` where the model is in the path (Gemini's
    `/v1beta/models/{model}:generateContent`); otherwise the model is the body's `model`.
    """

    path: str
    wire: Wire
    streams: bool = True
    """The answer may be a stream (the body's `stream: true`, or `always_streams`)."""
    completion: bool = True
    """False for a call that produces no completion (token counting): its outcome is
    recorded as evidence but never fed to the health store."""
    always_streams: bool = False
    """The path itself asks for a stream (no `stream` field in the body)."""
    prefix: str = field(init=False)
    suffix: str = field(init=False)

    def __post_init__(self) -> None:
        prefix, slot, suffix = self.path.partition(MODEL_SLOT)
        object.__setattr__(self, "prefix", prefix if slot else self.path)
        object.__setattr__(self, "suffix", suffix)

    @property
    def model_in_path(self) -> bool:
        return self.prefix != self.path

    def model_of(self, path: str) -> str | None:
        """The model named by `path` for a template endpoint; None when `path` is not one of
        its paths (or names no model)."""
        if not (path.startswith(self.prefix) and path.endswith(self.suffix)):
            return None
        model = path[len(self.prefix) : len(path) - len(self.suffix)]
        return model if model and "/" not in model else None

    def with_model(self, model: str) -> str:
        return self.prefix + model + self.suffix if self.model_in_path else self.path


@dataclass(frozen=True, slots=True)
class UpstreamRoute:
    """An upstream path recognised by a kind (`ProviderKind.upstream_route`)."""

    endpoint: Endpoint
    model: str | None
    """The model the path names, when it names one (a deployment, Gemini's model)."""


class ProviderKind(ABC):
    """One kind of provider account: everything the gateway knows about it."""

    name: ClassVar[str]
    endpoints: ClassVar[tuple[Endpoint, ...]]
    """The caller-facing endpoints its accounts serve (others: `endpoint-not-served`)."""
    errors: ClassVar[ErrorVocabulary]
    caller_key_headers: ClassVar[tuple[KeyHeader, ...]]
    """Where its callers' SDKs present their Leasegate key, most preferred first; every
    kind states its own (the proxy accepts the union: leasegate.providers.kinds)."""
    input_includes_cache: ClassVar[bool]
    """Its input token count already contains the cached tokens (OpenAI, Gemini), or counts
    them beside it (Anthropic): how a price is applied (leasegate.spend)."""
    option_fields: ClassVar[frozenset[str]] = frozenset()
    """Account fields of this kind beyond the common ones (e.g. Azure's `api_version`)."""
    cloud_auth: ClassVar[str | None] = None
    """The scheme that signs its requests from the cloud's own credential chain (`aws-sigv4`,
    `google-adc`; leasegate.upstream.cloud_auth): then `credential_env` is optional, and a
    static key when named."""
    relayed_headers: ClassVar[tuple[str, ...]]
    """The upstream answer's headers its callers receive (lower-case names), stated by every
    kind: `content-type`, the rate-limit waits, and its provider's own request id. The
    proxy's own `x-leasegate-*` headers are added to these (leasegate.proxy.relay)."""
    forwarded_headers: ClassVar[frozenset[str]]
    """The caller headers passed to its upstream (lower-case names), stated by every kind;
    every other caller header is dropped (leasegate.upstream.caller_headers)."""
    stream_content_type: ClassVar[str] = "text/event-stream"
    """The content type of its streamed answers; other than SSE, `stream_decoder` turns
    them into the caller's wire's SSE events."""

    @abstractmethod
    def credential_headers(self, secret: str) -> tuple[tuple[str, str], ...]:
        """The headers that carry the account's credential (the only place it goes)."""

    @abstractmethod
    def default_headers(self) -> tuple[tuple[str, str], ...]:
        """Headers sent when the caller sent none by that name (e.g. `anthropic-version`)."""

    @abstractmethod
    def options(self, entry: Mapping[object, object]) -> Mapping[str, str]:
        """This kind's own fields of an accounts-file entry, checked (raises `OptionError`)."""

    def region(self, options: Mapping[str, str]) -> str | None:
        """The cloud region an account of this kind serves from (data residency), from its
        options; None for a kind with no region (the direct APIs)."""
        return None

    @abstractmethod
    def served_problem(self, served_model: str) -> str | None:
        """Why `served_model` cannot be sent to this kind (it goes into a path), or None."""

    @abstractmethod
    def upstream_path(
        self, endpoint: Endpoint, served_model: str, options: Mapping[str, str]
    ) -> str:
        """The path (and query) appended to the account's base URL for `endpoint`."""

    @abstractmethod
    def upstream_route(self, path: str) -> UpstreamRoute | None:
        """Which of its endpoints an upstream path is (the inverse of `upstream_path`)."""

    def quota_buckets(
        self, headers: Mapping[str, str], now: float
    ) -> Mapping[QuotaDimension, Bucket]:
        """The rate-limit buckets an answer's headers state (leasegate.providers.ratelimits);
        empty for a kind that sends none. `headers`: case-insensitive or lower-case keys."""
        return {}

    @property
    def states_quota(self) -> bool:
        """Whether this kind's answers may state its quota (it reads rate-limit headers)."""
        return type(self).quota_buckets is not ProviderKind.quota_buckets

    caller_prefix: ClassVar[str | None] = None
    """A path prefix of the kind's own SDK that the proxy serves too (Azure's
    `/openai/deployments/`); `caller_route` reads the endpoint and the model from it."""

    def caller_route(self, path: str) -> UpstreamRoute | None:
        """Which endpoint a caller's path under `caller_prefix` is, and the model it names."""
        return None

    def path_hint(self, path: str) -> str | None:
        """For a path this kind's SDK may send but the proxy does not serve (another API
        version), what to use instead; None for a path that is none of its own."""
        return None

    def ask_usage(
        self, endpoint: Endpoint, body: dict[str, Any], options: Mapping[str, str]
    ) -> bool:
        """Make a streaming request on `endpoint` report its usage, when the caller did not
        ask (`Wire.ask_usage`); True when the body was changed. A kind whose upstream refuses
        the ask (an old API version) overrides this and leaves the body alone."""
        return endpoint.wire.ask_usage(body)

    def __init__(self) -> None:
        self._served = frozenset(self.endpoints)

    def rewrite_fields(
        self,
        fields: MutableMapping[str, Any],
        served_model: str,
        caller_headers: Sequence[tuple[str, str]],
    ) -> None:
        """Set the body's fields for the upstream (a model-in-body endpoint): the served name
        as `model`, unless the kind says otherwise (a cloud moves it into the path)."""
        fields["model"] = served_model

    def upstream_target(
        self, endpoint: Endpoint, served_model: str, options: Mapping[str, str], stream: bool
    ) -> str:
        """`upstream_path`, for a kind whose path also depends on whether it streams."""
        return self.upstream_path(endpoint, served_model, options)

    def error_body(self, status: int, headers: Mapping[str, str], body: bytes) -> bytes | None:
        """An upstream error payload in the caller's wire's shape, when the kind's own is
        another (`headers`: lower-case names); None to relay it unchanged."""
        return None

    def stream_decoder(self) -> StreamDecoder | None:
        """A fresh decoder of its non-SSE streams into SSE bytes (None: its streams are SSE)."""
        return None

    def serves(self, endpoint: Endpoint) -> bool:
        """Whether its accounts serve `endpoint` (one set look-up, by identity)."""
        return endpoint in self._served


class StreamDecoder(Protocol):
    """A cloud's stream framing in, the caller's wire's SSE events out, incrementally."""

    def feed(self, data: bytes) -> bytes: ...


def count(value: object) -> int | None:
    """A token count, if `value` is one (a non-negative int, not a bool)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


_IDENTIFIER = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")


def identifier(value: object) -> str | None:
    """A provider's error type or code, if it looks like one (numeric codes become strings).

    Anything else (free text, nested objects) is dropped: it could carry prompt text.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and _IDENTIFIER.fullmatch(value):
        return value
    return None


def exact_route(endpoints: tuple[Endpoint, ...], path: str) -> UpstreamRoute | None:
    """The endpoint whose exact path is `path` (kinds whose upstream paths are their own)."""
    for endpoint in endpoints:
        if endpoint.path == path:
            return UpstreamRoute(endpoint, None)
    return None

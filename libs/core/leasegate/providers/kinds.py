"""Every provider kind, by the name an account's `provider:` gives it.

Adding a kind is one module beside this one (a `ProviderKind` and, for a new shape, its
`Wire`) and its line here; `tests/unit/providers/` holds its behaviour table, and
`test_completeness.py` checks every kind listed here against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from leasegate.providers.anthropic import Anthropic
from leasegate.providers.azure_openai import AzureOpenAI
from leasegate.providers.base import (
    Endpoint,
    ErrorVocabulary,
    KeyHeader,
    ProviderKind,
    UpstreamRoute,
    Wire,
)
from leasegate.providers.bedrock import Bedrock
from leasegate.providers.gemini import Gemini
from leasegate.providers.openai import OpenAI, OpenAICompatible, OpenRouter
from leasegate.providers.vertex import Vertex
from leasegate.providers.vertex_gemini import VertexGemini

KINDS: Mapping[str, ProviderKind] = {
    kind.name: kind
    for kind in (
        OpenAI(),
        Anthropic(),
        OpenRouter(),
        OpenAICompatible(),
        AzureOpenAI(),
        Gemini(),
        Bedrock(),
        Vertex(),
        VertexGemini(),
    )
}
"""In the order the accounts-file error names them."""

ENDPOINTS: tuple[Endpoint, ...] = tuple(
    dict.fromkeys(endpoint for kind in KINDS.values() for endpoint in kind.endpoints)
)
"""Every caller-facing endpoint, each once."""

WIRES: Mapping[str, Wire] = {endpoint.wire.name: endpoint.wire for endpoint in ENDPOINTS}

ANY_KIND_ERRORS = ErrorVocabulary(
    account=frozenset().union(*(kind.errors.account for kind in KINDS.values())),
    model_not_found=frozenset().union(*(kind.errors.model_not_found for kind in KINDS.values())),
    overloaded=frozenset().union(*(kind.errors.overloaded for kind in KINDS.values())),
    rate_limited=frozenset().union(*(kind.errors.rate_limited for kind in KINDS.values())),
)
"""Every kind's vocabulary at once, for a reader that cannot know the account's kind (the
client reads an upstream's error as the proxy relayed it)."""


def _key_headers() -> Mapping[bytes, tuple[int, bytes | None]]:
    """Every kind's caller key headers: raw lower-case name -> (rank, scheme + space)."""
    table: dict[bytes, tuple[int, bytes | None]] = {}
    seen: dict[str, KeyHeader] = {}
    for kind in KINDS.values():
        for header in kind.caller_key_headers:
            if seen.setdefault(header.name, header) != header:
                raise ValueError(f"two kinds read the key header {header.name!r} differently")
            scheme = None if header.scheme is None else header.scheme.encode("ascii") + b" "
            table.setdefault(header.name.encode("ascii"), (len(table), scheme))
    return table


KEY_HEADERS = _key_headers()
"""The headers a caller may present its Leasegate key in, whatever its key's kind (a caller
does not know its account's kind): the union of every kind's `caller_key_headers`, ranked in
the order kinds are listed (`Authorization: Bearer` before `x-api-key` before
`x-goog-api-key`)."""

KEY_HEADER_NAMES = ", ".join(
    name.decode() if scheme is None else f"{name.decode()}: {scheme.decode().strip().title()}"
    for name, (_, scheme) in KEY_HEADERS.items()
)
"""The key headers as a refusal names them (`authorization: Bearer, x-api-key, ...`)."""


def presented_key(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The Leasegate key the caller presented, from raw ASGI headers (lower-case names): the
    first-ranked of `KEY_HEADERS` that carries a non-empty token; None when none does. One
    pass and one dict look-up per header; the only reader of the caller's key headers (the
    proxy's admission, its models route, the access log)."""
    best = len(KEY_HEADERS)
    token: str | None = None
    for name, value in headers:
        found = KEY_HEADERS.get(name)
        if found is None or found[0] >= best:
            continue
        rank, scheme = found
        if scheme is not None:
            if value[: len(scheme)].lower() != scheme:
                continue
            value = value[len(scheme) :]
        if text := value.decode("latin-1").strip():
            if not rank:
                return text  # the first-ranked header: nothing can outrank it
            best, token = rank, text
    return token


def error_names(error: Mapping[str, object]) -> tuple[str, ...]:
    """An error payload's identifiers as any wire reads them, lower-cased, each once: codes
    first (the most specific), then types. For a reader that does not know the wire."""
    fields = [wire.error_fields(error) for wire in WIRES.values()]
    names = [code for _, code in fields if code] + [type_ for type_, _ in fields if type_]
    return tuple(dict.fromkeys(name.lower() for name in names))


def kind_named(name: str) -> ProviderKind:
    """The kind called `name` (KeyError for a name no kind has)."""
    return KINDS[name]


def wire_named(name: str) -> Wire:
    """The wire called `name` (`openai`, `responses`, `anthropic`, `gemini`)."""
    try:
        return WIRES[name]
    except KeyError:
        raise ValueError(f"unknown wire {name!r}") from None


CALLER_PREFIXES: tuple[str, ...] = tuple(
    prefix for kind in KINDS.values() if (prefix := kind.caller_prefix) is not None
)
"""Path prefixes of providers' own SDKs the proxy serves besides its endpoints."""


def caller_route(path: str) -> UpstreamRoute | None:
    """The endpoint (and model) of a caller's path under a kind's `caller_prefix`."""
    for kind in KINDS.values():
        if kind.caller_prefix and path.startswith(kind.caller_prefix):
            if (route := kind.caller_route(path)) is not None:
                return route
    return None


def path_hint(path: str) -> str | None:
    """What to call instead of `path`, when some kind's SDK sends it and it is not served."""
    for kind in KINDS.values():
        if (hint := kind.path_hint(path)) is not None:
            return hint
    return None

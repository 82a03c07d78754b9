"""Every provider kind, by the name an account's `provider:` gives it.

Adding a kind is one module beside this one (a `ProviderKind` and, for a new shape, its
`Wire`) and its line here; `tests/unit/providers/` holds its behaviour table, and
`test_completeness.py` checks every kind listed here against it.
"""

from __future__ import annotations

from collections.abc import Mapping

from leasegate.providers.anthropic import Anthropic
from leasegate.providers.azure_openai import AzureOpenAI
from leasegate.providers.base import Endpoint, ProviderKind, UpstreamRoute, Wire
from leasegate.providers.gemini import Gemini
from leasegate.providers.openai import OpenAI, OpenAICompatible, OpenRouter

KINDS: Mapping[str, ProviderKind] = {
    kind.name: kind
    for kind in (OpenAI(), Anthropic(), OpenRouter(), OpenAICompatible(), AzureOpenAI(), Gemini())
}
"""In the order the accounts-file error names them."""

ENDPOINTS: tuple[Endpoint, ...] = tuple(
    dict.fromkeys(endpoint for kind in KINDS.values() for endpoint in kind.endpoints)
)
"""Every caller-facing endpoint, each once."""

WIRES: Mapping[str, Wire] = {endpoint.wire.name: endpoint.wire for endpoint in ENDPOINTS}


def kind_named(name: str) -> ProviderKind:
    """The kind called `name` (KeyError for a name no kind has)."""
    return KINDS[name]


def wire_named(name: str) -> Wire:
    """The wire called `name` (`openai`, `responses`, `anthropic`, `gemini`)."""
    try:
        return WIRES[name]
    except KeyError:
        raise ValueError(f"unknown wire {name!r}") from None


def upstream_route(path: str) -> UpstreamRoute | None:
    """Which endpoint an upstream path is, asking every kind in turn (the demo upstream)."""
    for kind in KINDS.values():
        if (route := kind.upstream_route(path)) is not None:
            return route
    return None

"""The proxied endpoints: every provider kind's, each once (leasegate.providers).

An exact path is one dict look-up; a path with the model in it (Gemini's
`/v1beta/models/{model}:generateContent`) is matched against the few templates only when no
exact path matched.
"""

from __future__ import annotations

from leasegate.providers import ENDPOINTS, Endpoint

EXACT: dict[str, Endpoint] = {e.path: e for e in ENDPOINTS if not e.model_in_path}
TEMPLATES: tuple[Endpoint, ...] = tuple(e for e in ENDPOINTS if e.model_in_path)


def route(path: str) -> tuple[Endpoint, str | None] | None:
    """The endpoint `path` is, and the model it names (None for an exact path)."""
    endpoint = EXACT.get(path)
    if endpoint is not None:
        return endpoint, None
    for template in TEMPLATES:
        if (model := template.model_of(path)) is not None:
            return template, model
    return None


__all__ = ["ENDPOINTS", "EXACT", "TEMPLATES", "Endpoint", "route"]

"""The error envelope, the one body every refusal of both services is sent as, as a typed model.

    {"error": {"type", "code", "message", "disposition",          always (disposition may be null)
               "retry_after_s", "passed_over", "cooldown_scope",  only when the refusal has one
               "mint_decision_id", ...}}                          and a code's own extra fields

`GatewayError.envelope()` builds it (both services render it from there), the control plane's
OpenAPI document references its schema, and the client parses every refusal with it. It lives
in the core, beside `GatewayError`, and `leasegate.wire` re-exports it with the other bodies.

A field the refusal does not have is absent, never null (`Envelope.render` dumps only the
fields set), and the order is the declared one, then a code's extra fields: the bytes on the
wire are exactly the dict `GatewayError` has always rendered. Built only for a refusal: a
successful request never constructs one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Disposition = Literal["held", "rejected"]


class WireModel(BaseModel):
    """A body on the wire, or a part of one: frozen; unknown fields ignored when read."""

    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        # every field is always sent (null when empty): the document says so
        json_schema_serialization_defaults_required=True,
    )


class PassOver(WireModel):
    """One candidate selection skipped, and the first filter that ruled it out."""

    account_id: str
    code: str


_ALWAYS = ("type", "code", "message", "disposition")
_SOMETIMES = ("retry_after_s", "passed_over", "cooldown_scope", "mint_decision_id")


def _as_sent(schema: dict[str, Any]) -> None:
    """The document says what is sent, not how leniently it is read: the four fields every
    refusal has are required; a field a refusal does not have is absent, so the others are
    their plain type (never null) and carry no default."""
    properties = schema["properties"]
    schema["required"] = list(_ALWAYS)
    for name in (*_ALWAYS, *_SOMETIMES):
        properties[name].pop("default", None)
    for name in _SOMETIMES:
        field = properties[name]
        variants = field.pop("anyOf", None)
        if variants is not None:
            field.update(next(v for v in variants if v.get("type") != "null"))


class ErrorBody(BaseModel):
    """The `error` object. A reader keeps fields it does not know (a code's extra fields, e.g.
    `successor_mint_decision_id`) in `model_extra`, and reads an envelope that lacks one of
    the four fields every refusal has (a proxy in between, an older server) with its default.
    """

    model_config = ConfigDict(frozen=True, extra="allow", json_schema_extra=_as_sent)

    type: str = ""
    code: str = "unknown"
    message: str = ""
    disposition: Disposition | None = None
    """"held": may succeed later unchanged; "rejected": never will; null for `internal`."""
    retry_after_s: float | int | None = None
    passed_over: list[PassOver] = Field(default_factory=list)
    cooldown_scope: str | None = None
    mint_decision_id: str | None = None

    @property
    def extra(self) -> dict[str, Any]:
        """The fields only some codes carry (`original_mint_decision_id`, `revision`, ...)."""
        return dict(self.model_extra or {})


class Envelope(BaseModel):
    """`{"error": {...}}`: what every refusal's body is."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    error: ErrorBody

    def render(self) -> dict[str, Any]:
        """The body as a dict, only the fields set, in order (what a renderer serialises)."""
        return self.model_dump(mode="python", exclude_unset=True)

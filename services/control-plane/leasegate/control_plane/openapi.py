"""The control plane's OpenAPI document lists the refusals each route really sends.

FastAPI documents a 422 validation error on every route; this service never sends one for
validation (bad input is 400 `invalid-request`). `install_openapi` replaces it with the
route's own refusals from `ROUTE_REFUSALS`, grouped by status, each with the error envelope's
schema (generated from its model, `leasegate.core.envelope`) and an example rendered by
`GatewayError` itself. Every documented code is in
`leasegate.core.errors.CODES`; a route missing from the table fails at start-up, so the
table cannot silently fall behind the routes.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from leasegate.core.envelope import Envelope
from leasegate.core.errors import CODES, GatewayError

Refusal = tuple[str, int]

_BODY = [("invalid-request", 400), ("invalid-request", 413), ("request-timeout", 408)]
_EVERY = [
    ("invalid-request", 400),
    ("unauthenticated", 401),
    ("method-not-allowed", 405),
    ("too-many-failed-authentications", 429),
    ("unavailable", 503),
]
_FALLBACK = [(code, CODES[code].status) for code in CODES if code.startswith("fallback-")]
_FILTERS = [
    ("not-configured", 409),
    ("administratively-disabled", 409),
    ("administratively-draining", 409),
    ("circuit-open", 409),
]

ROUTE_REFUSALS: dict[tuple[str, str], list[Refusal]] = {
    ("post", "/control/v2/keys"): [
        *_BODY,
        ("citation-conflict", 422),
        ("idempotency-key-reused", 422),
        *_FALLBACK,
        ("model-not-served", 404),
        ("dispatch-lease-held", 409),
        ("no-eligible-account", 503),
        ("account-state-unavailable", 503),
        ("tenant-budget-exhausted", 402),
    ],
    ("delete", "/control/v2/keys/{key_id}"): [("key-not-found", 404)],
    ("get", "/control/v2/keys/{key_id}"): [("key-not-found", 404)],
    ("post", "/control/v2/keys/{key_id}/renew"): [
        *_BODY,
        ("key-not-found", 404),
        ("key-not-live", 409),
        *_FILTERS,
        ("account-state-unavailable", 503),
    ],
    ("get", "/control/v2/decisions"): [],
    ("get", "/control/v2/decisions/{decision_id}"): [("decision-not-found", 404)],
    ("get", "/control/v2/evidence"): [],
    ("get", "/control/v2/accounts"): [],
    ("get", "/control/v2/accounts/{account_id}"): [("account-not-found", 404)],
    ("post", "/control/v2/accounts/{account_id}/state"): [
        *_BODY,
        ("forbidden", 403),
        ("account-not-found", 404),
        ("revision-conflict", 409),
        ("audit-chain-corrupt", 503),
    ],
    ("get", "/control/v2/audit"): [],
    ("get", "/control/v2/usage"): [],
    ("get", "/control/v2/tenants"): [],
    ("get", "/control/v2/tenants/{tenant}/budget"): [],
    ("post", "/control/v2/tenants/{tenant}/budget"): [
        *_BODY,
        ("forbidden", 403),
        ("revision-conflict", 409),
        ("audit-chain-corrupt", 503),
    ],
}


def envelope_schemas() -> dict[str, Any]:
    """The error envelope's component schemas, generated from its model
    (`leasegate.core.envelope.Envelope`), with the codes it may carry listed."""
    schema = Envelope.model_json_schema(ref_template="#/components/schemas/{model}")
    components: dict[str, Any] = schema.pop("$defs")
    components["ErrorBody"]["properties"]["code"]["enum"] = sorted(CODES)
    components["ErrorEnvelope"] = schema
    return components


def refusal_responses(refusals: list[Refusal]) -> dict[str, Any]:
    """OpenAPI `responses` entries for these refusals, one per status."""
    by_status: dict[int, list[str]] = defaultdict(list)
    for code, status in [*_EVERY, *refusals]:
        if code not in by_status[status]:
            by_status[status].append(code)
    responses: dict[str, Any] = {}
    for status, codes in sorted(by_status.items()):
        examples = {
            code: {"value": GatewayError(code, f"({code})", status=status).envelope()}
            for code in codes
        }
        responses[str(status)] = {
            "description": ", ".join(f"`{code}`" for code in codes),
            "content": {
                "application/json": {
                    "schema": {"$ref": "#/components/schemas/ErrorEnvelope"},
                    "examples": examples,
                }
            },
        }
    return responses


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
        for path, operations in schema.get("paths", {}).items():
            for method, operation in operations.items():
                if not path.startswith("/control/v2"):
                    continue
                refusals = ROUTE_REFUSALS.get((method, path))
                if refusals is None:
                    raise RuntimeError(f"openapi: no refusals listed for {method} {path}")
                operation["responses"].pop("422", None)
                operation["responses"].update(refusal_responses(refusals))
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        components.update(envelope_schemas())
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]

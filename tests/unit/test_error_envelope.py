"""The error envelope is one typed model: the renderers' bytes are exactly what they always
were, the client reads every field back, and the OpenAPI document is the model's schema."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from leasegate.client import GatewayRefusal, Held, Rejected, wire
from leasegate.control_plane.openapi import install_openapi
from leasegate.core.errors import CODES, GatewayError, PassOver
from leasegate.wire import Envelope

# Each body as the gateway rendered it before the envelope was a model (JSONResponse's bytes).
BEFORE: dict[str, tuple[GatewayError, bytes]] = {
    "held refusal with pass-overs": (
        GatewayError(
            "no-eligible-account",
            "no account can serve model 'gpt-4o' now",
            retry_after_s=2.34567,
            passed_over=(PassOver("acct-a", "circuit-open"), PassOver("acct-b", "model-cooling")),
            cooldown_scope="mixed",
            mint_decision_id="md-1",
        ),
        b'{"error":{"type":"service_unavailable","code":"no-eligible-account","message":'
        b'"no account can serve model \'gpt-4o\' now","disposition":"held","retry_after_s":2.346,'
        b'"passed_over":[{"account_id":"acct-a","code":"circuit-open"},{"account_id":"acct-b",'
        b'"code":"model-cooling"}],"cooldown_scope":"mixed","mint_decision_id":"md-1"}}',
    ),
    "whole-second wait and an extra field": (
        GatewayError(
            "fallback-lease-still-held",
            "the cited lease is still held",
            retry_after_s=1,
            extra={"successor_mint_decision_id": "md-2"},
        ),
        b'{"error":{"type":"service_unavailable","code":"fallback-lease-still-held","message":'
        b'"the cited lease is still held","disposition":"held","retry_after_s":1,'
        b'"successor_mint_decision_id":"md-2"}}',
    ),
    "rejected": (
        GatewayError("key-revoked", "the key was revoked"),
        b'{"error":{"type":"authentication_error","code":"key-revoked","message":'
        b'"the key was revoked","disposition":"rejected"}}',
    ),
    "internal, null disposition": (
        GatewayError("internal", "internal error"),
        b'{"error":{"type":"api_error","code":"internal","message":"internal error",'
        b'"disposition":null}}',
    ),
    "extra fields in order": (
        GatewayError(
            "revision-conflict",
            "revision 3 is not the current one",
            extra={"revision": 4, "current_revision": 4},
        ),
        b'{"error":{"type":"conflict_error","code":"revision-conflict","message":'
        b'"revision 3 is not the current one","disposition":"rejected","revision":4,'
        b'"current_revision":4}}',
    ),
    "non-ascii message, status given": (
        GatewayError("invalid-request", "unknown field 'mod\u00e8le'", status=413),
        b'{"error":{"type":"invalid_request_error","code":"invalid-request","message":'
        b'"unknown field \'mod\xc3\xa8le\'","disposition":"rejected"}}',
    ),
}


@pytest.mark.parametrize("name", list(BEFORE))
def test_the_rendered_bytes_are_unchanged(name: str) -> None:
    error, before = BEFORE[name]
    assert JSONResponse(error.envelope()).body == before
    # the plain-json renderers (body limit, header deadline) serialise the same dict
    assert json.dumps(error.envelope()) == json.dumps(json.loads(before))


@pytest.mark.parametrize("name", list(BEFORE))
def test_the_client_reads_back_every_field(name: str) -> None:
    error, before = BEFORE[name]
    refusal = wire.refusal(error.status, {}, json.loads(before))
    kind = {"held": Held, "rejected": Rejected, None: GatewayRefusal}[error.disposition]
    assert type(refusal) is kind
    assert (refusal.status, refusal.code, refusal.message) == (
        error.status,
        error.code,
        error.message,
    )
    assert refusal.disposition == error.disposition
    expected_wait = None if error.retry_after_s is None else round(error.retry_after_s, 3)
    assert refusal.retry_after_s == expected_wait
    assert [(p.account_id, p.code) for p in refusal.passed_over] == [
        (p.account_id, p.code) for p in error.passed_over
    ]
    assert refusal.cooldown_scope == error.cooldown_scope
    assert refusal.mint_decision_id == error.mint_decision_id
    assert dict(refusal.envelope) == json.loads(before)["error"]
    assert Envelope.model_validate_json(before).render() == json.loads(before)


def test_the_openapi_document_references_the_models_schema() -> None:
    app = FastAPI()

    @app.post("/control/v2/keys")
    async def mint() -> None: ...

    install_openapi(app)
    document = app.openapi()
    schemas = document["components"]["schemas"]
    envelope = schemas["ErrorEnvelope"]
    assert envelope["properties"]["error"] == {"$ref": "#/components/schemas/ErrorBody"}
    body = schemas["ErrorBody"]
    assert body["required"] == ["type", "code", "message", "disposition"]
    assert body["properties"]["code"]["enum"] == sorted(CODES)
    assert body["properties"]["passed_over"]["items"] == {"$ref": "#/components/schemas/PassOver"}
    for name in ("retry_after_s", "cooldown_scope", "mint_decision_id"):
        assert "null" not in json.dumps(body["properties"][name])
    refused = document["paths"]["/control/v2/keys"]["post"]["responses"]["503"]
    schema = refused["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/ErrorEnvelope"}

"""`GET /v1/models` and `GET /v1/models/{id}`: what the presented key may call.

Answered by the proxy itself (no upstream call, no evidence row): the key's requested model
and the model it is served as, the only two names its requests may carry.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from leasegate.core.clock import new_id
from leasegate.core.errors import GatewayError
from leasegate.core.records import KeyRecord
from leasegate.keys import parse_key
from leasegate.providers import presented_key
from leasegate.proxy.relay import refusal_response
from leasegate.proxy.runtime import ProxyRuntime


async def list_models(runtime: ProxyRuntime, request: Request) -> Response:
    try:
        key = await _key(runtime, request)
    except GatewayError as refusal:
        return refusal_response(refusal, new_id("req"))
    names = dict.fromkeys((key.model, key.served_model))
    return JSONResponse({"object": "list", "data": [_model(runtime, key, n) for n in names]})


async def retrieve_model(runtime: ProxyRuntime, request: Request) -> Response:
    model_id = request.path_params["model_id"]
    try:
        key = await _key(runtime, request)
        if model_id not in (key.model, key.served_model):
            raise GatewayError("model-not-served", f"this key serves only {key.model!r}")
    except GatewayError as refusal:
        return refusal_response(refusal, new_id("req"))
    return JSONResponse(_model(runtime, key, model_id))


async def _key(runtime: ProxyRuntime, request: Request) -> KeyRecord:
    token = presented_key(request.headers.raw)
    parsed = parse_key(token) if token else None
    if parsed is None:
        raise GatewayError("key-invalid", "the key is not valid")
    return await runtime.resolver.resolve(parsed)


def _model(runtime: ProxyRuntime, key: KeyRecord, name: str) -> dict[str, Any]:
    account = runtime.registry.account(key.account_id)
    owner = account.provider if account else "unknown"
    return {"id": name, "object": "model", "created": 0, "owned_by": owner}

"""The `vertex` kind (Anthropic's models on Vertex AI): behaviour tables (run by
test_completeness.py, on Vertex's own error shapes as the proxy receives them), its upstream
paths, its body and its accounts-file fields."""

from __future__ import annotations

import json

import pytest

from leasegate.accounts import AccountsFileError, parse_accounts
from leasegate.providers import KINDS, StreamError, Usage
from leasegate.providers.anthropic import MESSAGES
from tests.unit.providers import test_anthropic as anthropic_tables
from tests.unit.providers.tables import BodyUsage, Classified, StreamReading

COVERS = ("vertex",)
VERTEX = KINDS["vertex"]
ENTRY = {"project": "fleet-prod-1", "location": "global"}


def _google(code: int, status: str, message: str = "from Vertex") -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "status": status}}).encode()


def _event(name: str, obj: object) -> bytes:
    return f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode()


USAGE = [
    BodyUsage(
        MESSAGES,
        json.dumps(
            {
                "usage": {
                    "input_tokens": 20,
                    "output_tokens": 5,
                    "cache_read_input_tokens": 7,
                    "cache_creation_input_tokens": 3,
                }
            }
        ).encode(),
        Usage(20, 5, 7, 3),
    )
]

STREAMS = [
    *[row for row in anthropic_tables.STREAMS if row.endpoint is MESSAGES],
    StreamReading(
        MESSAGES,
        _event("error", {"type": "error", "error": {"type": "overloaded_error", "message": "x"}}),
        Usage(),
        completed=False,
        error=StreamError("overloaded_error", None),
    ),
]

CLASSIFIED = [
    Classified(
        MESSAGES,
        429,
        _google(429, "RESOURCE_EXHAUSTED"),
        "upstream-error",
        "model",
        True,
        "resource_exhausted",
    ),
    Classified(
        MESSAGES,
        403,
        _google(403, "PERMISSION_DENIED"),
        "upstream-error",
        "account",
        True,
        "permission_denied",
    ),
    Classified(
        MESSAGES,
        401,
        _google(401, "UNAUTHENTICATED"),
        "upstream-error",
        "account",
        True,
        "unauthenticated",
    ),
    Classified(
        MESSAGES,
        503,
        _google(503, "UNAVAILABLE"),
        "upstream-error",
        "model",
        True,
        "unavailable",
    ),
    Classified(
        MESSAGES,
        400,
        _google(400, "INVALID_ARGUMENT"),
        "upstream-error",
        None,
        False,
        "http-400",
    ),
    # the model's own error, in Anthropic's shape, relayed as it is
    Classified(
        MESSAGES,
        400,
        json.dumps(
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 210000 tokens > 200000 maximum",
                },
            }
        ).encode(),
        "context-length-exceeded",
        "model",
        False,
        "context_length_exceeded",
    ),
    Classified(
        MESSAGES,
        None,
        _event("error", {"type": "error", "error": {"type": "overloaded_error", "message": "x"}}),
        "in-stream-error",
        "model",
        True,
        "overloaded_error",
    ),
]

RENDERED = [row for row in anthropic_tables.RENDERED if row.endpoint is MESSAGES]


@pytest.mark.parametrize(
    ("location", "stream", "method"),
    [("global", False, ":rawPredict"), ("us-east5", True, ":streamRawPredict")],
)
def test_the_model_goes_under_the_project_and_location(
    location: str, stream: bool, method: str
) -> None:
    options = VERTEX.options({"project": "fleet-prod-1", "location": location})
    path = VERTEX.upstream_target(MESSAGES, "claude-sonnet-4-5@20250929", options, stream)
    assert path == (
        f"/v1/projects/fleet-prod-1/locations/{location}/publishers/anthropic/models/"
        f"claude-sonnet-4-5@20250929{method}"
    )
    route = VERTEX.upstream_route(path)
    assert route is not None
    assert (route.endpoint, route.model) == (MESSAGES, "claude-sonnet-4-5@20250929")


def test_the_body_loses_model_and_names_vertexs_version() -> None:
    fields: dict[str, object] = {"model": "claude-x", "stream": True, "max_tokens": 5}
    VERTEX.rewrite_fields(fields, "claude-sonnet-4-5@20250929", [("anthropic-beta", "b-1")])
    assert fields == {
        "stream": True,
        "max_tokens": 5,
        "anthropic_version": "vertex-2023-10-16",
        "anthropic_beta": ["b-1"],
    }


def test_a_google_error_reaches_the_caller_in_anthropics_shape() -> None:
    body = VERTEX.error_body(429, {}, _google(429, "RESOURCE_EXHAUSTED", "Quota exceeded"))
    assert body is not None
    assert json.loads(body) == {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "code": "RESOURCE_EXHAUSTED",
            "message": "Quota exceeded",
        },
    }


def test_an_account_needs_a_project_and_a_location_and_no_key_variable() -> None:
    entry = {
        "id": "vertex-eu",
        "provider": "vertex",
        "base_url": "https://europe-west1-aiplatform.googleapis.com",
        "project": "fleet-prod-1",
        "location": "europe-west1",
        "models": {"claude-fleet": "claude-sonnet-4-5@20250929"},
    }
    (account,) = parse_accounts({"accounts": [entry]}, set()).accounts
    assert account.configured
    assert account.options == {"project": "fleet-prod-1", "location": "europe-west1"}
    with pytest.raises(AccountsFileError, match="field 'location'"):
        parse_accounts({"accounts": [{**entry, "location": "Europe"}]}, set())

"""The `azure-openai` kind: behaviour tables (run by test_completeness.py), its upstream paths
and its accounts-file fields."""

from __future__ import annotations

import json

import pytest

from leasegate.accounts import AccountsFileError, parse_accounts
from leasegate.providers import KINDS, StreamError, Usage
from leasegate.providers.openai import CHAT, COMPLETIONS, EMBEDDINGS
from tests.unit.providers.tables import BodyUsage, Classified, Rendered, StreamReading

COVERS = ("azure-openai",)
AZURE = KINDS["azure-openai"]


def _data(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _error(**error: object) -> bytes:
    return json.dumps({"error": {"message": "from Azure", **error}}).encode()


_USAGE = {
    "prompt_tokens": 20,
    "completion_tokens": 5,
    "prompt_tokens_details": {"cached_tokens": 0},
}
_FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": _USAGE}
# Azure's content filter ends a stream with finish_reason "content_filter": a normal end
_FILTERED = {"choices": [{"index": 0, "delta": {}, "finish_reason": "content_filter"}]}

USAGE = [
    BodyUsage(CHAT, json.dumps({"usage": _USAGE}).encode(), Usage(20, 5, 0, None)),
    BodyUsage(EMBEDDINGS, b'{"usage": {"prompt_tokens": 3, "total_tokens": 3}}', Usage(3)),
]

STREAMS = [
    StreamReading(
        CHAT, _data(_FINISH) + b"data: [DONE]\n\n", Usage(20, 5, 0, None), completed=True
    ),
    StreamReading(COMPLETIONS, _data(_FILTERED), Usage(), completed=True),
    StreamReading(
        CHAT,
        _data({"error": {"code": "server_error", "message": "x"}}),
        Usage(),
        completed=False,
        error=StreamError(None, "server_error"),
    ),
]

CLASSIFIED = [
    # a wrong key: Azure answers 401 with a numeric string code
    Classified(CHAT, 401, _error(code="401"), "upstream-error", "account", True, "http-401"),
    Classified(CHAT, 429, _error(code="429"), "upstream-error", "model", True, "rate-limited"),
    Classified(
        CHAT,
        404,
        _error(code="DeploymentNotFound"),
        "upstream-error",
        "model",
        True,
        "deploymentnotfound",
    ),
    Classified(CHAT, 400, _error(code="content_filter"), "upstream-error", None, False, "http-400"),
    Classified(
        CHAT,
        400,
        _error(code="context_length_exceeded"),
        "context-length-exceeded",
        "model",
        False,
        "context_length_exceeded",
    ),
    Classified(
        CHAT,
        None,
        _data({"error": {"code": "server_error"}}),
        "in-stream-error",
        "model",
        True,
        "server_error",
    ),
]

RENDERED = [
    Rendered(
        CHAT,
        "upstream-truncated",
        None,
        {
            "error": {
                "type": "api_error",
                "code": "upstream-truncated",
                "message": "the upstream stalled",
                "param": None,
            }
        },
    ),
]


def test_the_deployment_and_api_version_go_into_the_path_and_the_key_into_api_key() -> None:
    options = AZURE.options({"api_version": "2025-01-01-preview"})
    assert AZURE.upstream_path(CHAT, "gpt4o-prod", options) == (
        "/openai/deployments/gpt4o-prod/chat/completions?api-version=2025-01-01-preview"
    )
    assert AZURE.upstream_path(EMBEDDINGS, "emb", AZURE.options({})) == (
        "/openai/deployments/emb/embeddings?api-version=2024-10-21"
    )
    assert AZURE.credential_headers("az-key") == (("api-key", "az-key"),)


def _azure(**extra: object) -> dict[str, object]:
    return {
        "id": "azure-east",
        "provider": "azure-openai",
        "base_url": "https://east.openai.azure.com",
        "credential_env": "LEASEGATE_CRED_AZURE",
        "models": {"gpt-4o": "gpt4o-prod"},
        **extra,
    }


def test_an_azure_account_in_the_accounts_file() -> None:
    registry = parse_accounts({"accounts": [_azure(api_version="2024-06-01")]}, set())
    (account,) = registry.accounts
    assert account.kind is AZURE
    assert account.options == {"api_version": "2024-06-01"}
    assert registry.candidates("gpt-4o")[0].served_model == "gpt4o-prod"
    default = parse_accounts({"accounts": [_azure()]}, set()).accounts[0]
    assert default.options == {"api_version": "2024-10-21"}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            _azure(api_version="latest"),
            "accounts file: account 'azure-east': field 'api_version': must be a date such as "
            "2024-10-21 (or -preview)",
        ),
        (_azure(api_version=20241021), "field 'api_version': must be a date"),
        (
            _azure(models={"gpt-4o": "my deployment"}),
            "accounts file: account 'azure-east': field 'models': model 'gpt-4o': the served name "
            "is the deployment",
        ),
        (
            {**_azure(), "provider": "openai", "api_version": "2024-10-21"},
            "field 'api_version': unknown field for provider 'openai'",
        ),
        ({**_azure(), "provider": "azure"}, "field 'provider': must be one of openai, anthropic"),
    ],
)
def test_bad_azure_fields_fail_in_one_line(entry: dict[str, object], message: str) -> None:
    with pytest.raises(AccountsFileError) as failed:
        parse_accounts({"accounts": [entry]}, set())
    assert message in str(failed.value)
    assert "\n" not in str(failed.value)


def test_the_sdk_deployment_paths_are_caller_routes_naming_the_model() -> None:
    from leasegate.providers import caller_route, openai

    route = caller_route("/openai/deployments/gpt-4o/chat/completions")
    assert route is not None
    assert (route.endpoint, route.model) == (openai.CHAT, "gpt-4o")
    assert caller_route("/openai/deployments/gpt-4o/embeddings").endpoint is openai.EMBEDDINGS  # type: ignore[union-attr]
    assert caller_route("/openai/deployments/gpt-4o/images/generations") is None
    assert caller_route("/openai/deployments//chat/completions") is None

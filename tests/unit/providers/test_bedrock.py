"""The `bedrock` kind: behaviour tables (run by test_completeness.py, on the AWS framing and
error shapes as the proxy receives them), its upstream paths, its body, its event-stream
decoding and its accounts-file fields."""

from __future__ import annotations

import json

import pytest

from leasegate.accounts import AccountsFileError, parse_accounts
from leasegate.demo.eventstream import exception
from leasegate.providers import KINDS, StreamError, Usage
from leasegate.providers.anthropic import MESSAGES
from tests.fixtures.mock_clouds import anthropic_events, bedrock_chunk
from tests.unit.providers.tables import BodyUsage, Classified, Rendered, StreamReading

COVERS = ("bedrock",)
BEDROCK = KINDS["bedrock"]
ENTRY = {"region": "eu-central-1"}


def _aws(message: str) -> bytes:
    return json.dumps({"message": message}).encode()


def _type(name: str) -> dict[str, str]:
    return {"x-amzn-errortype": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/"}


_STREAM = b"".join(bedrock_chunk(e) for e in anthropic_events(3))
_BODY = {
    "id": "msg_1",
    "type": "message",
    "content": [{"type": "text", "text": "hi"}],
    "usage": {
        "input_tokens": 20,
        "output_tokens": 5,
        "cache_read_input_tokens": 7,
        "cache_creation_input_tokens": 3,
    },
}

USAGE = [BodyUsage(MESSAGES, json.dumps(_BODY).encode(), Usage(20, 5, 7, 3))]

STREAMS = [
    StreamReading(MESSAGES, _STREAM, Usage(12, 3, 4, 2), completed=True),
    StreamReading(
        MESSAGES,
        bedrock_chunk(anthropic_events(1)[0]) + exception("modelStreamErrorException", "boom"),
        Usage(12, 1, 4, 2),
        completed=False,
        error=StreamError("api_error", "ModelStreamErrorException"),
    ),
    StreamReading(
        MESSAGES,
        exception("throttlingException", "Too many tokens"),
        Usage(),
        completed=False,
        error=StreamError("rate_limit_error", "ThrottlingException"),
    ),
]

CLASSIFIED = [
    Classified(
        MESSAGES,
        403,
        _aws("The security token included in the request is invalid."),
        "upstream-error",
        "account",
        True,
        "unrecognizedclientexception",
        _type("UnrecognizedClientException"),
    ),
    Classified(
        MESSAGES,
        403,
        _aws("You don't have access to the model"),
        "upstream-error",
        "account",
        True,
        "accessdeniedexception",
        _type("AccessDeniedException"),
    ),
    Classified(
        MESSAGES,
        403,
        _aws("The security token included in the request is expired"),
        "upstream-error",
        "account",
        True,
        "expiredtokenexception",
        _type("ExpiredTokenException"),
    ),
    Classified(
        MESSAGES,
        429,
        _aws("Too many requests, please wait before trying again."),
        "upstream-error",
        "model",
        True,
        "throttlingexception",
        _type("ThrottlingException"),
    ),
    Classified(
        MESSAGES,
        429,
        _aws("Too many tokens per day"),
        "upstream-error",
        "model",
        True,
        "servicequotaexceededexception",
        _type("ServiceQuotaExceededException"),
    ),
    Classified(
        MESSAGES,
        408,
        _aws("Model has timed out in processing the request."),
        "upstream-error",
        "model",
        True,
        "modeltimeoutexception",
        _type("ModelTimeoutException"),
    ),
    Classified(
        MESSAGES,
        503,
        _aws("Service unavailable"),
        "upstream-error",
        "model",
        True,
        "serviceunavailableexception",
        _type("ServiceUnavailableException"),
    ),
    Classified(
        MESSAGES,
        400,
        _aws("Input is too long for requested model."),
        "context-length-exceeded",
        "model",
        False,
        "context_length_exceeded",
        _type("ValidationException"),
    ),
    Classified(
        MESSAGES,
        400,
        _aws("messages: field required"),
        "upstream-error",
        None,
        False,
        "http-400",
        _type("ValidationException"),
    ),
    Classified(
        MESSAGES,
        None,
        exception("modelStreamErrorException", "the model failed"),
        "in-stream-error",
        "model",
        True,
        "modelstreamerrorexception",
    ),
]

RENDERED = [
    Rendered(
        MESSAGES,
        "upstream-timeout",
        "error",
        {
            "type": "error",
            "error": {
                "type": "api_error",
                "code": "upstream-timeout",
                "message": "the upstream stalled",
            },
        },
    ),
]


@pytest.mark.parametrize(
    ("served", "stream", "path"),
    [
        (
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            False,
            "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke",
        ),
        (
            "eu.anthropic.claude-sonnet-4-5-20250929-v1:0",
            True,
            "/model/eu.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream",
        ),
        (
            "arn:aws:bedrock:eu-central-1:123456789012:inference-profile/eu.anthropic.claude-x",
            False,
            "/model/arn%3Aaws%3Abedrock%3Aeu-central-1%3A123456789012%3Ainference-profile"
            "%2Feu.anthropic.claude-x/invoke",
        ),
    ],
)
def test_the_served_name_goes_into_the_path_encoded(served: str, stream: bool, path: str) -> None:
    assert BEDROCK.served_problem(served) is None
    assert BEDROCK.upstream_target(MESSAGES, served, ENTRY, stream) == path
    route = BEDROCK.upstream_route(path)
    assert route is not None
    assert (route.endpoint, route.model) == (MESSAGES, served)


def test_the_body_loses_model_and_stream_and_names_bedrocks_version() -> None:
    fields: dict[str, object] = {"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 5}
    headers = [("anthropic-beta", "prompt-caching-2024-07-31, tools-2024-04-04")]
    BEDROCK.rewrite_fields(fields, "anthropic.claude-x", headers)
    assert fields == {
        "max_tokens": 5,
        "anthropic_version": "bedrock-2023-05-31",
        "anthropic_beta": ["prompt-caching-2024-07-31", "tools-2024-04-04"],
    }
    assert not {"anthropic-version", "anthropic-beta", "x-api-key"} & BEDROCK.forwarded_headers


def test_the_event_stream_decodes_in_any_pieces_into_anthropic_sse() -> None:
    whole = KINDS["bedrock"].stream_decoder()
    assert whole is not None
    expected = whole.feed(_STREAM)
    events = [block for block in expected.split(b"\n\n") if block]
    assert events[0].startswith(b"event: message_start\ndata: {")
    assert events[-1] == b'event: message_stop\ndata: {"type":"message_stop"}'
    cut = KINDS["bedrock"].stream_decoder()
    assert cut is not None
    assert b"".join(cut.feed(_STREAM[i : i + 5]) for i in range(0, len(_STREAM), 5)) == expected


def test_an_aws_error_reaches_the_caller_in_anthropics_shape() -> None:
    body = BEDROCK.error_body(429, _type("ThrottlingException"), _aws("Too many requests"))
    assert body is not None
    assert json.loads(body) == {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "code": "ThrottlingException",
            "message": "Too many requests",
        },
    }


def _accounts(**fields: object) -> dict[str, object]:
    entry = {
        "id": "bedrock-eu",
        "provider": "bedrock",
        "base_url": "https://bedrock-runtime.eu-central-1.amazonaws.com",
        "models": {"claude-sonnet-4-5": "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"},
        **fields,
    }
    return {"accounts": [entry]}


def test_an_account_needs_a_region_and_no_key_variable() -> None:
    registry = parse_accounts(_accounts(region="eu-central-1", aws_profile="prod"), set())
    account = registry.accounts[0]
    assert account.configured
    assert account.credential_env == ""
    assert account.options == {"region": "eu-central-1", "aws_profile": "prod"}
    with pytest.raises(AccountsFileError, match="field 'region'"):
        parse_accounts(_accounts(), set())
    with pytest.raises(AccountsFileError, match="field 'role_arn'"):
        parse_accounts(_accounts(region="eu-central-1", role_arn="admin"), set())


def test_without_its_extra_the_accounts_file_refuses_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def missing(name: str, *args: object) -> object:
        if name == "google.auth":  # as without any `google` package: its parent is missing
            raise ModuleNotFoundError("No module named 'google'", name="google")
        return None if name == "botocore" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", missing)
    with pytest.raises(AccountsFileError) as refused:
        parse_accounts(_accounts(region="eu-central-1"), set())
    assert str(refused.value) == (
        "accounts file: account 'bedrock-eu': field 'provider': "
        "bedrock needs its extra: pip install 'leasegate[bedrock]'"
    )
    vertex = {
        **_accounts()["accounts"][0],  # type: ignore[index]
        "provider": "vertex",
        "project": "fleet-prod-1",
        "location": "global",
    }
    with pytest.raises(AccountsFileError, match=r"pip install 'leasegate\[vertex\]'$"):
        parse_accounts({"accounts": [vertex]}, set())

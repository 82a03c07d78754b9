"""Anthropic models on AWS Bedrock: the `bedrock` kind.

Callers speak Anthropic Messages to the proxy (`/v1/messages`, plain and streamed) exactly as
for an `anthropic` account. The proxy moves the served name into the path
(`/model/{modelId}/invoke`, `/model/{modelId}/invoke-with-response-stream`; a model id, an
inference profile or an ARN, URL-encoded), removes `model` from the body and sets
`anthropic_version: bedrock-2023-05-31` (a caller's `anthropic-beta` header becomes the body's
`anthropic_beta`). Anthropic's own headers (`anthropic-version`, `anthropic-beta`,
`x-api-key`) are never sent to AWS.

Authentication is SigV4 (service `bedrock`, the account's `region`) with credentials from the
AWS chain (leasegate.upstream.cloud_auth), or a Bedrock API key as a bearer token when the
account names a `credential_env`. The accounts file names a `region`, and optionally an
`aws_profile` and a `role_arn` to assume: never a secret.

AWS answers an error as `{"message": ...}` with its type in the `x-amzn-ErrorType` header;
`error_body` turns it into Anthropic's error shape (the AWS name as the error's `code`), so
the caller's SDK raises the usual exception and the classifier reads the usual identifiers. A
stream is an AWS event stream (`application/vnd.amazon.eventstream`) whose chunk events carry
Anthropic's stream events, base64 in their `bytes`; `EventStreamDecoder` turns it back into
Anthropic's SSE events as it arrives (botocore's incremental parser), exceptions included.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import re
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

from leasegate.providers.anthropic import MESSAGES, X_API_KEY, betas_into_body
from leasegate.providers.base import (
    Endpoint,
    ErrorVocabulary,
    OptionError,
    ProviderKind,
    UpstreamRoute,
)
from leasegate.providers.common import ANSWER_HEADERS, COMMON_ERRORS

BEDROCK_VERSION = "bedrock-2023-05-31"
EVENT_STREAM = "application/vnd.amazon.eventstream"
_REGION = re.compile(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}")
_PROFILE = re.compile(r"[A-Za-z0-9_.+@-]{1,64}")
_ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:role/[A-Za-z0-9_+=,.@/-]{1,128}")
_SERVED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,2047}")
_PREFIX = "/model/"
_INVOKE = "/invoke"
_STREAM = "/invoke-with-response-stream"
FORWARDED_HEADERS = frozenset({"content-type", "user-agent"})
"""Not Anthropic's own headers (`anthropic-beta` goes into the body), nor the caller's
`accept` (AWS's operations set their own)."""

# AWS's error type -> Anthropic's error type (what the caller's SDK raises on).
_ANTHROPIC_TYPE = {
    "throttlingexception": "rate_limit_error",
    "servicequotaexceededexception": "rate_limit_error",
    "accessdeniedexception": "permission_error",
    "unrecognizedclientexception": "authentication_error",
    "expiredtokenexception": "authentication_error",
    "invalidsignatureexception": "authentication_error",
    "validationexception": "invalid_request_error",
    "resourcenotfoundexception": "not_found_error",
    "serviceunavailableexception": "overloaded_error",
    "modelnotreadyexception": "overloaded_error",
    "modeltimeoutexception": "api_error",
    "modelstreamerrorexception": "api_error",
    "modelerrorexception": "api_error",
    "internalserverexception": "api_error",
}
_TOO_LONG = ("input is too long", "too many input tokens", "prompt is too long")


def aws_error_type(value: str | None) -> str | None:
    """`x-amzn-ErrorType`'s name: `ThrottlingException:http://internal...` -> the name."""
    if not value:
        return None
    name = value.split(":", 1)[0].strip()
    return name if re.fullmatch(r"[A-Za-z]{1,64}", name) else None


def anthropic_error(aws_type: str | None, message: str, status: int | None = None) -> bytes:
    """An AWS error (its type and message) in Anthropic's shape: the AWS name is the `code`,
    `context_length_exceeded` for an input over the model's window (read by every wire of the
    family)."""
    lowered = (aws_type or "").lower()
    error_type = _ANTHROPIC_TYPE.get(lowered)
    if error_type is None:
        error_type = "rate_limit_error" if status == 429 else "api_error"
    code = aws_type
    if lowered == "validationexception" and any(p in message.lower() for p in _TOO_LONG):
        code = "context_length_exceeded"
    error: dict[str, object] = {"type": error_type, "message": message}
    if code:
        error["code"] = code
    return json.dumps({"type": "error", "error": error}).encode()


class Bedrock(ProviderKind):
    name = "bedrock"
    caller_key_headers = (X_API_KEY,)  # its callers speak Anthropic's wire
    endpoints = (MESSAGES,)
    errors = ErrorVocabulary(
        account=COMMON_ERRORS.account
        | {
            "accessdeniedexception",
            "unrecognizedclientexception",
            "expiredtokenexception",
            "invalidsignatureexception",
        },
        model_not_found=COMMON_ERRORS.model_not_found | {"resourcenotfoundexception"},
        overloaded=COMMON_ERRORS.overloaded
        | {
            "throttlingexception",
            "servicequotaexceededexception",
            "serviceunavailableexception",
            "modelnotreadyexception",
            "modeltimeoutexception",
        },
    )
    input_includes_cache = False
    option_fields = frozenset({"region", "aws_profile", "role_arn"})
    cloud_auth = "aws-sigv4"
    forwarded_headers = FORWARDED_HEADERS
    relayed_headers = ANSWER_HEADERS
    stream_content_type = EVENT_STREAM

    def credential_headers(self, secret: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {secret}"),)  # a Bedrock API key

    def default_headers(self) -> tuple[tuple[str, str], ...]:
        return ()

    def region(self, options: Mapping[str, str]) -> str | None:
        return options.get("region")

    def options(self, entry: Mapping[object, object]) -> Mapping[str, str]:
        options: dict[str, str] = {}
        region = entry.get("region")
        if not isinstance(region, str) or not _REGION.fullmatch(region):
            raise OptionError("region", "required: an AWS region such as us-east-1")
        options["region"] = region
        profile = entry.get("aws_profile")
        if profile is not None:
            if not isinstance(profile, str) or not _PROFILE.fullmatch(profile):
                raise OptionError("aws_profile", "must be a profile name of ~/.aws/config")
            options["aws_profile"] = profile
        role = entry.get("role_arn")
        if role is not None:
            if not isinstance(role, str) or not _ROLE_ARN.fullmatch(role):
                raise OptionError("role_arn", "must be an IAM role ARN (arn:aws:iam::…:role/…)")
            options["role_arn"] = role
        if importlib.util.find_spec("botocore") is None:
            raise OptionError(
                "provider", "bedrock needs its extra: pip install 'leasegate[bedrock]'"
            )
        return options

    def served_problem(self, served_model: str) -> str | None:
        if _SERVED.fullmatch(served_model):
            return None
        return "the served name is a Bedrock model id, inference profile or ARN"

    def upstream_path(
        self, endpoint: Endpoint, served_model: str, options: Mapping[str, str]
    ) -> str:
        return self.upstream_target(endpoint, served_model, options, stream=False)

    def upstream_target(
        self, endpoint: Endpoint, served_model: str, options: Mapping[str, str], stream: bool
    ) -> str:
        return _PREFIX + quote(served_model, safe="") + (_STREAM if stream else _INVOKE)

    def upstream_route(self, path: str) -> UpstreamRoute | None:
        if not path.startswith(_PREFIX):
            return None
        rest = path[len(_PREFIX) :]
        for suffix in (_STREAM, _INVOKE):
            if rest.endswith(suffix) and len(rest) > len(suffix):
                return UpstreamRoute(MESSAGES, unquote(rest[: -len(suffix)]))
        return None

    def rewrite_fields(
        self,
        fields: MutableMapping[str, Any],
        served_model: str,
        caller_headers: Sequence[tuple[str, str]],
    ) -> None:
        fields.pop("model", None)
        fields.pop("stream", None)  # the path says whether it streams
        fields["anthropic_version"] = BEDROCK_VERSION
        betas_into_body(fields, caller_headers)

    def error_body(self, status: int, headers: Mapping[str, str], body: bytes) -> bytes | None:
        aws_type = aws_error_type(headers.get("x-amzn-errortype"))
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict) and obj.get("type") == "error":
            return None  # already Anthropic's shape (a model's own error)
        message = obj.get("message") if isinstance(obj, dict) else None
        if not isinstance(message, str):
            message = obj.get("Message") if isinstance(obj, dict) else None
        text = message if isinstance(message, str) else f"upstream status {status}"
        return anthropic_error(aws_type, text, status)

    def stream_decoder(self) -> EventStreamDecoder:
        return EventStreamDecoder()


class EventStreamDecoder:
    """AWS event-stream bytes in, Anthropic SSE bytes out, as the bytes arrive.

    A chunk event's payload is `{"bytes": base64(JSON of an Anthropic stream event)}`: it
    becomes `event: <its type>` / `data: <that JSON>`. An exception message
    (`:message-type: exception`) becomes Anthropic's `event: error` with the AWS name as the
    code. Bedrock's `amazon-bedrock-invocationMetrics` on the last event is dropped: its
    counts are those of `message_start` and `message_delta`, which the scanner reads.
    """

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        from botocore.eventstream import EventStreamBuffer  # the `bedrock` extra

        self._buffer = EventStreamBuffer()

    def feed(self, data: bytes) -> bytes:
        self._buffer.add_data(data)
        out = [_sse(message.headers, message.payload) for message in self._buffer]
        return b"".join(out)


def _sse(headers: Mapping[str, object], payload: bytes) -> bytes:
    kind = headers.get(":message-type")
    if kind == "event":
        try:
            wrapper = json.loads(payload)
            inner = base64.b64decode(wrapper["bytes"])
            event = json.loads(inner)
        except (ValueError, KeyError, TypeError):
            return b""
        if not isinstance(event, dict):
            return b""
        if "amazon-bedrock-invocationMetrics" in event:
            event.pop("amazon-bedrock-invocationMetrics")
            inner = json.dumps(event, separators=(",", ":")).encode()
        name = event.get("type")
        label = name if isinstance(name, str) and name.isidentifier() else "message"
        return b"event: " + label.encode() + b"\ndata: " + inner + b"\n\n"
    exception = headers.get(":exception-type") or headers.get(":error-code")
    aws_type = exception if isinstance(exception, str) else None
    try:
        obj = json.loads(payload)
    except ValueError:
        obj = None
    message = obj.get("message") if isinstance(obj, dict) else None
    text = message if isinstance(message, str) else "the upstream stream failed"
    name = aws_type[:1].upper() + aws_type[1:] if aws_type else None
    return b"event: error\ndata: " + anthropic_error(name, text) + b"\n\n"

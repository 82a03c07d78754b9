"""Azure OpenAI: the `azure-openai` kind.

Callers speak OpenAI's wire to the proxy (`/v1/chat/completions`, `/v1/completions`,
`/v1/embeddings`, the model in the body); the proxy sends each request to the account's
deployment: `{base_url}/openai/deployments/{deployment}/chat/completions?api-version=...`. The
deployment is the served model name (`models:` maps requested names to deployments), the
`api-version` is the account's `api_version` (default `DEFAULT_API_VERSION`), and the
credential goes in an `api-key` header. The proxy also serves those deployment paths to callers
(`caller_route`), so `openai.AzureOpenAI(azure_endpoint=<proxy>, api_key=<key>)` works
unchanged: the deployment names the requested model, the `api-key` header the key. Bodies,
streams and errors are OpenAI's; Azure names a missing deployment `DeploymentNotFound` (a 404:
model scope). A stream is asked for its usage (`stream_options`) only from api-version
`STREAM_USAGE_SINCE` on, the first to accept it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from leasegate.core.ports.quota import Bucket, QuotaDimension
from leasegate.providers import openai
from leasegate.providers.base import (
    Endpoint,
    ErrorVocabulary,
    KeyHeader,
    OptionError,
    ProviderKind,
    UpstreamRoute,
)
from leasegate.providers.common import COMMON_ERRORS
from leasegate.providers.ratelimits import openai_buckets

DEFAULT_API_VERSION = "2024-10-21"
STREAM_USAGE_SINCE = "2024-08-01-preview"
"""The first api-version that takes `stream_options.include_usage` (dates compare as text;
`-preview` sorts after its date)."""
_API_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}(-preview)?")
_DEPLOYMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_PREFIX = "/openai/deployments/"
_OPERATIONS = {
    openai.CHAT: "/chat/completions",
    openai.COMPLETIONS: "/completions",
    openai.EMBEDDINGS: "/embeddings",
}


API_KEY = KeyHeader("api-key")
"""`openai.AzureOpenAI`'s key header."""


class AzureOpenAI(ProviderKind):
    name = "azure-openai"
    forwarded_headers = openai.OpenAI.forwarded_headers
    relayed_headers = openai.OpenAI.relayed_headers
    # its callers use OpenAI's SDKs: on OpenAI's paths with a bearer token, or `AzureOpenAI`
    # on Azure's own deployment paths with the key in `api-key`
    caller_key_headers = (openai.BEARER, API_KEY)
    endpoints = tuple(_OPERATIONS)
    errors = ErrorVocabulary(
        account=COMMON_ERRORS.account,
        model_not_found=COMMON_ERRORS.model_not_found | {"deploymentnotfound"},
        overloaded=COMMON_ERRORS.overloaded,
        rate_limited=COMMON_ERRORS.rate_limited,
    )
    input_includes_cache = True
    option_fields = frozenset({"api_version"})
    caller_prefix = _PREFIX

    def quota_buckets(
        self, headers: Mapping[str, str], now: float
    ) -> Mapping[QuotaDimension, Bucket]:
        # Azure's own variant: often only the two `remaining` headers, no limit or reset
        return openai_buckets(headers, now)

    def credential_headers(self, secret: str) -> tuple[tuple[str, str], ...]:
        return (("api-key", secret),)

    def default_headers(self) -> tuple[tuple[str, str], ...]:
        return ()

    def options(self, entry: Mapping[object, object]) -> Mapping[str, str]:
        version = entry.get("api_version", DEFAULT_API_VERSION)
        if not isinstance(version, str) or not _API_VERSION.fullmatch(version):
            raise OptionError("api_version", "must be a date such as 2024-10-21 (or -preview)")
        return {"api_version": version}

    def ask_usage(
        self, endpoint: Endpoint, body: dict[str, Any], options: Mapping[str, str]
    ) -> bool:
        """Azure accepts `stream_options` from api-version `STREAM_USAGE_SINCE` on and refuses
        the request (400 `unknown_parameter`) before it: an older account is not asked, and its
        streams are charged an estimate."""
        if options.get("api_version", DEFAULT_API_VERSION) < STREAM_USAGE_SINCE:
            return False
        return super().ask_usage(endpoint, body, options)

    def served_problem(self, served_model: str) -> str | None:
        if _DEPLOYMENT.fullmatch(served_model):
            return None
        return "the served name is the deployment: letters, digits, '.', '_', '-' (≤ 64)"

    def upstream_path(
        self, endpoint: Endpoint, served_model: str, options: Mapping[str, str]
    ) -> str:
        version = quote(options.get("api_version", DEFAULT_API_VERSION), safe="")
        return f"{_PREFIX}{served_model}{_OPERATIONS[endpoint]}?api-version={version}"

    def caller_route(self, path: str) -> UpstreamRoute | None:
        """`openai.AzureOpenAI` pointed at the proxy sends the upstream's own paths: the
        deployment segment names the requested model (its `api-version` is not read: the
        account's is sent)."""
        return self.upstream_route(path)

    def upstream_route(self, path: str) -> UpstreamRoute | None:
        if not path.startswith(_PREFIX):
            return None
        deployment, _, operation = path[len(_PREFIX) :].partition("/")
        for endpoint, suffix in _OPERATIONS.items():
            if "/" + operation == suffix and deployment:
                return UpstreamRoute(endpoint, deployment)
        return None

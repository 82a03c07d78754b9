"""A proxied request as two values and the one evidence row they make.

`Admission` is what admission (proxy/forward.py) decided: the key, its account, the endpoint,
what the body asked for, the health trial, the quota hold and the request slot it took; a
refused request's admission holds what was known when it was refused. `Ended` is how the
request ended: what was observed (the classifier's only input) and what the upstream's answer
carried. Neither changes once made; `ProxyRuntime.finish(admission, ended)` classifies the
observation once and builds the row with `evidence_row`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from types import MappingProxyType
from typing import TYPE_CHECKING

from leasegate.accounts import Account
from leasegate.core.observation import Classification, Observation
from leasegate.core.ports.health import Admitted
from leasegate.core.ports.quota import Bucket, QuotaDimension
from leasegate.core.records import EvidenceRow, KeyRecord
from leasegate.core.text import MODEL_NAME_MAX, safe_optional
from leasegate.providers import COMMON_ERRORS, Endpoint, ErrorVocabulary, Usage
from leasegate.routing.quota import Estimate

if TYPE_CHECKING:
    from leasegate.proxy.spans import RequestTrace

NO_BUCKETS: Mapping[QuotaDimension, Bucket] = MappingProxyType({})
NO_USAGE = Usage()


@dataclass(frozen=True, slots=True)
class Admission:
    """What admission decided of one request, admitted or refused (a refused one's fields past
    the step that refused it keep their defaults)."""

    request_id: str
    endpoint: Endpoint
    started_at: datetime
    started_mono: float
    trace: RequestTrace | None = None
    """Its span, when tracing is on (proxy/tracing.py); None costs nothing."""
    key_id: str | None = None
    """The presented key's id, once it parsed."""
    key: KeyRecord | None = None
    """The key's record, once resolved (a revoked or expired key's too)."""
    account: Account | None = None
    """The key's account, once known to be configured: its kind classifies the failures and
    names the answer headers the caller receives."""
    requested_model: str | None = None
    stream: bool = False
    body_bytes: int = 0
    """The caller's request body's size: a usage estimate's input (leasegate.providers.estimate)."""
    strip_usage: bool = False
    """The proxy asked the upstream for the stream's usage: the caller did not, and does not
    receive the event that carries it."""
    trial: Admitted | None = None
    """Set when the health store let this request through as a half-open trial."""
    quota_cost: Estimate | None = None
    """What the quota view let this request through at (None: nothing known of the pair)."""
    slot: str | None = None
    """The account whose request slot this request holds (None: it holds none)."""

    @property
    def errors(self) -> ErrorVocabulary:
        """The error vocabulary of the key's account's kind (what classifies its failures)."""
        account = self.account
        return COMMON_ERRORS if account is None else account.kind.errors


@dataclass(frozen=True, slots=True)
class Ended:
    """How a request ended: the observation, and what the upstream's answer (if any) carried."""

    observation: Observation
    status: int | None = None
    """The upstream's status, when its headers arrived."""
    first_byte_mono: float | None = None
    """When the upstream's headers arrived (monotonic)."""
    quota_buckets: Mapping[QuotaDimension, Bucket] = field(default_factory=lambda: NO_BUCKETS)
    """The rate-limit buckets the upstream's answer headers stated (empty: none)."""
    usage: Usage = NO_USAGE
    malformed_chunks: int = 0


def evidence_row(
    admission: Admission,
    ended: Ended,
    classification: Classification,
    ended_mono: float,
    cost: Decimal | None,
) -> EvidenceRow:
    """The request's one terminal evidence row."""
    key = admission.key
    started_mono = admission.started_mono
    first_byte_ms = None
    if ended.first_byte_mono is not None:
        first_byte_ms = round((ended.first_byte_mono - started_mono) * 1000, 3)
    observation, usage = ended.observation, ended.usage
    return EvidenceRow(
        request_id=admission.request_id,
        key_id=admission.key_id,
        mint_decision_id=key.mint_decision_id if key else None,
        account_id=key.account_id if key else None,
        # A refused body's model is kept only as a safe, bounded echo (see core.text).
        requested_model=safe_optional(admission.requested_model, MODEL_NAME_MAX),
        served_model=key.served_model if key else None,
        endpoint=admission.endpoint.path,
        stream=admission.stream,
        upstream_status=ended.status,
        outcome=classification.outcome,
        refusal_reason=observation.refusal_code,
        error_code=_error_code(classification),
        scope=classification.scope,
        qualifying=classification.qualifying,
        input_tokens=_count(usage.input_tokens),
        output_tokens=_count(usage.output_tokens),
        cache_read_input_tokens=_count(usage.cache_read_input_tokens),
        cache_creation_input_tokens=_count(usage.cache_creation_input_tokens),
        started_at=admission.started_at,
        first_byte_ms=first_byte_ms,
        duration_ms=round((ended_mono - started_mono) * 1000, 3),
        malformed_chunks=ended.malformed_chunks,
        cost=cost,
        usage_estimated=usage.estimated,
        retry_after_ms=_milliseconds(observation.retry_after_s),
    )


def _milliseconds(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


_ERROR_CODE_MAX = 200
_INT32_MAX = 2**31 - 1


def _error_code(classification: Classification) -> str | None:
    """The classification reason, which may name an upstream's own error code: bounded and
    free of NUL and lone surrogates, so no upstream payload can make the row unwritable."""
    if classification.outcome == "success":
        return None
    return safe_optional(classification.reason, _ERROR_CODE_MAX)


def _count(value: int | None) -> int | None:
    """A token count as the upstream reported it; one that cannot fit the column is unknown."""
    if value is None or 0 <= value <= _INT32_MAX:
        return value
    return None

"""One proxied request's facts, gathered as it runs and turned into its one evidence row."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from leasegate.core.observation import Classification, Observation
from leasegate.core.ports.health import Admitted
from leasegate.core.ports.quota import Bucket, QuotaDimension
from leasegate.core.records import EvidenceRow, KeyRecord
from leasegate.core.text import MODEL_NAME_MAX, safe_optional
from leasegate.providers import COMMON_ERRORS, ErrorVocabulary, Usage
from leasegate.routing.quota import Estimate

if TYPE_CHECKING:
    from leasegate.proxy.spans import RequestTrace


@dataclass(slots=True)
class Attempt:
    request_id: str
    endpoint: str
    started_at: datetime
    started_mono: float
    key_id: str | None = None
    key: KeyRecord | None = None
    requested_model: str | None = None
    stream: bool = False
    upstream_status: int | None = None
    first_byte_mono: float | None = None
    usage: Usage = field(default_factory=Usage)
    malformed_chunks: int = 0
    body_bytes: int = 0
    """The caller's request body's size: a usage estimate's input (leasegate.providers.estimate)."""
    strip_usage: bool = False
    """The proxy asked the upstream for the stream's usage: the caller did not, and does not
    receive the event that carries it."""
    slot_account: str | None = None
    health_trial: Admitted | None = None
    """Set when the health store let this request through as a half-open trial."""
    """Set while this attempt holds a request slot on that account."""
    feeds_health: bool = True
    """False for an endpoint that is not a completion (see Endpoint.completion)."""
    quota_cost: Estimate | None = None
    """What the quota view let this request through at (None: nothing known of the pair)."""
    quota_buckets: Mapping[QuotaDimension, Bucket] = field(default_factory=dict)
    """The rate-limit buckets the upstream's answer headers stated (empty: none)."""
    quota_hold_until: float | None = None
    """Set when the answer was a rate limit: the pair takes nothing until then."""
    errors: ErrorVocabulary = COMMON_ERRORS
    """The error vocabulary of the key's account's kind (what classifies its failures)."""
    relayed_headers: tuple[str, ...] = ()
    """The upstream answer's headers the caller receives (its account's kind's)."""
    finished: bool = False
    """Its row is queued or written: `ProxyRuntime.finish` has run."""
    trace: RequestTrace | None = None
    """Its span, when tracing is on (proxy/tracing.py); None costs nothing."""

    def evidence(
        self,
        observation: Observation,
        classification: Classification,
        ended_mono: float,
        cost: Decimal | None = None,
    ) -> EvidenceRow:
        key = self.key
        first_byte_ms = None
        if self.first_byte_mono is not None:
            first_byte_ms = round((self.first_byte_mono - self.started_mono) * 1000, 3)
        return EvidenceRow(
            request_id=self.request_id,
            key_id=self.key_id,
            mint_decision_id=key.mint_decision_id if key else None,
            account_id=key.account_id if key else None,
            # A refused body's model is kept only as a safe, bounded echo (see core.text).
            requested_model=safe_optional(self.requested_model, MODEL_NAME_MAX),
            served_model=key.served_model if key else None,
            endpoint=self.endpoint,
            stream=self.stream,
            upstream_status=self.upstream_status,
            outcome=classification.outcome,
            refusal_reason=observation.refusal_code,
            error_code=_error_code(classification),
            scope=classification.scope,
            qualifying=classification.qualifying,
            input_tokens=_count(self.usage.input_tokens),
            output_tokens=_count(self.usage.output_tokens),
            cache_read_input_tokens=_count(self.usage.cache_read_input_tokens),
            cache_creation_input_tokens=_count(self.usage.cache_creation_input_tokens),
            started_at=self.started_at,
            first_byte_ms=first_byte_ms,
            duration_ms=round((ended_mono - self.started_mono) * 1000, 3),
            malformed_chunks=self.malformed_chunks,
            cost=cost,
            usage_estimated=self.usage.estimated,
        )


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

"""Idempotent mint: one `Idempotency-Key` names one decision per tenant, forever.

A replay with the same body answers with that decision again: 200 and the mint view with
`key: null` for a selected one (the secret was shown once and is not stored), the same refusal
for a refused one. The same key with a different body is `422 idempotency-key-reused`. This is
how a caller that lost a mint response finds its decision, then revokes and supersedes it.
"""

from __future__ import annotations

import hashlib
import json

from leasegate.control_plane.decision import Refusal, Start, without_idempotency
from leasegate.control_plane.deps import MintDeps
from leasegate.control_plane.hops import HOLD_RETRY_AFTER_S
from leasegate.control_plane.views import mint_view
from leasegate.core.errors import GatewayError
from leasegate.core.records import MintDecision
from leasegate.routing.selection import cooldown_scope
from leasegate.wire import MintAnswer, MintBody

# The mint body's fields when fingerprints were first stored. They are always part of the
# canonical form (defaults filled in), so every fingerprint already in a decision row still
# matches its replay. A field added since counts only when it is set: a new optional field
# never changes the fingerprint of a body that does not use it, so a replay that spans the
# deploy adding it still matches.
_FIRST_FIELDS = frozenset(
    {
        "tenant",
        "dispatch_id",
        "model",
        "role",
        "ttl_s",
        "retry_of_mint_decision_id",
        "supersedes_mint_decision_id",
        "budget",
    }
)


def fingerprint(body: MintBody) -> str:
    """A digest of the canonical body: defaults filled in, keys sorted, so `"ttl_s": null`
    and an omitted `ttl_s` are the same request."""
    fields = body.model_dump()
    defaults = {name: info.get_default() for name, info in type(body).model_fields.items()}
    canonical_fields = {
        name: value
        for name, value in fields.items()
        if name in _FIRST_FIELDS or value != defaults.get(name)
    }
    canonical = json.dumps(canonical_fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


async def replay(deps: MintDeps, start: Start, earlier: MintDecision) -> MintAnswer | Refusal:
    """The earlier decision's answer again (its refusal raised as it was, not recorded
    again), or the refusal `idempotency-key-reused` for the mint to record."""
    if earlier.request_fingerprint != start.fingerprint:
        return Refusal(
            without_idempotency(start),
            GatewayError(
                "idempotency-key-reused",
                "this Idempotency-Key was used with a different request body",
                extra={"original_mint_decision_id": earlier.id},
            ),
        )
    if earlier.outcome == "selected" and earlier.key_id is not None:
        key = await deps.store.get_key(earlier.key_id)
        if key is not None:
            return mint_view(earlier, None, key)
    code = earlier.refusal_code or "internal"
    raise GatewayError(
        code,
        f"replay of an earlier refused mint ({code})",
        passed_over=earlier.passed_over,
        cooldown_scope=cooldown_scope(earlier.passed_over)
        if code == "no-eligible-account"
        else None,
        retry_after_s=HOLD_RETRY_AFTER_S.get(code),
        mint_decision_id=earlier.id,
    )

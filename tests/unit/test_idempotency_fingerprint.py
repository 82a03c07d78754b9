"""The mint's idempotency fingerprint: the same request is the same fingerprint across a
deploy that adds an optional field to the mint body, and every fingerprint stored before
that rule still matches its replay."""

from __future__ import annotations

import hashlib
import json

from leasegate.control_plane.idempotency import fingerprint
from leasegate.wire import MintBody

BODY = {"tenant": "acme", "dispatch_id": "d-1", "model": "gpt-4o"}


class MintBodyWithANewField(MintBody):
    """The mint body as a later release might take it: one more optional field."""

    priority: int | None = None


def test_a_new_optional_field_left_out_keeps_the_fingerprint() -> None:
    before = fingerprint(MintBody.model_validate(BODY))
    after = fingerprint(MintBodyWithANewField.model_validate(BODY))
    assert after == before


def test_a_new_field_that_is_set_changes_the_fingerprint() -> None:
    plain = fingerprint(MintBodyWithANewField.model_validate(BODY))
    with_priority = fingerprint(MintBodyWithANewField.model_validate({**BODY, "priority": 2}))
    assert with_priority != plain


def test_fingerprints_stored_before_the_rule_still_match() -> None:
    """Rows written by earlier releases hold the digest of the whole body, defaults filled
    in; the fields those releases knew hash the same way now."""
    body = MintBody.model_validate({**BODY, "ttl_s": 60})
    first_fields = {
        name: value
        for name, value in body.model_dump().items()
        if name
        in {
            "tenant",
            "dispatch_id",
            "model",
            "role",
            "ttl_s",
            "retry_of_mint_decision_id",
            "supersedes_mint_decision_id",
            "budget",
        }
    }
    stored = hashlib.sha256(
        json.dumps(first_fields, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    assert fingerprint(body) == stored


def test_an_explicit_null_is_the_same_request_as_an_omitted_field() -> None:
    omitted = fingerprint(MintBody.model_validate(BODY))
    explicit = fingerprint(MintBody.model_validate({**BODY, "ttl_s": None, "budget": None}))
    assert explicit == omitted

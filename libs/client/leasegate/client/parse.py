"""JSON bodies of the control plane -> the frozen records (`leasegate.wire`). Pure: no I/O.

Each body is read by the wire model the control plane declares for it. A missing field or a
wrong type raises pydantic's `ValidationError` (a `ValueError`); `wire.outcome` turns it into
one `ProtocolError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leasegate.client.records import Accounts, Decision, Evidence, KeyInfo, Minted
from leasegate.wire import Account, AccountRead, DecisionList, EvidenceList

Json = Mapping[str, Any]


def minted(status: int, body: Json) -> Minted:
    """A mint's or a renewal's answer; a 200 is the replay of an earlier mint."""
    return Minted.model_validate({**body, "replayed": status == 200})


def key_info(body: Json) -> KeyInfo:
    return KeyInfo.model_validate(body)


def evidence_list(body: Json) -> tuple[Evidence, ...]:
    return EvidenceList.model_validate(body).evidence


def decision(body: Json) -> Decision:
    return Decision.model_validate(body)


def decision_list(body: Json) -> tuple[Decision, ...]:
    return DecisionList.model_validate(body).decisions


def accounts(body: Json) -> Accounts:
    """`{"accounts": [...], "revision", "chain"}`, or one account with revision and chain
    (GET /accounts/{id}, and the admin state change's answer), as a one-account list."""
    if isinstance(body, Mapping) and "accounts" in body:
        return Accounts.model_validate(body)
    one = AccountRead.model_validate(body)
    return Accounts(
        accounts=(Account.model_validate(body),), revision=one.revision, chain=one.chain
    )

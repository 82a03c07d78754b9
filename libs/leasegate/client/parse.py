"""JSON bodies of the control plane -> the frozen records. Pure: no I/O.

A missing field or a wrong type raises KeyError/TypeError/ValueError; `wire.outcome` turns
those into one `ProtocolError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from leasegate.client.records import (
    Account,
    Accounts,
    Circuit,
    Cooling,
    Decision,
    DecisionKind,
    Evidence,
    KeyInfo,
    KeyState,
    Minted,
    PassOver,
)

Json = Mapping[str, Any]


def time(value: object) -> datetime:
    if not isinstance(value, str):
        raise TypeError(f"expected a time, got {type(value).__name__}")
    at = datetime.fromisoformat(value)
    if at.tzinfo is None:
        raise ValueError(f"time without a timezone: {value!r}")
    return at


def _int_or_none(value: object) -> int | None:
    if value is None or isinstance(value, int):
        return value
    raise TypeError(f"expected an integer or null, got {type(value).__name__}")


def _time_or_none(value: object) -> datetime | None:
    return None if value is None else time(value)


def passed_over(value: object) -> tuple[PassOver, ...]:
    rows = cast("Sequence[Json]", value or ())
    return tuple(PassOver(str(p["account_id"]), str(p["code"])) for p in rows)


def minted(status: int, body: Json) -> Minted:
    return Minted(
        key=body["key"],
        key_id=body["key_id"],
        mint_decision_id=body["mint_decision_id"],
        account_id=body["account_id"],
        model=body["model"],
        served_model=body["served_model"],
        fallback_position=int(body["fallback_position"]),
        hop=int(body["hop"]),
        expires_at=time(body["expires_at"]),
        passed_over=passed_over(body.get("passed_over")),
        replayed=status == 200,
    )


def key_info(body: Json) -> KeyInfo:
    return KeyInfo(
        key_id=body["key_id"],
        state=cast("KeyState", body["state"]),
        mint_decision_id=body["mint_decision_id"],
        tenant=body["tenant"],
        dispatch_id=body["dispatch_id"],
        account_id=body["account_id"],
        model=body["model"],
        served_model=body["served_model"],
        created_at=time(body["created_at"]),
        expires_at=time(body["expires_at"]),
        revoked_at=_time_or_none(body.get("revoked_at")),
        revoke_reason=body.get("revoke_reason"),
    )


def evidence(row: Json) -> Evidence:
    return Evidence(
        request_id=row["request_id"],
        key_id=row.get("key_id"),
        mint_decision_id=row.get("mint_decision_id"),
        account_id=row.get("account_id"),
        requested_model=row.get("requested_model"),
        served_model=row.get("served_model"),
        endpoint=row["endpoint"],
        stream=bool(row["stream"]),
        upstream_status=row.get("upstream_status"),
        outcome=row["outcome"],
        refusal_reason=row.get("refusal_reason"),
        error_code=row.get("error_code"),
        scope=row.get("scope"),
        qualifying=bool(row["qualifying"]),
        input_tokens=row.get("input_tokens"),
        output_tokens=row.get("output_tokens"),
        started_at=_time_or_none(row.get("started_at")),
        first_byte_ms=row.get("first_byte_ms"),
        duration_ms=row.get("duration_ms"),
    )


def evidence_list(body: Json) -> tuple[Evidence, ...]:
    return tuple(evidence(row) for row in body["evidence"])


def decision(body: Json) -> Decision:
    lineage: Json = body["lineage"]
    return Decision(
        mint_decision_id=body["mint_decision_id"],
        created_at=time(body["created_at"]),
        tenant=lineage["tenant"],
        dispatch_id=lineage["dispatch_id"],
        model=lineage["model"],
        role=body.get("role"),
        kind=cast("DecisionKind", body["kind"]),
        outcome=body["outcome"],
        refusal_code=body.get("refusal_code"),
        account_id=body.get("account_id"),
        served_model=body.get("served_model"),
        fallback_position=body.get("fallback_position"),
        hop=int(body["hop"]),
        passed_over=passed_over(body.get("passed_over")),
        key_id=body.get("key_id"),
        retry_of_mint_decision_id=body.get("retry_of_mint_decision_id"),
        supersedes_mint_decision_id=body.get("supersedes_mint_decision_id"),
        renews_mint_decision_id=body.get("renews_mint_decision_id"),
        successor_mint_decision_id=body.get("successor_mint_decision_id"),
        authorised_by_request_id=body.get("authorised_by_request_id"),
        evidence=tuple(evidence(row) for row in body.get("evidence", ())),
    )


def decision_list(body: Json) -> tuple[Decision, ...]:
    return tuple(decision(d) for d in body["decisions"])


def account(body: Json) -> Account:
    circuit: Json = body.get("circuit") or {}
    return Account(
        id=body["id"],
        provider=body["provider"],
        configured=bool(body["configured"]),
        admin_state=body["admin_state"],
        health=body["health"],
        cooling_models=tuple(
            Cooling(c["model"], time(c["until"]), c.get("reason"), int(c.get("trips", 0)))
            for c in body.get("cooling_models", ())
        ),
        circuit=Circuit(
            bool(circuit.get("open", False)),
            _time_or_none(circuit.get("until")),
            circuit.get("reason"),
        ),
        leases_held=int(body["leases_held"]),
        lease_capacity=body.get("lease_capacity"),
        requests_in_flight=_int_or_none(body.get("requests_in_flight")),
        request_capacity=body.get("request_capacity"),
    )


def accounts(body: Json) -> Accounts:
    """`{"accounts": [...], "revision", "chain"}`, or one account with revision and chain
    (GET /accounts/{id}, and the admin state change's view)."""
    if "accounts" in body:
        listed = tuple(account(a) for a in body["accounts"])
    else:
        listed = (account(body),)
    return Accounts(listed, int(body.get("revision", 0)), body.get("chain", "absent"))

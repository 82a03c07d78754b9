"""Stored strings: any text a caller or an upstream sends becomes one every driver can write,
and the proxy's body rules refuse what cannot be taken as given (issue 10)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasegate.core.errors import GatewayError
from leasegate.core.text import MODEL_NAME_MAX, safe_text, text_problem
from leasegate.proxy.body import encode_body, model_problem, parse_body

ANY_TEXT = st.text(st.characters(codec=None, categories=None), max_size=400)


@given(ANY_TEXT, st.integers(min_value=1, max_value=300))
def test_safe_text_is_always_storable(value: str, limit: int) -> None:
    cleaned = safe_text(value, limit)
    cleaned.encode("utf-8")  # no lone surrogate left
    assert "\x00" not in cleaned
    assert len(cleaned) <= limit
    if text_problem(value, limit) is None:
        assert cleaned == value  # a good value is kept exactly


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("gpt-x\x00", "control character"),
        ("gpt-x\ud800", "lone surrogate"),
        ("m" * 201, "longer than 200"),
        ("gpt-4o\r\n", "control character"),
    ],
)
def test_unstorable_models_are_refused_without_echo(value: str, problem: str) -> None:
    refusal = model_problem(value)
    assert refusal is not None
    assert refusal.code == "invalid-request"
    assert problem in refusal.message
    assert "gpt-x" not in refusal.message


def test_good_model_names_pass() -> None:
    assert model_problem("gpt-4o") is None
    assert model_problem("x" * MODEL_NAME_MAX) is None
    assert model_problem("openai/gpt-4o:beta é") is None


def _round_trip_status(raw: bytes) -> int:
    """200 when the body parses and re-encodes with its model intact, else the refusal's."""
    try:
        body = parse_body(raw)
        encoded = encode_body(body.fields)
    except GatewayError as refused:
        return refused.status
    return 200 if json.loads(encoded)["model"] == "m" else 500


@given(st.integers(min_value=1, max_value=200_000))
def test_any_nesting_depth_is_a_400_or_parses(depth: int) -> None:
    raw = b'{"model": "m", "x": ' + b"[" * depth + b"]" * depth + b"}"
    assert _round_trip_status(raw) in (200, 400)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "m", "t": NaN}',
        b'{"model": "m", "t": Infinity}',
        b'{"model": "m\xff"}',
        '{"model": "m"}'.encode("utf-16"),
        b'{"model": "m", "stream": "yes"}',
        b'{"model": "m", "stream": null}',
        b"[]",
    ],
)
def test_strict_body_rules(raw: bytes) -> None:
    with pytest.raises(GatewayError) as refused:
        parse_body(raw)
    assert refused.value.status == 400


def test_duplicate_keys_last_wins_and_reencode_once() -> None:
    body = parse_body(b'{"model": "a", "model": "b", "stream": true}')
    assert (body.model, body.stream) == ("b", True)
    assert encode_body(body.fields).count(b'"model"') == 1


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "m", "seed": 123456789012345678901234567890}',
        b'{"model": "m", "t": "\\ud800 lone"}',
        b'{"model": "m", "t": "caf\\u00e9 \xe2\x9c\x93", "p": 0.1, "n": -0.0, "e": 1e-07}',
        b'{"model": "m", "x": ' + b"[" * 400 + b"]" * 400 + b"}",
    ],
)
def test_the_upstream_reads_the_values_the_caller_sent(raw: bytes) -> None:
    """Re-encoded (orjson, or the standard library where orjson refuses: an integer past 64
    bits, a lone surrogate, deep nesting), the body holds exactly the values parsed."""
    body = parse_body(raw)
    assert json.loads(encode_body(body.fields)) == json.loads(raw)

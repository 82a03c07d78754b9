from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from leasegate.keys import hash_secret, new_key, parse_key, secret_matches


def test_a_new_key_parses_back_and_matches_only_its_hash() -> None:
    token, parsed = new_key()
    assert token.startswith(f"lg_{parsed.key_id}_")
    again = parse_key(token)
    assert again == parsed
    assert secret_matches(parsed.secret, hash_secret(parsed.secret))
    _, other = new_key()
    assert not secret_matches(other.secret, hash_secret(parsed.secret))
    assert parsed.secret not in repr(parsed)


@given(st.text(max_size=120))
def test_arbitrary_tokens_never_crash_the_parser(token: str) -> None:
    parsed = parse_key(token)
    assert parsed is None or token == f"lg_{parsed.key_id}_{parsed.secret}"


def test_malformed_tokens_are_refused() -> None:
    token, parsed = new_key()
    for bad in ("", "lg_", token[:-1], token.replace("lg_", "sk_"), f"lg_{parsed.key_id}"):
        assert parse_key(bad) is None

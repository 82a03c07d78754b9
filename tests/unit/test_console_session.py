"""Console session cookies: signed, expiring, and refused whole when anything is off."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from leasegate.control_plane.console.session import (
    csrf_matches,
    new_session,
    seal,
    unseal,
)

SECRET = b"s" * 32


def test_a_sealed_session_reads_back_until_it_expires() -> None:
    session = new_session("admin", "ops-alice", "cred", now=1000.0, ttl_s=60)
    cookie = seal(session, SECRET)
    assert unseal(cookie, SECRET, now=1059.0) == session
    assert unseal(cookie, SECRET, now=1060.0) is None


def test_another_secret_or_an_edited_payload_is_refused() -> None:
    cookie = seal(new_session("control", "control", "cred", now=0.0, ttl_s=60), SECRET)
    assert unseal(cookie, b"t" * 32, now=1.0) is None
    payload, signature = cookie.split(".")
    raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    promoted = raw.replace(b'"control"', b'"admin"', 1)
    forged = base64.urlsafe_b64encode(promoted).rstrip(b"=").decode()
    assert unseal(f"{forged}.{signature}", SECRET, now=1.0) is None


@given(st.text(max_size=300))
def test_any_garbage_cookie_is_no_session(cookie: str) -> None:
    assert unseal(cookie, SECRET, now=0.0) is None


def test_the_csrf_token_must_match_exactly() -> None:
    session = new_session("admin", "ops-alice", "cred", now=0.0, ttl_s=60)
    assert csrf_matches(session, session.csrf)
    assert not csrf_matches(session, None)
    assert not csrf_matches(session, session.csrf + "x")
    assert new_session("admin", "ops-alice", "cred", now=0.0, ttl_s=60).csrf != session.csrf

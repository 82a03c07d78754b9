"""Console sessions: a cookie the server signs, so the page never holds a token.

The cookie is `base64url(payload) . base64url(HMAC-SHA256(secret, payload))`, where the payload
names the caller (kind and token name, never the token), the credential it signed in with (a
keyed fingerprint of the token, `TokenAuthority.credentials`), a random session id, when the
session ends, and the session's CSRF token. A session is valid while its signature verifies,
its expiry is in the future, its credential is still configured, and the shared store still
holds it open (`leasegate.core.ports.sessions`: signing out closes it for every replica). The
secret is `LEASEGATE_CONSOLE_SECRET` or, unset, random per process (a restart then signs
everyone out, and replicas do not share sessions).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Literal

COOKIE_NAME = "leasegate_console"


@dataclass(frozen=True, slots=True)
class Session:
    kind: Literal["control", "admin"]
    """`admin` may act on accounts; `control` only reads."""
    name: str
    """The admin token's configured name (the recorded actor), or `control`."""
    expires_at: float
    """Epoch seconds."""
    csrf: str
    """Every state-changing form must echo this back."""
    session_id: str
    """Random: names the session in the shared store of open sessions."""
    credential: str
    """The keyed fingerprint of the token the session was opened with."""

    @property
    def can_act(self) -> bool:
        return self.kind == "admin"


def new_session(
    kind: Literal["control", "admin"], name: str, credential: str, now: float, ttl_s: float
) -> Session:
    return Session(
        kind, name, now + ttl_s, secrets.token_urlsafe(24), secrets.token_urlsafe(16), credential
    )


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(session: Session, secret: bytes) -> str:
    payload = json.dumps(
        {
            "k": session.kind,
            "n": session.name,
            "e": session.expires_at,
            "c": session.csrf,
            "s": session.session_id,
            "t": session.credential,
        },
        separators=(",", ":"),
    ).encode()
    signature = hmac.new(secret, payload, hashlib.sha256).digest()
    return f"{_b64(payload)}.{_b64(signature)}"


def unseal(cookie: str | None, secret: bytes, now: float) -> Session | None:
    """The session, or None for a missing, forged, malformed or expired cookie."""
    if not cookie or cookie.count(".") != 1:
        return None
    encoded, sent = cookie.split(".")
    try:
        payload = _unb64(encoded)
        signature = _unb64(sent)
    except (binascii.Error, ValueError):
        return None
    if not hmac.compare_digest(hmac.new(secret, payload, hashlib.sha256).digest(), signature):
        return None
    try:
        fields = json.loads(payload)
        session = Session(
            fields["k"], fields["n"], float(fields["e"]), fields["c"], fields["s"], fields["t"]
        )
    except (ValueError, KeyError, TypeError):
        return None
    if session.kind not in ("control", "admin") or session.expires_at <= now:
        return None
    if not all(isinstance(v, str) for v in (session.csrf, session.session_id, session.credential)):
        return None
    return session


def csrf_matches(session: Session, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(session.csrf.encode(), presented.encode())

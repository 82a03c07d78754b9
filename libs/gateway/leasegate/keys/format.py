"""Key format and hashing.

The secret is 256 random bits, so a fast hash is the right tool: there is nothing to brute
force, and resolving a key stays cheap. SHA-256 of the secret is what is stored; compares are
constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

PREFIX = "lg"
_KEY_ID = re.compile(r"k[0-9a-f]{24}")
_SECRET = re.compile(r"[A-Za-z0-9_-]{43}")


@dataclass(frozen=True, slots=True)
class ParsedKey:
    key_id: str
    secret: str

    def __repr__(self) -> str:  # never let a secret reach a log through repr
        return f"ParsedKey(key_id={self.key_id!r}, secret=<redacted>)"


def new_key() -> tuple[str, ParsedKey]:
    """A fresh key: the full token for the caller (shown once) and its parts."""
    parsed = ParsedKey(f"k{secrets.token_hex(12)}", secrets.token_urlsafe(32))
    return f"{PREFIX}_{parsed.key_id}_{parsed.secret}", parsed


def parse_key(token: str) -> ParsedKey | None:
    """Split a presented token; None when it is not shaped like a Leasegate key."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != PREFIX:
        return None
    key_id, secret = parts[1], parts[2]
    if not _KEY_ID.fullmatch(key_id) or not _SECRET.fullmatch(secret):
        return None
    return ParsedKey(key_id, secret)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)

"""Bearer-token checks for the control plane, in constant time."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import SecretStr

from leasegate.core.errors import GatewayError


@dataclass(frozen=True, slots=True)
class Caller:
    kind: Literal["control", "admin"]
    name: str
    """`control` for the control token; the admin token's configured name otherwise."""


class TokenAuthority:
    def __init__(self, control_token: SecretStr | None, admin_tokens: Mapping[str, SecretStr]):
        self._control = control_token.get_secret_value().encode() if control_token else None
        self._admins = [(n, t.get_secret_value().encode()) for n, t in admin_tokens.items()]

    def authenticate(self, authorization: str | None) -> Caller:
        token = _bearer(authorization)
        if token is None:
            raise GatewayError("unauthenticated", "missing bearer token")
        presented = token.encode()
        # Compare against every token, always, so timing says nothing about which matched.
        matched: Caller | None = None
        if self._control is not None and hmac.compare_digest(presented, self._control):
            matched = Caller("control", "control")
        for name, admin in self._admins:
            if hmac.compare_digest(presented, admin) and matched is None:
                matched = Caller("admin", name)
        if matched is None:
            raise GatewayError("unauthenticated", "invalid bearer token")
        return matched

    def credentials(self, key: bytes) -> dict[tuple[str, str], str]:
        """Each configured token's fingerprint under `key` (the console's secret), by (kind,
        name): what a console session records instead of the token. A token changed under
        the same name, or another key, gives another fingerprint; the token cannot be
        recovered from it."""
        tokens = [("admin", name, token) for name, token in self._admins]
        if self._control is not None:
            tokens.append(("control", "control", self._control))
        return {(kind, name): _fingerprint(key, kind, name, token) for kind, name, token in tokens}


def _fingerprint(key: bytes, kind: str, name: str, token: bytes) -> str:
    message = b"\0".join((b"leasegate-console-credential", kind.encode(), name.encode(), token))
    digest = hmac.new(key, message, hashlib.sha256).digest()[:18]
    return base64.urlsafe_b64encode(digest).decode()


def require_admin(caller: Caller) -> Caller:
    if caller.kind != "admin":
        raise GatewayError("forbidden", "this route needs an admin token")
    return caller


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()

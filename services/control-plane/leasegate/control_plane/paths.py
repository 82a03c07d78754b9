"""Path and query values checked before any store sees them.

An id that cannot exist (wrong characters, NUL, longer than any id column) is answered
404 with the route's own not-found code, without a store call: a value no column can hold
never reaches the database. `since` must be an RFC 3339 time with a zone: a bare number is
not a time.
"""

from __future__ import annotations

import re
from datetime import datetime

from leasegate.core.errors import GatewayError
from leasegate.core.ids import RECORD_ID

_MESSAGES = {
    "key-not-found": "no such key",
    "decision-not-found": "no such decision",
    "account-not-found": "no such account",
}
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}:\d{2})"
)


def known_id(value: str, not_found_code: str) -> None:
    """Refuse, as not found, an id no row can carry."""
    if not RECORD_ID.fullmatch(value):
        raise GatewayError(not_found_code, _MESSAGES[not_found_code])


def parse_since(value: str | None) -> datetime | None:
    if value is None:
        return None
    if not _RFC3339.fullmatch(value):
        raise GatewayError(
            "invalid-request", "since must be an RFC 3339 time with a zone (e.g. ...Z)"
        )
    try:
        return datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    except ValueError:
        raise GatewayError("invalid-request", "since is not a valid time") from None

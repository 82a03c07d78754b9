"""Which of the caller's headers reach the upstream, and how much of them.

Only the account kind's allow-list is passed (`ProviderKind.forwarded_headers`, stated by
each kind in its module); everything else is dropped: the caller's own key (authorization,
x-api-key, x-goog-api-key), cookies, host, content-length, hop-by-hop headers, another
provider's headers, and headers that would pick a billing identity other than the
account's (openai-organization, openai-project). A value with a character a header may not
carry (CR, LF, NUL, other controls) is dropped too. The W3C `traceparent` and `tracestate`
are on no list: only an account with `propagate_trace` receives them, set by the proxy
(leasegate.proxy.tracing).

The forwarded headers are capped in total (`name: value\\r\\n`, in bytes): over the cap the
request is refused 431 `request-header-too-large` before anything is sent upstream. Without
the cap, a caller could send a header the upstream drops the connection on, and have that
counted against the account for every tenant.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from leasegate.core.errors import GatewayError

_HEADER_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]+")

HeaderPairs = Mapping[str, str] | Iterable[tuple[str, str]]


def forwarded_headers(
    caller_headers: HeaderPairs, allowed: frozenset[str]
) -> list[tuple[bytes, bytes]]:
    """The caller headers named in `allowed` (the kind's `forwarded_headers`) with valid
    values, as wire bytes (names lower-cased; Starlette decodes header bytes as latin-1, so
    they are re-encoded the same way)."""
    pairs = caller_headers.items() if isinstance(caller_headers, Mapping) else caller_headers
    forwarded: list[tuple[bytes, bytes]] = []
    for name, value in pairs:
        lowered = name.lower()
        if lowered in allowed and _HEADER_VALUE.fullmatch(value):
            forwarded.append((lowered.encode("ascii"), value.encode("latin-1")))
    return forwarded


def check_header_cap(caller_headers: HeaderPairs, allowed: frozenset[str], max_bytes: int) -> None:
    """Refuse 431 when `forwarded_headers` would add up to more than `max_bytes`."""
    forwarded = forwarded_headers(caller_headers, allowed)
    total = sum(len(name) + len(value) + 4 for name, value in forwarded)
    if total > max_bytes:
        raise GatewayError(
            "request-header-too-large",
            f"the forwarded request headers exceed {max_bytes} bytes",
        )

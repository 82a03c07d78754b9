"""The response headers the gateway itself sets, each name defined once: the proxy writes
them, the access log and the client read them (lower-case names)."""

from __future__ import annotations

REQUEST_ID_HEADER = "x-leasegate-request-id"
"""The request's id: its evidence row's `request_id`."""
ACCOUNT_HEADER = "x-leasegate-account"
"""The account the request was sent to."""
CONTEXT_FALLBACK_HEADER = "x-leasegate-context-fallback"
"""On an upstream's context-length error: the requested model a hop may switch to."""

"""A typed client for Leasegate: the control plane (`ControlClient`, `AsyncControlClient`),
one dispatch driven through the hop protocol (`Dispatch`), and plain-httpx proxy calls
(`post_json`, `stream_events`). See docs/client.md."""

from leasegate.client.control import AsyncControlClient, ControlClient
from leasegate.client.dispatch import TRANSPORT_FAILURES, Call, Dispatch
from leasegate.client.errors import (
    ControlUnreachable,
    DispatchFailed,
    GatewayRefusal,
    Held,
    LeasegateError,
    ProtocolError,
    ProxyFailure,
    Rejected,
)
from leasegate.client.failures import Verdict, classify_failure
from leasegate.client.proxy import post_json, stream_events
from leasegate.client.records import (
    Account,
    Accounts,
    Decision,
    DispatchResult,
    Evidence,
    KeyInfo,
    Link,
    Minted,
    PassOver,
)
from leasegate.wire import Budget

__all__ = [
    "TRANSPORT_FAILURES",
    "Account",
    "Accounts",
    "AsyncControlClient",
    "Budget",
    "Call",
    "ControlClient",
    "ControlUnreachable",
    "Decision",
    "Dispatch",
    "DispatchFailed",
    "DispatchResult",
    "Evidence",
    "GatewayRefusal",
    "Held",
    "KeyInfo",
    "LeasegateError",
    "Link",
    "Minted",
    "PassOver",
    "ProtocolError",
    "ProxyFailure",
    "Rejected",
    "Verdict",
    "classify_failure",
    "post_json",
    "stream_events",
]

"""Provider kinds behind one small interface (pure: no I/O).

`ProviderKind` and `Wire` are the seam (base.py); each kind lives in its own module, and
`KINDS` (kinds.py) names them all. The accounts file, the proxy, the failure classifier and
the demo upstream ask a kind or a wire; none of them names a provider. What the demo upstream
answers for each kind is the demo's own registry (leasegate.demo.examples).
"""

from leasegate.providers.base import (
    Endpoint,
    ErrorVocabulary,
    KeyHeader,
    OptionError,
    ProviderKind,
    StreamError,
    StreamFacts,
    UpstreamRoute,
    Usage,
    Wire,
)
from leasegate.providers.common import COMMON_ERRORS
from leasegate.providers.kinds import (
    ANY_KIND_ERRORS,
    CALLER_PREFIXES,
    ENDPOINTS,
    KEY_HEADER_NAMES,
    KEY_HEADERS,
    KINDS,
    WIRES,
    caller_route,
    error_names,
    kind_named,
    path_hint,
    presented_key,
    wire_named,
)

__all__ = [
    "ANY_KIND_ERRORS",
    "CALLER_PREFIXES",
    "COMMON_ERRORS",
    "ENDPOINTS",
    "KEY_HEADERS",
    "KEY_HEADER_NAMES",
    "KINDS",
    "WIRES",
    "Endpoint",
    "ErrorVocabulary",
    "KeyHeader",
    "OptionError",
    "ProviderKind",
    "StreamError",
    "StreamFacts",
    "UpstreamRoute",
    "Usage",
    "Wire",
    "caller_route",
    "error_names",
    "kind_named",
    "path_hint",
    "presented_key",
    "wire_named",
]

"""The gateway's own response headers are named once (leasegate.wire.headers): the proxy that
writes one and the client or access log that reads it cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

from leasegate.wire import headers

ROOT = Path(__file__).resolve().parents[2]


def test_each_gateway_header_name_is_spelt_in_one_module() -> None:
    names = [headers.REQUEST_ID_HEADER, headers.ACCOUNT_HEADER, headers.CONTEXT_FALLBACK_HEADER]
    literal = re.compile("|".join(rf"b?[\"']{re.escape(name)}[\"']" for name in names))
    homes = {
        path.relative_to(ROOT).as_posix()
        for folder in ("libs", "services")
        for path in (ROOT / folder).rglob("*.py")
        if literal.search(path.read_text())
    }
    assert homes == {"libs/core/leasegate/wire/headers.py"}

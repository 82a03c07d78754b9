"""Retry-After: one rounding rule, and both services' error renderers use it."""

from __future__ import annotations

import math
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from leasegate.core.errors import GatewayError, retry_after_header
from leasegate.proxy.relay import refusal_response
from leasegate.web.errors import error_response

waits = st.floats(min_value=0.0, max_value=86_400.0, allow_nan=False, exclude_min=True)


def test_a_wait_just_over_a_second_is_announced_as_two_seconds() -> None:
    assert retry_after_header(1.0005) == "2"
    assert retry_after_header(1.0) == "1"
    assert retry_after_header(0.001) == "1"


@given(waits)
def test_the_header_never_asks_the_client_to_come_back_early(wait_s: float) -> None:
    announced = int(retry_after_header(wait_s))
    assert announced >= wait_s
    assert announced >= 1
    assert announced == max(1, math.ceil(wait_s))


@given(waits)
def test_the_control_plane_and_the_proxy_announce_the_same_wait(wait_s: float) -> None:
    error = GatewayError("unavailable", "a backing store is unavailable", retry_after_s=wait_s)
    control = error_response(error).headers["retry-after"]
    proxy = refusal_response(error, "req-1").headers["retry-after"]
    assert control == proxy == retry_after_header(wait_s)


_READ = re.compile(r"""(get\(|\[)\s*["'](?i:retry-after)(-ms)?["']\s*[)\]](?!\s*=[^=])""")
_ROOT = Path(__file__).resolve().parents[2]


def test_the_wait_a_header_asks_for_is_read_in_one_place() -> None:
    """`leasegate.core.retry_after` reads `Retry-After` / `retry-after-ms` for the proxy, the
    failure classifier, the quota reader and the client; no other module reads the header's
    value (writing it, or asking whether it is there, is not reading it)."""
    readers = sorted(
        str(path.relative_to(_ROOT))
        for root in ("libs", "services", "bench")
        for path in (_ROOT / root).rglob("*.py")
        if _READ.search(path.read_text(encoding="utf-8"))
    )
    assert readers == ["libs/core/leasegate/core/retry_after.py"]

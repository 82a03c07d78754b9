"""Small vocabularies every part speaks, the wire shapes included: defined here once, so the
wire (and the client that installs without the server) need nothing of the server's packages."""

from __future__ import annotations

from typing import Literal

ChainStatus = Literal["ok", "absent", "corrupt"]
"""The admin audit chain's verdict (`leasegate.audit.fold`): verified, empty, or not to be
trusted."""

Period = Literal["day", "month"]
"""A budget's calendar period in UTC (`leasegate.spend.period`)."""
PERIODS: tuple[Period, ...] = ("day", "month")

"""One structured log event per cooldown or circuit that opens or closes."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from leasegate.core.clock import from_epoch, iso
from leasegate.core.ports.health import HealthTransition

log = logging.getLogger("leasegate.health")


def log_transitions(transitions: Sequence[HealthTransition]) -> None:
    for t in transitions:
        subject = f"{t.account_id}/{t.model}" if t.model is not None else t.account_id
        log.warning(
            t.kind,
            extra={
                "subject": subject,
                "account_id": t.account_id,
                "model": t.model,
                "reason": t.reason,
                "trips": t.trips,
                "until": iso(from_epoch(t.until)) if t.until is not None else None,
            },
        )

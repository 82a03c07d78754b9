"""What every server process does before it serves: logging, and the start-up warnings."""

from __future__ import annotations

import logging

from starlette.types import ASGIApp

from leasegate.config import Config
from leasegate.web.access_log import AccessLog
from leasegate.web.logs import configure_logging
from leasegate.web.ops import unconfigured_accounts

log = logging.getLogger("leasegate.cli")


def prepare_process(config: Config) -> None:
    """Configure JSON logging and warn of what is probably a mistake (never a value)."""
    configure_logging(config.settings.log_level)
    if config.unknown_variables:
        log.warning(
            "unknown LEASEGATE_ variables ignored (a typo?)",
            extra={"variables": list(config.unknown_variables)},
        )
    for missing in unconfigured_accounts(config.registry):
        log.warning(
            "account has no credential: its variable is unset or empty; it is never selected",
            extra=missing,
        )


def with_access_log(app: ASGIApp, config: Config) -> ASGIApp:
    """The app wrapped in the access-log middleware unless LEASEGATE_ACCESS_LOG is off."""
    return AccessLog(app) if config.settings.access_log else app

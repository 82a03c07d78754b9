"""Where evidence spills by default: production mode spills under the working directory,
embedded mode does not, `off` turns it off; a directory that cannot be written is named in one
start-up warning and the proxy runs on without one."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from leasegate.config.settings import DEFAULT_EVIDENCE_SPILL_PATH, Settings
from leasegate.proxy.evidence_spill import open_spill

REDIS = "redis://127.0.0.1:6379/0"


def test_production_mode_spills_under_the_working_directory_by_default() -> None:
    assert Settings(redis_url=REDIS).evidence_spill_dir == DEFAULT_EVIDENCE_SPILL_PATH
    assert not DEFAULT_EVIDENCE_SPILL_PATH.is_absolute()
    assert Settings().evidence_spill_dir is None  # embedded mode
    assert Settings(redis_url=REDIS, evidence_spill_path="off").evidence_spill_dir is None
    chosen = Settings(redis_url=REDIS, evidence_spill_path="/srv/spill").evidence_spill_dir
    assert chosen == Path("/srv/spill")


def test_an_unwritable_spill_directory_is_named_in_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="leasegate.evidence"):
        assert open_spill(blocker / "spill", "postgresql+asyncpg://h/db") is None
    (warning,) = caplog.records
    assert warning.path == str(blocker / "spill")  # type: ignore[attr-defined]
    assert "not writable" in warning.getMessage()


def test_a_writable_spill_directory_is_opened(tmp_path: Path) -> None:
    spill = open_spill(tmp_path / "spill", "postgresql+asyncpg://h/db")
    assert spill is not None
    spill.close()

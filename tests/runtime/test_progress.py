"""runtime/progress.py: a long phase says so before it starts and every few seconds while it lasts, on the
``compactor.progress`` logger the CLI shows (tests/catalogs/test_hive.py sees the lines of a real JVM start)."""

from __future__ import annotations

import logging
import time

import pytest

from compactor.runtime.progress import LOGGER, phase


@pytest.fixture(autouse=True)
def _heard(caplog: pytest.LogCaptureFixture):
    """caplog hears the logger even where a CLI run in this process stopped it propagating (cli/common.py)."""
    logger = logging.getLogger(LOGGER)
    propagates = logger.propagate
    logger.propagate = False  # heard once, by caplog's handler on the logger itself
    logger.addHandler(caplog.handler)
    try:
        yield
    finally:
        logger.removeHandler(caplog.handler)
        logger.propagate = propagates


def test_a_phase_is_said_before_it_starts_then_every_few_seconds_then_how_long_it_took(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        with phase("starting Spark for catalog 'meta'", every_s=0.1):
            time.sleep(0.35)
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert lines[0] == "starting Spark for catalog 'meta' ..."
    assert 2 <= sum(line.startswith("  still starting Spark for catalog 'meta': ") for line in lines) <= 4, lines
    assert lines[-1] == "  starting Spark for catalog 'meta': done after 0s"


def test_a_quick_phase_not_announced_says_nothing_and_a_failed_one_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        with phase("reading 3 table(s)", announce=False, every_s=0.1):
            pass
        assert [r for r in caplog.records if r.name == LOGGER] == []
        with pytest.raises(RuntimeError), phase("opening the Hive metastore", announce=False, every_s=0.1):
            time.sleep(0.15)
            raise RuntimeError("locked")
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert lines[-1] == "  opening the Hive metastore: failed after 0s", lines

"""`minibroker broker`'s process-wide settings, applied before anything else runs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from minibroker.commands import broker


@pytest.fixture
def switch_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("switch_interval")
def test_the_broker_command_shortens_the_gil_switch_interval(tmp_path: Path) -> None:
    # A config file that is not there: the command stops before starting a broker, the setting made already.
    assert broker.main(["--config", str(tmp_path / "missing.properties")]) == 1
    assert sys.getswitchinterval() == pytest.approx(broker.SWITCH_INTERVAL_S)
    assert broker.SWITCH_INTERVAL_S < 0.005

"""What every unit test shares."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def thawed_garbage_collector() -> Iterator[None]:
    """A ReplicaManager that creates replicas freezes every object alive (gc.freeze is process-wide): each test
    starts and ends with nothing frozen, so the suite's garbage is collected as ever."""
    gc.unfreeze()
    yield
    gc.unfreeze()

"""The nemesis's view of ZooKeeper rides out its own faults: a read that meets a lost connection or an expired
session (a paused or killed ZooKeeper member, an expire-session fault, a loaded machine) is retried, not the end
of the run (a 30-minute soak once stopped with "the nemesis failed: SessionExpiredError()")."""

from __future__ import annotations

import pytest
from kazoo.exceptions import ConnectionLoss, NoAuthError, SessionExpiredError

from chaos.cluster import ZooKeeperState

slept: list[float] = []


class FlakyZk:
    """Fails the first reads with the given errors, then answers."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def get_controller_id(self) -> int | None:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return 1001


def state_over(zk: FlakyZk) -> ZooKeeperState:
    state = object.__new__(ZooKeeperState)
    state._zk = zk  # type: ignore[assignment]
    state.sleep = slept.append  # type: ignore[method-assign]
    return state


def test_a_read_is_retried_through_an_expired_session_and_a_lost_connection() -> None:
    zk = FlakyZk(SessionExpiredError(), ConnectionLoss())
    assert state_over(zk).active_controller() == "controller-1001"
    assert zk.calls == 3
    assert len(slept) >= 2  # backed off between tries, on the test's clock


def test_an_error_that_is_not_transient_still_ends_the_read() -> None:
    zk = FlakyZk(NoAuthError())
    with pytest.raises(NoAuthError):
        state_over(zk).active_controller()
    assert zk.calls == 1

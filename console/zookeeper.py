"""The cluster's ZooKeeper as the page shows it, whichever way the console found it: each member's mode (the `srvr`
four-letter word), the active controller and the controller epoch (the /controller and /controller_epoch znodes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from zk.client import KafkaZkClient
from zk.server import server_mode

# A member that does not answer `srvr` within this holds up the console's slow loop no longer.
SRVR_TIMEOUT_S = 0.3


def zookeeper_picture(members: Sequence[tuple[str, str]], zookeeper: Callable[[], KafkaZkClient]) -> dict[str, Any]:
    """Each member's mode ("none" when it does not serve), the active controller and the controller epoch."""
    modes = []
    for name, connect in members:
        host, _, port = connect.rpartition(":")
        modes.append({"name": name, "connect": connect,
                      "mode": server_mode(host, int(port), SRVR_TIMEOUT_S) or "none"})
    out: dict[str, Any] = {"servers": modes}
    try:
        zk = zookeeper()
        epoch = zk.get_controller_epoch()
        out.update(controller_id=zk.get_controller_id(), controller_epoch=None if epoch is None else epoch[0])
    except Exception as e:  # ZooKeeper down is a state to show, not a crash
        out["error"] = str(e)
    return out

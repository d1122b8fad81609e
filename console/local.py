"""A local cluster (`minibroker cluster up --data-dir D`) as the console sees it: its processes, its ZooKeeper
and controller, and the faults a learner may inject with `--allow-faults`.

Processes come from cluster.json, each checked against its command line
(local_cluster/cluster.py) and read from /proc: a SIGSTOPped process shows as
stopped. The controller and ZooKeeper are read, never written: the /controller
and /controller_epoch znodes, the brokers' registrations (their listeners), and
each ZooKeeper server's `srvr` mode.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from client.metadata import ClusterMetadata
from console.zookeeper import zookeeper_picture
from local_cluster.cluster import ClusterError, LocalCluster
from local_cluster.security import zookeeper_security
from proto.types import EndPoint
from zk.client import KafkaZkClient, connect_checked

# The faults the page offers: what each does to which process.
BROKER_FAULTS = {"sigkill": signal.SIGKILL, "sigstop": signal.SIGSTOP, "sigcont": signal.SIGCONT}


class FaultError(Exception):
    """A fault that cannot be done (no such process, not running): the page shows why."""


class LocalProcesses:
    def __init__(self, data_dir: Path) -> None:
        self._cluster = LocalCluster(data_dir)
        self._info = self._cluster.load()
        # A fault is recorded on the console's own timeline beside what followed it: Collector.record.
        self.record: Callable[[str, str], None] = lambda kind, detail: None
        self._zk: KafkaZkClient | None = None
        self._zk_lock = threading.Lock()

    @property
    def bootstrap_servers(self) -> str:
        return self._info.bootstrap_servers

    def close(self) -> None:
        if self._zk is not None:
            self._zk.close()

    # ------------------------------------------------------------------ reading

    def processes(self) -> list[dict[str, Any]]:
        info = self._cluster.load()
        out = []
        names = ([m.name for m in info.zookeeper.members] or (["zookeeper"] if info.zookeeper.pid else []))
        names += [f"controller-{c.id}" for c in info.controllers] + [f"broker-{b.id}" for b in info.brokers]
        for name in names:
            try:
                pid: int | None = self._cluster.pid(name)
            except ClusterError:
                pid = None
            out.append({"name": name, "pid": pid, "state": _process_state(pid)})
        return out

    def zookeeper(self) -> dict[str, Any]:
        """Each ZooKeeper server's mode, the active controller and the controller epoch."""
        info = self._cluster.load()
        members = [(m.name, m.connect) for m in info.zookeeper.members] or [("zookeeper", info.zookeeper.connect)]
        return zookeeper_picture(members, self._zookeeper)

    def controller_endpoint(self) -> str | None:
        return self._zookeeper().get_controller_endpoint()

    def broker_listeners(self, metadata: ClusterMetadata) -> dict[int, tuple[EndPoint, ...]]:
        """The listeners each live broker's registration (/brokers/ids) advertises."""
        return {b.id: b.endpoints for b in self._zookeeper().get_all_brokers()}

    def _zookeeper(self) -> KafkaZkClient:
        with self._zk_lock:
            if self._zk is None:
                self._zk = connect_checked(self._info.zookeeper.connect, 5.0, zookeeper_security(self._info))
            return self._zk

    # ------------------------------------------------------------------ faults

    def broker_fault(self, broker_id: int, fault: str) -> str:
        """SIGKILL, SIGSTOP or SIGCONT broker `broker_id`; what was done, in words."""
        signum = BROKER_FAULTS.get(fault)
        if signum is None:
            raise FaultError(f"no fault {fault!r} (one of {', '.join(BROKER_FAULTS)})")
        pid = self._signal(f"broker-{broker_id}", signum)
        done = f"{signum.name} broker {broker_id} (pid {pid})"
        self.record("Fault", done)
        return done

    def kill_controller(self) -> str:
        """SIGKILL the active controller: a standby wins /controller and elects nothing new unless it must."""
        controller_id = self._zookeeper().get_controller_id()
        if controller_id is None:
            raise FaultError("no controller is active")
        pid = self._signal(f"controller-{controller_id}", signal.SIGKILL)
        done = f"SIGKILL active controller {controller_id} (pid {pid})"
        self.record("Fault", done)
        return done

    def restart_broker(self, broker_id: int) -> str:
        """Start broker `broker_id` again on its config and logs (SIGKILL first if it runs or is stopped); runs on
        a thread of its own, since the broker takes seconds to serve."""
        self.record("Fault", f"restart broker {broker_id}")

        def restart() -> None:
            try:
                self._cluster.restart_broker(broker_id, kill=True)
                self.record("Fault", f"broker {broker_id} serves again")
            except ClusterError as e:
                self.record("Fault", f"restart of broker {broker_id} failed: {e}")

        threading.Thread(target=restart, name=f"console-restart-{broker_id}", daemon=True).start()
        return f"restarting broker {broker_id}"

    def _signal(self, name: str, signum: int) -> int:
        try:
            return self._cluster.send_signal(name, signum)
        except ClusterError as e:
            raise FaultError(str(e)) from None


def _process_state(pid: int | None) -> str:
    """running, stopped (SIGSTOP: /proc's state T) or gone."""
    if pid is None:
        return "gone"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    # The state follows the command name, which is in parentheses and may itself hold spaces.
    state = stat.rpartition(")")[2].split()[0]
    return "stopped" if state in ("T", "t") else "running"

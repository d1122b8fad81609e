"""What the nemesis acts on: the ChaosCluster protocol, and its backend for a local `minibroker cluster up` cluster.

A backend names processes as cluster.json does ("broker-2", "controller-1001") and offers the
primitive faults; chaos/nemesis.py decides which to use when. The compose backend
(chaos/compose_cluster.py, `--compose`) acts on containers instead of pids. A backend implements ChaosCluster:

    bootstrap_servers        what minibroker's client connects to (the brokers' gRPC listeners)
    kafka_bootstrap_servers  what Kafka clients connect to (the brokers' Kafka listeners)
    data_dir                 where the audit finds the brokers' log dirs (None: it cannot run)
    brokers / controllers    the process names
    zookeepers               the ZooKeeper servers' names ("zookeeper", or "zookeeper-1".. of an ensemble; none
                             for a ZooKeeper that is not the cluster's own)
    zookeeper_mode(name)     what the server's `srvr` says: "leader", "follower", "standalone"; None if it does not
                             serve
    zookeeper_session(name)  the session id holding a broker's /brokers/ids/<id> or the active controller's
                             /controller, or None
    active_controller()      the name of the controller ZooKeeper's /controller names, or None
    partition_state(topic)   {partition: (leader, replicas, isr)} as ZooKeeper has it (leader -1: none)
    running(name)
    kill(name, signum)       SIGKILL: a crash; SIGTERM: a clean stop (a broker hands off its leadership)
    start(name)              start a stopped process again on its config and data (one still stopping is
                             given a grace period first); returns once it serves (a ZooKeeper member: once it
                             is back in the quorum)
    pause(name) / resume(name)            SIGSTOP / SIGCONT (docker pause / unpause)
    isolate(name, keep_clients) / heal()  cut a broker off from its peers and ZooKeeper (optionally not
                                          from clients) / undo every cut (cut_zookeeper's too)
    cut_zookeeper(name) / restore_zookeeper(name)  cut a running process's ZooKeeper traffic, and only that,
                                          so its session expires while it runs on / undo it
    supports(fault)          None, or why this backend cannot inject that fault
    close()
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from chaos import netns, zk_cut
from local_cluster import network as cluster_network
from local_cluster.cluster import ClusterError, LocalCluster
from proto.types import TopicPartition
from zk.client import KafkaZkClient
from zk.paths import CONTROLLER, broker_id_path
from zk.server import server_mode

T = TypeVar("T")

# How long the nemesis's reads of ZooKeeper ride out a lost connection or an expired session (its own faults:
# a paused or killed ZooKeeper member, an expired session, a loaded machine), retried with backoff.
ZOOKEEPER_READ_DEADLINE_S = 60.0

PARTITION_FAULTS = frozenset({"partition-leader"})
ZOOKEEPER_FAULTS = frozenset({"kill-zookeeper", "pause-zookeeper"})
SESSION_FAULTS = frozenset({"expire-session"})


class ChaosError(Exception):
    """The run cannot go on; the message says what to do."""


class ChaosCluster(Protocol):
    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def kafka_bootstrap_servers(self) -> str: ...

    @property
    def data_dir(self) -> Path | None: ...

    @property
    def brokers(self) -> list[str]: ...

    @property
    def controllers(self) -> list[str]: ...

    @property
    def zookeepers(self) -> list[str]: ...

    def zookeeper_mode(self, name: str) -> str | None: ...

    def zookeeper_session(self, name: str) -> int | None: ...

    def active_controller(self) -> str | None: ...

    def partition_state(self, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]: ...

    def running(self, name: str) -> bool: ...

    def kill(self, name: str, signum: int = signal.SIGKILL) -> None: ...

    def start(self, name: str) -> None: ...

    def pause(self, name: str) -> None: ...

    def resume(self, name: str) -> None: ...

    def isolate(self, name: str, keep_clients: bool) -> None: ...

    def heal(self) -> None: ...

    def cut_zookeeper(self, name: str) -> None: ...

    def restore_zookeeper(self, name: str) -> None: ...

    def supports(self, fault: str) -> str | None: ...

    def close(self) -> None: ...


def broker_name(broker_id: int) -> str:
    return f"broker-{broker_id}"


def node_id(name: str) -> int:
    """1 for "broker-1", 1001 for "controller-1001"."""
    return int(name.rpartition("-")[2])


def local_unsupported(fault: str) -> str | None:
    """Why a local cluster cannot have `fault` injected, or None: known before any cluster starts."""
    if fault in PARTITION_FAULTS:
        try:
            cluster_network.check_privileges()
        except cluster_network.NetworkError as e:
            return f"{fault} needs network namespaces: a cluster started with `minibroker cluster up --netns` ({e})"
    if fault in SESSION_FAULTS:
        return zk_cut.unsupported()
    return None


class ZooKeeperState:
    """What a backend reads from the cluster's ZooKeeper: the active controller and the partitions' state."""

    sleep: Callable[[float], None] = staticmethod(time.sleep)  # between retries; a unit test's clock replaces it

    def __init__(self, connect: str, unreachable_hint: str) -> None:
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
        try:
            self._zk = KafkaZkClient.connect(connect, timeout=30)
        except KazooTimeoutError:
            raise ChaosError(f"cannot connect to the cluster's ZooKeeper at {connect}: {unreachable_hint}") from None

    def _read(self, read: Callable[..., T], *args: object) -> T:
        """`read(*args)`, retried through a lost connection or an expired session: kazoo opens a new session
        after an expiry, and the chaos run's faults cause both."""
        retry = KazooRetry(max_tries=-1, delay=0.1, max_delay=2.0, deadline=ZOOKEEPER_READ_DEADLINE_S,
                           sleep_func=self.sleep)
        return retry(read, *args)

    def active_controller(self) -> str | None:
        controller_id = self._read(self._zk.get_controller_id)
        return None if controller_id is None else f"controller-{controller_id}"

    def session(self, name: str) -> int | None:
        """The session holding `name`'s ephemeral znode: a broker's registration, the active controller's
        /controller (a standby holds none)."""
        if name.startswith("broker-"):
            return self._read(self._zk.ephemeral_owner, broker_id_path(node_id(name)))
        owner = self._read(self._zk.ephemeral_owner, CONTROLLER)
        return owner if self.active_controller() == name else None

    def partition_state(self, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
        assignment = self._read(self._zk.get_topic_assignment, topic)
        if assignment is None:
            raise ChaosError(f"topic {topic!r} does not exist")
        partitions = sorted(assignment.partitions)
        states = self._read(self._zk.get_partition_states, [TopicPartition(topic, p) for p in partitions])
        out = {}
        for p in partitions:
            state = states.get(TopicPartition(topic, p))
            out[p] = (-1 if state is None else state.leader, assignment.replicas(p),
                      () if state is None else state.isr)
        return out

    def close(self) -> None:
        self._zk.close()


class ClusterView:
    """What every backend answers the same way once its __init__ has set them: the bootstrap lists, the node
    names, the ZooKeeper servers' modes (from the addresses where this machine reaches them), and ZooKeeper's
    view of controller, partitions and sessions."""

    _bootstrap: str
    _kafka_bootstrap: str
    _brokers: list[str]
    _controllers: list[str]
    _zookeepers: dict[str, str]  # name: host:port
    _zk: ZooKeeperState
    _zookeeper_cuts: dict[str, zk_cut.ZooKeeperCut]

    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap

    @property
    def kafka_bootstrap_servers(self) -> str:
        return self._kafka_bootstrap

    @property
    def brokers(self) -> list[str]:
        return list(self._brokers)

    @property
    def controllers(self) -> list[str]:
        return list(self._controllers)

    @property
    def zookeepers(self) -> list[str]:
        return list(self._zookeepers)

    def zookeeper_mode(self, name: str) -> str | None:
        host, _, port = self._zookeepers[name].rpartition(":")
        return server_mode(host, int(port))

    def active_controller(self) -> str | None:
        return self._zk.active_controller()

    def zookeeper_session(self, name: str) -> int | None:
        return self._zk.session(name)

    def partition_state(self, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
        return self._zk.partition_state(topic)

    def restore_zookeeper(self, name: str) -> None:
        record = self._zookeeper_cuts.pop(name, None)
        if record is not None:
            try:
                zk_cut.restore(record)
            except zk_cut.CutError as e:
                raise ChaosError(str(e)) from None

    def _cut_zookeeper(self, name: str, cut: Callable[[], zk_cut.ZooKeeperCut]) -> None:
        try:
            self._zookeeper_cuts[name] = cut()
        except zk_cut.CutError as e:
            raise ChaosError(str(e)) from None

    def _restore_zookeeper_cuts(self) -> None:
        for name in list(self._zookeeper_cuts):
            self.restore_zookeeper(name)


class LocalChaosCluster(ClusterView):
    """A cluster from `minibroker cluster up`: signals on the pids of cluster.json (checked against each
    process's command line first, as LocalCluster does), restarts through LocalCluster.restart_broker /
    restart_controller (the code behind `minibroker cluster restart-broker`), partitions through
    chaos/netns.py on a cluster started with `cluster up --netns`."""

    def __init__(self, cluster: LocalCluster, restart_timeout: float = 60.0) -> None:
        self._cluster = cluster
        self._restart_timeout = restart_timeout
        info = cluster.load()
        self._bootstrap = info.bootstrap_servers
        self._kafka_bootstrap = info.kafka_bootstrap_servers
        self._brokers = [broker_name(b.id) for b in info.brokers]
        self._controllers = [f"controller-{c.id}" for c in info.controllers]
        self._zookeepers = {m.name: m.connect for m in info.zookeeper.members}
        if info.zookeeper.pid is not None:
            self._zookeepers["zookeeper"] = info.zookeeper.connect
        self._zookeeper_ports = {int(server.rpartition(":")[2]) for server in info.zookeeper.connect.split("/")[0]
                                 .split(",")}
        self._zookeeper_cuts = {}
        self._zk = ZooKeeperState(info.zookeeper.connect, f"is the cluster in {cluster.data_dir} up (`minibroker"
                                                         f" cluster status --data-dir {cluster.data_dir}`)?")

    @property
    def data_dir(self) -> Path | None:
        return self._cluster.data_dir

    def running(self, name: str) -> bool:
        return self._cluster.running(name)

    def kill(self, name: str, signum: int = signal.SIGKILL) -> None:
        try:
            self._cluster.send_signal(name, signum)
        except ClusterError as e:
            raise ChaosError(str(e)) from None

    def start(self, name: str) -> None:
        try:
            # Still running (a bounce's controlled shutdown under way): SIGTERM again, SIGKILL only after a grace.
            if name.startswith("broker-"):
                self._cluster.restart_broker(node_id(name), timeout=self._restart_timeout)
            elif name.startswith("zookeeper"):
                self._cluster.restart_zookeeper(name, timeout=self._restart_timeout)
            else:
                self._cluster.restart_controller(node_id(name), timeout=self._restart_timeout)
        except ClusterError as e:
            raise ChaosError(f"cannot start {name} again: {e}") from None

    def pause(self, name: str) -> None:
        self.kill(name, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        if self.running(name):
            self.kill(name, signal.SIGCONT)

    def isolate(self, name: str, keep_clients: bool) -> None:
        try:
            netns.isolate(self._cluster.data_dir, node_id(name), keep_clients)
        except netns.PartitionError as e:
            raise ChaosError(str(e)) from None

    def heal(self) -> None:
        self._restore_zookeeper_cuts()
        try:
            netns.heal(self._cluster.data_dir)
        except netns.PartitionError as e:
            raise ChaosError(str(e)) from None

    def cut_zookeeper(self, name: str) -> None:
        try:
            pid = self._cluster.pid(name)
        except ClusterError as e:
            raise ChaosError(str(e)) from None
        self._cut_zookeeper(name, lambda: zk_cut.cut(pid, self._zookeeper_ports))

    def supports(self, fault: str) -> str | None:
        why = local_unsupported(fault)
        if why is None and fault in ZOOKEEPER_FAULTS and not self._zookeepers:
            why = (f"{fault} acts on the cluster's own ZooKeeper, and the cluster in {self._cluster.data_dir} uses an"
                   " external one (`cluster up --zookeeper`)")
        # cluster.json of a `cluster up --netns` cluster describes its network (chaos/netns.py reads it there).
        if why is None and fault in PARTITION_FAULTS and self._cluster.load().network is None:
            why = (f"{fault} needs network namespaces, and the cluster in {self._cluster.data_dir} has none: start"
                   f" it with `minibroker cluster up --netns --data-dir {self._cluster.data_dir}` (as root)")
        return why

    def close(self) -> None:
        self._zk.close()

"""What the nemesis acts on: the ChaosCluster protocol, and its backend for a local `minibroker cluster up` cluster.

A backend names processes as cluster.json does ("broker-2", "controller-1001") and offers the
primitive faults; chaos/nemesis.py decides which to use when. The compose backend
(chaos/compose_cluster.py, `--compose`) acts on containers instead of pids. A backend implements ChaosCluster:

    bootstrap_servers        what minibroker's client connects to (the brokers' gRPC listeners)
    kafka_bootstrap_servers  what Kafka clients connect to (the brokers' Kafka listeners)
    data_dir                 where the audit finds the brokers' log dirs (None: it cannot run)
    brokers / controllers    the process names
    active_controller()      the name of the controller ZooKeeper's /controller names, or None
    partition_state(topic)   {partition: (leader, replicas, isr)} as ZooKeeper has it (leader -1: none)
    running(name)
    kill(name, signum)       SIGKILL: a crash; SIGTERM: a clean stop (a broker hands off its leadership)
    start(name)              start a stopped process again on its config and data (one still stopping is
                             given a grace period first); returns once it serves
    pause(name) / resume(name)            SIGSTOP / SIGCONT (docker pause / unpause)
    isolate(name, keep_clients) / heal()  cut a broker off from its peers and ZooKeeper (optionally not
                                          from clients) / undo every cut
    supports(fault)          None, or why this backend cannot inject that fault
    close()
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Protocol

from kazoo.handlers.threading import KazooTimeoutError

from chaos import netns
from minibroker.local import network as cluster_network
from minibroker.local.cluster import ClusterError, LocalCluster
from proto.types import TopicPartition
from zk.client import KafkaZkClient

PARTITION_FAULTS = frozenset({"partition-leader"})


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

    def active_controller(self) -> str | None: ...

    def partition_state(self, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]: ...

    def running(self, name: str) -> bool: ...

    def kill(self, name: str, signum: int = signal.SIGKILL) -> None: ...

    def start(self, name: str) -> None: ...

    def pause(self, name: str) -> None: ...

    def resume(self, name: str) -> None: ...

    def isolate(self, name: str, keep_clients: bool) -> None: ...

    def heal(self) -> None: ...

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
    return None


class ZooKeeperState:
    """What a backend reads from the cluster's ZooKeeper: the active controller and the partitions' state."""

    def __init__(self, connect: str, unreachable_hint: str) -> None:
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
        try:
            self._zk = KafkaZkClient.connect(connect, timeout=30)
        except KazooTimeoutError:
            raise ChaosError(f"cannot connect to the cluster's ZooKeeper at {connect}: {unreachable_hint}") from None

    def active_controller(self) -> str | None:
        controller_id = self._zk.get_controller_id()
        return None if controller_id is None else f"controller-{controller_id}"

    def partition_state(self, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
        assignment = self._zk.get_topic_assignment(topic)
        if assignment is None:
            raise ChaosError(f"topic {topic!r} does not exist")
        partitions = sorted(assignment.partitions)
        states = self._zk.get_partition_states([TopicPartition(topic, p) for p in partitions])
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
    names, and ZooKeeper's view of controller and partitions."""

    _bootstrap: str
    _kafka_bootstrap: str
    _brokers: list[str]
    _controllers: list[str]
    _zk: ZooKeeperState

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

    def active_controller(self) -> str | None:
        return self._zk.active_controller()

    def partition_state(self, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
        return self._zk.partition_state(topic)


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
        try:
            netns.heal(self._cluster.data_dir)
        except netns.PartitionError as e:
            raise ChaosError(str(e)) from None

    def supports(self, fault: str) -> str | None:
        why = local_unsupported(fault)
        # cluster.json of a `cluster up --netns` cluster describes its network (chaos/netns.py reads it there).
        if why is None and fault in PARTITION_FAULTS and self._cluster.load().network is None:
            why = (f"{fault} needs network namespaces, and the cluster in {self._cluster.data_dir} has none: start"
                   f" it with `minibroker cluster up --netns --data-dir {self._cluster.data_dir}` (as root)")
        return why

    def close(self) -> None:
        self._zk.close()

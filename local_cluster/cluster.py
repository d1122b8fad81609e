"""The launcher behind `minibroker cluster up | status | down | restart-broker`: a whole cluster on this machine.

Every process runs detached (a session of its own, stdin closed, output to
`<data dir>/logs/<name>.log`), so the cluster outlives the command that
started it and a Ctrl-C in that terminal does not reach it. A data dir holds:

    cluster.json                           what runs where (local_cluster/cluster_file.py)
    logs/<name>.log                        each process's output
    zookeeper/                             LocalZooKeeper's zoo.cfg, data and pid file
    zookeeper-<i>/                         the same for member <i> of an ensemble (--zookeeper-nodes N), with myid
    controller-<id>/controller.properties
    broker-<id>/server.properties          and broker-<id>/data, its log.dirs
    partitions.json                        brokers cut off by chaos/netns.py (with --netns)

With `--netns` every host (ZooKeeper and the controllers together, each broker)
runs in a network namespace of its own on a bridge (local_cluster/network.py):
brokers listen on their own address at port 9092, as on separate machines.

A pid from cluster.json is only signalled after /proc/<pid>/cmdline shows the
process's own config file: the kernel may have given a dead process's pid to
something else. `cluster up` on a stopped cluster's data dir starts it again
on its old data: the same ports (local_cluster/ports.py), its configs as
the user left them (local_cluster/configs.py), the same topics and logs,
without waiting for a killed run's ZooKeeper sessions (local_cluster/stale_sessions.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import itertools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kazoo.handlers.threading import KazooTimeoutError

from broker.config.kafka_config import KafkaConfig
from common.config import GRPC_LISTENER_NAME, ConfigError, config_name
from controller.config import ControllerConfig
from local_cluster import configs as cluster_configs
from local_cluster import network as cluster_network
from local_cluster import ports as cluster_ports
from local_cluster import security as cluster_security
from local_cluster import stale_sessions
from local_cluster.cluster_file import (
    PARTITIONS_FILE,
    BrokerEntry,
    ClusterInfo,
    ControllerEntry,
    NetworkEntry,
    ZooKeeperEntry,
    ZooKeeperMember,
)
from local_cluster.network import CORE, NetworkError, broker_host
from local_cluster.security import grpc_security, zookeeper_security
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from zk.client import ZOOKEEPER_PORT, KafkaZkClient, ZooKeeperUnreachableError, connect_checked, unreachable_reason
from zk.paths import BrokerInfo
from zk.server import (
    QUORUM_MAIN_CLASS,
    ZOOKEEPER_MAIN_CLASS,
    LocalZooKeeper,
    QuorumMember,
    ZooKeeperStartError,
    pid_alive,
    plan_ensemble,
    server_mode,
    start_ensemble,
)

HOST = "127.0.0.1"
# KafkaConfig's default offsets.topic.replication.factor (3).
OFFSETS_TOPIC_REPLICATION_FACTOR = cast(
    int, KafkaConfig.__dataclass_fields__["offsets_topic_replication_factor"].default)
# ... and of transaction.state.log.replication.factor (3) and .min.isr (2).
TRANSACTION_STATE_LOG_REPLICATION_FACTOR = cast(
    int, KafkaConfig.__dataclass_fields__["transaction_state_log_replication_factor"].default)
TRANSACTION_STATE_LOG_MIN_ISR = cast(int, KafkaConfig.__dataclass_fields__["transaction_state_log_min_isr"].default)
# Controller ids stay clear of broker ids (controller/config.py suggests 1000 + N).
CONTROLLER_ID_BASE = 1000
# An --override of a key the controller reads goes to the controllers as well as to the brokers, as it would
# in Kafka, where the controller is a broker with the same config; but not `listeners` or `metrics.port`: each
# process has its own.
SHARED_WITH_CONTROLLERS = frozenset(config_name(f.name) for f in dataclasses.fields(ControllerConfig)) - {
    "listeners", "metrics.port"}
_LOG_TAIL_LINES = 20
_POLL_S = 0.1
_READY_CHANNEL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
                          ("grpc.max_reconnect_backoff_ms", 100)]
_KILL_GRACE_S = 10.0
_EXIT_CODE_WAIT_S = 1.0
# How long a process's command line may read empty while it execs before it counts as gone.
_EXEC_WINDOW_S = 2.0
# How long `up --zookeeper H:P` gives a server that accepts connections to answer as ZooKeeper.
_ZOOKEEPER_CHECK_S = 10.0
# With --netns an ensemble's members share the core namespace: member <i> on ZOOKEEPER_PORT + i - 1 (clients),
# these + i (followers to the leader, leader election).
_NETNS_QUORUM_PORT = 2887
_NETNS_ELECTION_PORT = 3887

Report = Callable[[str], None]
T = TypeVar("T")


class ClusterError(Exception):
    """The cluster cannot be started, stopped or found; the message says why and where to look."""


class ClusterUsageError(ClusterError):
    """Arguments no cluster can be started with (a bad --override, no brokers): a usage error."""


@dataclass
class ProcessStatus:
    name: str
    pid: int | None
    running: bool
    detail: str
    healthy: bool


@contextlib.contextmanager
def scratch_cluster(prefix: str, keep: bool = False, **up: Any) -> Iterator[tuple[LocalCluster, ClusterInfo]]:
    """A cluster in a fresh temporary data dir for one benchmark: up on entry (LocalCluster.up's arguments),
    down on exit, and its data dir removed unless `keep`."""
    cluster = LocalCluster(Path(tempfile.mkdtemp(prefix=prefix)))
    try:
        yield cluster, cluster.up(**up)
    finally:
        try:
            if ClusterInfo.exists(cluster.data_dir):
                cluster.down()
        finally:
            if keep:
                print(f"data dir and process logs kept in {cluster.data_dir}", flush=True)
            else:
                shutil.rmtree(cluster.data_dir, ignore_errors=True)


class LocalCluster:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.resolve()
        # Children started by this object: polled for their exit code, and reaped, while we wait for them.
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    # ------------------------------------------------------------------ layout

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def zookeeper_dir(self) -> Path:
        return self.data_dir / "zookeeper"

    def member_dir(self, member_id: int) -> Path:
        return self.data_dir / f"zookeeper-{member_id}"

    def log_file(self, name: str) -> Path:
        return self.logs_dir / f"{name}.log"

    def broker_config(self, broker_id: int) -> Path:
        return self.data_dir / f"broker-{broker_id}" / "server.properties"

    def controller_config(self, controller_id: int) -> Path:
        return self.data_dir / f"controller-{controller_id}" / "controller.properties"

    def load(self) -> ClusterInfo:
        return ClusterInfo.load(self.data_dir)

    # ------------------------------------------------------------------ up

    def up(self, brokers: int | None = None, controllers: int | None = None, zookeeper: str | None = None,
           overrides: Iterable[str] = (), timeout: float = 60.0, report: Report = lambda _: None,
           netns: bool = False, port_base: int | None = None, security: bool = False,
           zookeeper_nodes: int | None = None, well_known_ports: bool = False) -> ClusterInfo:
        """Start ZooKeeper (unless `zookeeper` names one: one server, or an ensemble of `zookeeper_nodes`
        servers), the controllers and the brokers, and wait until every
        broker is registered, SERVING and knows the whole cluster, and a controller is active. With `netns`,
        each host gets a network namespace of its own first (root only). Ports as local_cluster/ports.py
        plans them; the configs of a data dir that ran before are kept (local_cluster/configs.py). The
        numbers of brokers, controllers and ZooKeeper servers default to those the data dir had, else 3, 2 and 1;
        `netns` is kept for the later runs of the data dir. With `security` (kept too), a secure cluster
        (local_cluster/security.py): TLS and SASL, mutual TLS inside the cluster, ZooKeeper ACLs (an open
        cluster's znodes are secured first), an admin super user. With `well_known_ports` (`minibroker demo`),
        new ports are Kafka's well-known ones where they are free (ports.py says which, and reports the others).

        On failure whatever was started is stopped again (the logs stay) and ClusterError says which process
        failed, with the last lines of its log.
        """
        previous = self.load() if ClusterInfo.exists(self.data_dir) else None
        if brokers is None:
            brokers = len(previous.brokers) if previous is not None and previous.brokers else 3
        if controllers is None:
            controllers = len(previous.controllers) if previous is not None and previous.controllers else 2
        if brokers < 1 or controllers < 1:
            raise ClusterUsageError("a cluster needs at least one broker and one controller")
        zookeeper_nodes = _zookeeper_nodes(previous, zookeeper, zookeeper_nodes)
        # Kept like --security: its configs name the addresses of the cluster's own network.
        netns = netns or (previous is not None and previous.network is not None)
        if port_base is not None and well_known_ports:
            raise ClusterUsageError("--port-base and --well-known-ports: choose one")
        if port_base is not None:
            if netns:
                raise ClusterUsageError("--port-base and --netns: with --netns every broker listens on port"
                                        f" {cluster_network.BROKER_PORT} of an address of its own")
            if (problem := cluster_ports.port_base_problem(port_base, brokers, zookeeper_nodes)) is not None:
                raise ClusterUsageError(problem)
        secure = security or (previous is not None and previous.security is not None)
        if netns and secure:
            raise ClusterUsageError("--security and --netns do not go together yet: the certificates name"
                                    f" {HOST} only")
        if netns:
            if zookeeper is not None:
                raise ClusterError("--netns starts ZooKeeper on the cluster's own network: it cannot use --zookeeper")
            _network_call(cluster_network.check_privileges)
        try:
            if self.data_dir.exists() and not self.data_dir.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.logs_dir.mkdir(exist_ok=True)
        except OSError as e:
            raise ClusterError(f"cannot use {self.data_dir} as the cluster's data dir: {e.strerror}") from None
        if previous is not None:
            recorded = self._processes(previous)
            # Unrecorded ones too: stale_sessions.py relies on no process of this data dir running.
            running = [p for p in recorded if self._running(p)] + self._unrecorded(recorded)
            if running:
                raise ClusterError(
                    f"a cluster is already running from {self.data_dir} ("
                    + ", ".join(f"{p.name} pid {p.pid}" for p in running)
                    + f"): stop it first with `minibroker cluster down --data-dir {self.data_dir}`")
        props = _key_values(overrides)
        _check_broker_overrides(props)
        if zookeeper is not None:
            _check_zookeeper_answers(zookeeper, min(timeout, _ZOOKEEPER_CHECK_S))
        ports = None if netns else self._plan_ports(previous, brokers, port_base, zookeeper is None, report,
                                                    zookeeper_nodes, well_known_ports)
        if previous is not None and previous.network is not None:
            # The last --netns run's network (left by a crash, or recorded by `down`): this run makes it anew.
            self._remove_network(previous.network)
        deadline = time.monotonic() + timeout
        credential = (cluster_configs.existing_credential(
            [self.broker_config(i) for i in range(1, brokers + 1)]
            + [self.controller_config(CONTROLLER_ID_BASE + i) for i in range(1, controllers + 1)])
                      or secrets.token_urlsafe(24))
        info = ClusterInfo(ZooKeeperEntry(connect=zookeeper or "", pid=None))
        try:
            if netns:
                network = self._create_network(info, range(1, brokers + 1))
                report(f"Created network {network.subnet} on bridge {network.bridge}: namespaces "
                       + ", ".join(f"{ns} ({network.addresses[host]})" for host, ns in network.namespaces.items()))
            if zookeeper is None and zookeeper_nodes > 1:
                info.zookeeper = self._start_ensemble(info, zookeeper_nodes, max(deadline - time.monotonic(), 1.0),
                                                      ports)
                report(f"Started a ZooKeeper ensemble of {zookeeper_nodes} on {info.zookeeper.connect} ("
                       + ", ".join(f"{m.name} pid {m.pid}, {_mode(m.connect)}" for m in info.zookeeper.members)
                       + ")")
            elif zookeeper is None:
                info.zookeeper = self._start_zookeeper(max(deadline - time.monotonic(), 1.0), info.network,
                                                       0 if ports is None else ports.zookeeper)
                report(f"Started ZooKeeper on {info.zookeeper.connect} (pid {info.zookeeper.pid})")
            tls = None
            if secure:
                tls = cluster_security.prepare(self.data_dir, range(1, brokers + 1), [
                    CONTROLLER_ID_BASE + i for i in range(1, controllers + 1)])
                info.security = tls.entry()
            info.save(self.data_dir)
            if tls is not None:
                self._secure_zookeeper(info, tls, deadline, report)
            if previous is not None and info.network is None:  # nothing to probe from here with --netns
                self._remove_stale_registrations(info, previous, deadline, report)
            shared = {k: v for k, v in props.items() if k in SHARED_WITH_CONTROLLERS}
            if info.network is not None:
                # ControlledShutdown must be reachable from the brokers' namespaces.
                shared["listeners"] = f"PLAINTEXT://{info.network.addresses[CORE]}:0"
            for controller_id in range(CONTROLLER_ID_BASE + 1, CONTROLLER_ID_BASE + controllers + 1):
                self._write_config(self.controller_config(controller_id), {
                    "controller.id": str(controller_id), "zookeeper.connect": info.zookeeper.connect,
                    "cluster.credential": credential,
                    **({} if tls is None else tls.controller_props(controller_id)), **shared}, report)
                pid = self._start_controller(controller_id, info.network)
                info.controllers.append(ControllerEntry(controller_id, pid))
                info.save(self.data_dir)
                report(f"Started controller {controller_id} (pid {pid})")
            for broker_id in range(1, brokers + 1):
                if ports is not None:
                    host, port, kafka_port = HOST, ports.brokers[broker_id], ports.kafka[broker_id]
                else:  # --netns: an address of its own
                    assert info.network is not None
                    host, port, kafka_port = (info.network.addresses[broker_host(broker_id)],
                                              cluster_network.BROKER_PORT, cluster_network.KAFKA_BROKER_PORT)
                config = self.broker_config(broker_id)
                launcher = {"broker.id": str(broker_id), "zookeeper.connect": info.zookeeper.connect,
                            "cluster.credential": credential}
                kafka_listener = "PLAINTEXT" if tls is None else cluster_security.KAFKA_LISTENER
                if (tls is not None or cluster_configs.first_listener(config) != (host, port)
                        or cluster_configs.kafka_listener_port(config) != kafka_port):
                    launcher["listeners"] = (f"{GRPC_LISTENER_NAME}://{host}:{port},"
                                             f"{kafka_listener}://{host}:{kafka_port}")
                if tls is not None:
                    launcher.update(tls.broker_props(broker_id))
                if not config.exists():
                    launcher["log.dirs"] = str(self.data_dir / f"broker-{broker_id}" / "data")
                    if brokers < OFFSETS_TOPIC_REPLICATION_FACTOR:
                        # As Kafka's own development server.properties: a cluster smaller than the offsets topic's
                        # default replication factor could never create it, and no group consumer would work.
                        launcher["offsets.topic.replication.factor"] = str(brokers)
                    if brokers < TRANSACTION_STATE_LOG_REPLICATION_FACTOR:
                        # Likewise __transaction_state, or no transactional producer would find a coordinator.
                        launcher["transaction.state.log.replication.factor"] = str(brokers)
                        launcher["transaction.state.log.min.isr"] = str(min(brokers, TRANSACTION_STATE_LOG_MIN_ISR))
                self._write_config(config, {**launcher, **props}, report)
                broker = BrokerEntry(id=broker_id, host=host, port=port, pid=None,
                                     log_dir=cluster_configs.first_log_dir(config) or "", kafka_port=kafka_port)
                broker.pid = self._start_broker(broker_id, info.network)
                info.brokers.append(broker)
                info.save(self.data_dir)
                report(f"Started broker {broker_id} on {broker.address} (gRPC), {broker.kafka_address} (Kafka)"
                       f" (pid {broker.pid}), log dir {broker.log_dir}")
            self._wait_ready(info, info.brokers, deadline, timeout)
        except BaseException:
            # Ctrl-C included: a half-started cluster is of no use to anyone.
            with contextlib.suppress(ClusterError):
                self._stop(info, kill=False, timeout=_KILL_GRACE_S)
            raise
        return info

    def _create_network(self, info: ClusterInfo, broker_ids: Iterable[int]) -> NetworkEntry:
        """Namespaces, veths and a bridge for `info`, recorded in cluster.json before any of it exists."""
        tag = cluster_network.network_tag(self.data_dir)
        # Leftovers of a run from this data dir whose cluster.json is gone would hold our names and subnet.
        self._remove_network(None)
        with cluster_network.allocation_lock():
            info.network = _network_call(cluster_network.plan_network, tag, broker_ids,
                                         _network_call(cluster_network.routed_networks))
            info.save(self.data_dir)
            _network_call(cluster_network.create, info.network)
        return info.network

    def _plan_ports(self, previous: ClusterInfo | None, brokers: int, port_base: int | None, own_zookeeper: bool,
                    report: Report, zookeeper_nodes: int = 1,
                    well_known: bool = False) -> cluster_ports.PortPlan:
        plan = cluster_ports.plan_ports(previous, range(1, brokers + 1), port_base, self.broker_config,
                                        cluster_configs.first_listener, HOST, cluster_configs.kafka_listener_port,
                                        zookeeper_nodes, well_known)
        if not own_zookeeper:
            plan.zookeeper = 0
            plan.zookeeper_members = {}
        taken = cluster_ports.taken(plan, HOST)
        if taken:
            raise ClusterError(f"ports in use by another process: {', '.join(taken)} ({plan.chosen}); stop what"
                               " listens there, or choose other ports with --port-base N")
        report(f"Ports ({plan.chosen}): " + ", ".join(
            ([f"zookeeper {plan.zookeeper}"] if plan.zookeeper else [])
            + [f"zookeeper-{i} {port}" for i, port in plan.zookeeper_members.items() if port]
            + [f"broker-{i} {port} (Kafka {plan.kafka[i]})" for i, port in plan.brokers.items()]))
        if plan.moved:
            report("Taken by something else, so free ports instead: " + ", ".join(plan.moved))
        return plan

    def _remove_stale_registrations(self, info: ClusterInfo, previous: ClusterInfo, deadline: float,
                                    report: Report) -> None:
        with self._zookeeper(info, deadline) as zk:
            stale_sessions.remove_stale_registrations(zk, previous, report)

    def _zookeeper(self, info: ClusterInfo, deadline: float) -> KafkaZkClient:
        """A session with the cluster's ZooKeeper, logged in as the cluster when it is a secure one."""
        try:
            return KafkaZkClient.connect(info.zookeeper.connect, timeout=max(deadline - time.monotonic(), 1.0),
                                         security=zookeeper_security(info))
        except KazooTimeoutError:
            raise ClusterError(f"cannot connect to ZooKeeper at {info.zookeeper.connect}") from None

    def _secure_zookeeper(self, info: ClusterInfo, tls: cluster_security.ClusterSecurity, deadline: float,
                          report: Report) -> None:
        """Before any process starts: the cluster's znodes secured, the admin's SCRAM credentials written."""
        with self._zookeeper(info, deadline) as zk:
            count = cluster_security.secure_zookeeper(zk, tls)
        report(f"Secured ZooKeeper ({count} znodes, user {tls.zookeeper.username}); admin user"
               f" '{cluster_security.ADMIN_USER}' with SCRAM credentials; client properties {tls.client_config}")

    def _start_zookeeper(self, timeout: float, network: NetworkEntry | None, port: int = 0) -> ZooKeeperEntry:
        server = self._single_server(network, port)
        pid = _start_server(server, timeout)
        self._link_log("zookeeper", server.log_file)
        return ZooKeeperEntry(connect=server.connect_string, pid=pid)

    def _single_server(self, network: NetworkEntry | None, port: int) -> LocalZooKeeper:
        return (LocalZooKeeper(self.zookeeper_dir, port=port) if network is None else
                LocalZooKeeper(self.zookeeper_dir, host=network.addresses[CORE], port=ZOOKEEPER_PORT,
                               launcher=cluster_network.exec_prefix(network, CORE)))

    def _member_server(self, member: ZooKeeperMember, members: list[ZooKeeperMember],
                       network: NetworkEntry | None) -> LocalZooKeeper:
        launcher = [] if network is None else cluster_network.exec_prefix(network, CORE)
        return LocalZooKeeper(self.member_dir(member.id), ensemble=[m.quorum_member() for m in members],
                              myid=member.id, launcher=launcher)

    def _start_ensemble(self, info: ClusterInfo, size: int, timeout: float,
                        ports: cluster_ports.PortPlan | None) -> ZooKeeperEntry:
        """Every member, each in zookeeper-<i>/ with its myid, then wait for a quorum (a leader and followers).
        Quorum and election ports are picked free each time (only the members use them), clear of the ports
        planned for the brokers; with --netns the members share the core namespace, on fixed ports there."""
        if info.network is None:
            assert ports is not None
            planned = plan_ensemble(size, HOST, [ports.zookeeper_members.get(i, 0) for i in range(1, size + 1)],
                                    avoid={*ports.brokers.values(), *ports.kafka.values()})
        else:
            core = info.network.addresses[CORE]
            planned = [QuorumMember(i, core, ZOOKEEPER_PORT + i - 1, _NETNS_QUORUM_PORT + i,
                                    _NETNS_ELECTION_PORT + i) for i in range(1, size + 1)]
        members = [ZooKeeperMember(m.id, m.host, m.client_port, m.quorum_port, m.election_port, None)
                   for m in planned]
        servers = [self._member_server(m, members, info.network) for m in members]
        try:
            pids = start_ensemble(servers, timeout, detached=True)
        except ZooKeeperStartError as e:
            raise ClusterError(str(e)) from None
        except OSError as e:
            raise ClusterError(f"cannot start ZooKeeper: {e.filename}: {e.strerror}") from None
        for member, server, pid in zip(members, servers, pids, strict=True):
            member.pid = pid
            self._link_log(member.name, server.log_file)
        return ZooKeeperEntry(connect=",".join(m.connect for m in members), pid=None, members=members)

    def _link_log(self, name: str, log_file: Path) -> None:
        link = self.log_file(name)
        if not link.is_symlink():
            # One place to look for every process's output; the server itself writes in its own dir.
            link.unlink(missing_ok=True)
            link.symlink_to(os.path.relpath(log_file, self.logs_dir))

    def _start_controller(self, controller_id: int, network: NetworkEntry | None) -> int:
        """Start it on its controller.properties."""
        config = self.controller_config(controller_id)
        launcher = [] if network is None else cluster_network.exec_prefix(network, CORE)
        return self._spawn(f"controller-{controller_id}", [*launcher, sys.executable, "-m", "controller.main",
                                                           "--config", str(config)])

    def _start_broker(self, broker_id: int, network: NetworkEntry | None) -> int:
        """Start it on its server.properties."""
        config = self.broker_config(broker_id)
        launcher = [] if network is None else cluster_network.exec_prefix(network, broker_host(broker_id))
        return self._spawn(f"broker-{broker_id}", [*launcher, sys.executable, "-m", "minibroker.commands.broker",
                                                   "--config", str(config)])

    def _write_config(self, path: Path, props: dict[str, str], report: Report) -> None:
        try:
            changed = cluster_configs.write_config(path, props)
        except ConfigError as e:
            raise ClusterError(str(e)) from None
        if changed:
            # Whatever else the user wrote there stays.
            report(f"Kept {path.relative_to(self.data_dir)}, set {', '.join(changed)}")

    def _spawn(self, name: str, argv: list[str]) -> int:
        with self.log_file(name).open("ab") as log:
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._children[child.pid] = child
        return child.pid

    # ------------------------------------------------------------------ readiness

    def _wait_ready(self, info: ClusterInfo, brokers: list[BrokerEntry], deadline: float, timeout: float,
                    whole_cluster: bool = True, watched: Sequence[str] = (), need_controller: bool = False) -> None:
        """Until `brokers` are registered with their ports, SERVING, and know the registered brokers and the
        active controller from the controller's UpdateMetadata: what a client needs before it can use them.
        With `whole_cluster` false (one process restarted) only those brokers and the `watched` processes are
        watched: another process of the cluster that is down (a controller killed by a fault) is not theirs to
        fail, and with no controller active there is no UpdateMetadata to wait for, unless `need_controller`."""
        if whole_cluster:
            # An ensemble member that is down (a chaos fault, a crash) does not matter while the others have a
            # quorum.
            processes = [p for p in self._processes(info) if not (p.kind == "zookeeper" and info.zookeeper.members)]
        else:
            names = {f"broker-{b.id}" for b in brokers} | set(watched)
            processes = [p for p in self._processes(info) if p.name in names]
        zk = self._zookeeper(info, deadline)
        # Made before the brokers listen: without a short reconnect backoff gRPC would wait up to two minutes
        # between attempts, long after a broker serves (and channels share connections process-wide).
        security = grpc_security(info)
        channels = {b.id: security.channel(b.address, options=_READY_CHANNEL_OPTIONS) for b in brokers}
        try:
            while True:
                for process in processes:
                    if not self._running(process):
                        raise ClusterError(f"{process.name} exited{self._exit_code(process)} before the cluster was"
                                           f" ready{self._log_tail(process.name)}")
                pending = _not_ready(zk, info, brokers, channels, whole_cluster or need_controller)
                if not pending:
                    return
                if time.monotonic() >= deadline:
                    raise ClusterError(f"the cluster is not ready after {timeout:g} s: "
                                       + "; ".join(f"{name} {why}" for name, why in pending.items())
                                       + "".join(self._log_tail(name) for name in pending))
                time.sleep(_POLL_S)
        finally:
            for channel in channels.values():
                channel.close()
            zk.close()

    # ------------------------------------------------------------------ status

    def status(self) -> tuple[ClusterInfo, list[ProcessStatus]]:
        info = self.load()
        processes = self._processes(info)
        # Our ZooKeeper stopped (every member of an ensemble): do not wait out a connection timeout to learn that
        # it is unreachable.
        servers = [p for p in processes if p.kind == "zookeeper"]
        zk_down = bool(servers) and not any(self._running(p) for p in servers)
        zk_state = None if zk_down else _zookeeper_state(info.zookeeper.connect)
        statuses = []
        for process in processes:
            running = self._running(process)
            detail, healthy = process.describe(zk_state) if running else (process.address, False)
            statuses.append(ProcessStatus(process.name, process.pid, running, detail, healthy))
        if info.zookeeper.external:  # not ours to watch, but the cluster needs it
            statuses.insert(0, ProcessStatus("zookeeper", None, zk_state is not None,
                                             f"external, {info.zookeeper.connect}"
                                             + ("" if zk_state is not None else ", unreachable"),
                                             zk_state is not None))
        return info, statuses

    # ------------------------------------------------------------------ down

    def down(self, kill: bool = False, timeout: float = 30.0, report: Report = lambda _: None) -> list[str]:
        """Stop every process of the cluster: SIGTERM (SIGKILL with `kill`, or after `timeout`), brokers first,
        ZooKeeper last, and wait until every pid is gone; then remove its network, if it has one. Returns the
        names of the processes stopped."""
        return self._stop(self.load(), kill, timeout, report)

    def _stop(self, info: ClusterInfo, kill: bool, timeout: float, report: Report = lambda _: None) -> list[str]:
        processes = self._processes(info)
        processes += self._unrecorded(processes)
        if info.network is not None and not kill and (self.data_dir / PARTITIONS_FILE).exists():
            # A broker cut off from the controller would wait out its controlled shutdown, then get SIGKILLed.
            _network_call(cluster_network.reconnect_all, info.network)
        stopped: list[str] = []
        # Brokers close their ZooKeeper sessions on the way down, so ZooKeeper goes last.
        for kind in ("broker", "controller", "zookeeper"):
            group = [p for p in processes if p.kind == kind and self._running(p)]
            self._terminate(group, kill, timeout)
            stopped.extend(p.name for p in group)
        if info.network is not None:
            removed = self._remove_network(info.network)
            if removed:
                report(f"Removed {', '.join(removed)}")
        return stopped

    def _remove_network(self, recorded: NetworkEntry | None) -> list[str]:
        """The network of this data dir (as recorded, and whatever else carries its tag), and its partitions."""
        removed = _network_call(cluster_network.remove, cluster_network.network_tag(self.data_dir), recorded)
        (self.data_dir / PARTITIONS_FILE).unlink(missing_ok=True)
        return removed

    def _terminate(self, processes: list[_Process], kill: bool, timeout: float) -> None:
        for process in processes:
            self._signal(process, signal.SIGKILL if kill else signal.SIGTERM)
        if self._wait_gone(processes, timeout):
            return
        for process in processes:
            self._signal(process, signal.SIGKILL)
        if not self._wait_gone(processes, _KILL_GRACE_S):
            alive = [f"{p.name} (pid {p.pid})" for p in processes if self._running(p)]
            raise ClusterError(f"still running after SIGKILL: {', '.join(alive)}")

    def _signal(self, process: _Process, signum: int) -> None:
        if process.pid is not None and self._running(process):
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signum)

    def _wait_gone(self, processes: list[_Process], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while any(self._running(p) for p in processes):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    # ------------------------------------------------------------------ restart-broker

    def restart_broker(self, broker_id: int, kill: bool = False, timeout: float = 60.0,
                       report: Report = lambda _: None) -> BrokerEntry:
        """Stop one broker (SIGTERM, or SIGKILL with `kill`) and start it again on its config, port and logs;
        returns once it serves again with the cluster's metadata."""
        info = self.load()
        broker = info.broker(broker_id)
        self._restart(info, broker, f"broker-{broker_id}", lambda: self._start_broker(broker_id, info.network),
                      kill, report)
        self._wait_ready(info, [broker], time.monotonic() + timeout, timeout, whole_cluster=False)
        return broker

    # ------------------------------------------------------------------ one process (chaos/cluster.py)

    def restart_controller(self, controller_id: int, kill: bool = False, timeout: float = 60.0,
                           report: Report = lambda _: None) -> ControllerEntry:
        """Stop one controller (SIGTERM, or SIGKILL with `kill`) and start it again on its config; returns once
        a controller of the cluster is active (this one or another: a standby has nothing to show). Another
        process of the cluster that is down (a broker killed by a fault) is not this one's to fail."""
        info = self.load()
        entry = next((c for c in info.controllers if c.id == controller_id), None)
        if entry is None:
            raise ClusterError(f"the cluster has no controller {controller_id} (controllers: "
                               f"{', '.join(str(c.id) for c in info.controllers)})")
        name = f"controller-{controller_id}"
        self._restart(info, entry, name, lambda: self._start_controller(controller_id, info.network), kill, report)
        self._wait_ready(info, [], time.monotonic() + timeout, timeout, whole_cluster=False, watched=[name],
                         need_controller=True)
        return entry

    def _restart(self, info: ClusterInfo, entry: BrokerEntry | ControllerEntry, name: str, start: Callable[[], int],
                 kill: bool, report: Report) -> None:
        """Stop the broker or controller `name` if it runs, start it again and record its new pid."""
        _check_zookeeper(info)
        process = self._process(info, name)
        if self._running(process):
            self._terminate([process], kill, _KILL_GRACE_S)
            report(f"Stopped {name} (pid {entry.pid}) with {'SIGKILL' if kill else 'SIGTERM'}")
        entry.pid = start()
        info.save(self.data_dir)
        report(f"Started {name} (pid {entry.pid})")

    def restart_zookeeper(self, name: str, kill: bool = False, timeout: float = 60.0,
                          report: Report = lambda _: None) -> int:
        """Stop one ZooKeeper server ("zookeeper", or "zookeeper-<i>" of an ensemble; SIGTERM, or SIGKILL with
        `kill`) and start it again on its config and data; returns its pid once it serves (a member: once it is
        the quorum's leader or follower again)."""
        info = self.load()
        process = self._process(info, name)
        if process.kind != "zookeeper":
            raise ClusterError(f"{name} is not one of the cluster's ZooKeeper servers")
        if self._running(process):
            self._terminate([process], kill, _KILL_GRACE_S)
            report(f"Stopped {name} (pid {process.pid}) with {'SIGKILL' if kill else 'SIGTERM'}")
        member = next((m for m in info.zookeeper.members if m.name == name), None)
        if member is None:
            server = self._single_server(info.network, int(info.zookeeper.connect.rpartition(":")[2]))
            info.zookeeper.pid = pid = _start_server(server, timeout)
        else:
            server = self._member_server(member, info.zookeeper.members, info.network)
            member.pid = pid = _start_server(server, timeout)
        info.save(self.data_dir)
        report(f"Started {name} on {process.connect} (pid {pid}), mode {_mode(process.connect)}")
        return pid

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until every broker is registered, SERVING and knows the cluster's brokers and active controller, as
        `up` and the restarts wait (after `restart_zookeeper`: the brokers whose sessions expired register
        again)."""
        info = self.load()
        self._wait_ready(info, info.brokers, time.monotonic() + timeout, timeout)

    def running(self, name: str) -> bool:
        """Whether the process `name` ("broker-1", "controller-1001", "zookeeper", "zookeeper-2") of cluster.json
        runs."""
        return self._running(self._process(self.load(), name))

    def pid(self, name: str) -> int:
        """The pid of the process `name`, checked against its command line as every signal here is."""
        process = self._process(self.load(), name)
        if process.pid is None or not self._running(process):
            raise ClusterError(f"{name} is not running")
        return process.pid

    def send_signal(self, name: str, signum: int) -> int:
        """Signal the process `name` if it is the one cluster.json records; returns its pid."""
        pid = self.pid(name)
        os.kill(pid, signum)
        return pid

    def _process(self, info: ClusterInfo, name: str) -> _Process:
        for process in self._processes(info):
            if process.name == name:
                return process
        raise ClusterError(f"the cluster in {self.data_dir} has no process {name}")

    # ------------------------------------------------------------------ processes

    def _processes(self, info: ClusterInfo) -> list[_Process]:
        processes = []
        if info.zookeeper.pid is not None:
            processes.append(_Process("zookeeper", "zookeeper", info.zookeeper.pid,
                                      str((self.zookeeper_dir / "zoo.cfg").resolve()), info.zookeeper.connect))
        processes += [_Process("zookeeper", m.name, m.pid, str((self.member_dir(m.id) / "zoo.cfg").resolve()),
                               m.connect) for m in info.zookeeper.members]
        processes += [_Process("controller", f"controller-{c.id}", c.pid, str(self.controller_config(c.id)),
                               controller_id=c.id) for c in info.controllers]
        processes += [_Process("broker", f"broker-{b.id}", b.pid, str(self.broker_config(b.id)), broker=b)
                      for b in info.brokers]
        return processes

    def _unrecorded(self, recorded: list[_Process]) -> list[_Process]:
        """Processes started on this data dir's configs that cluster.json does not name: an `up` killed between
        a spawn and the save of its pid leaves one, and only its command line still says whose it is."""
        kinds = {"server.properties": "broker", "controller.properties": "controller", "zoo.cfg": "zookeeper"}
        known = {p.pid for p in recorded}
        prefix = str(self.data_dir) + os.sep
        found = []
        for entry in Path("/proc").glob("[0-9]*"):
            pid = int(entry.name)
            if pid in known or pid == os.getpid():
                continue
            try:
                args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            # The config file as a broker's or controller's --config, or as ZooKeeper's last argument: not an
            # editor or a pager that happens to have one open.
            configs = [arg for before, arg in itertools.pairwise(args)
                       if before in ("--config", ZOOKEEPER_MAIN_CLASS, QUORUM_MAIN_CLASS)]
            for arg in configs:
                path = Path(arg)
                if arg.startswith(prefix) and path.name in kinds:
                    found.append(_Process(kinds[path.name], path.parent.name, pid, arg))
                    break
        return found

    def _running(self, process: _Process) -> bool:
        pid = process.pid
        if pid is None:
            return False
        child = self._children.get(pid)
        if child is not None and child.poll() is not None:  # reaped here: a zombie would still "exist"
            return False
        return _runs(pid, process.marker)

    def _exit_code(self, process: _Process) -> str:
        child = self._children.get(process.pid or -1)
        if child is None:
            return ""
        # A zombie's /proc entry has no command line any more: it can look gone before poll() reaps it.
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=_EXIT_CODE_WAIT_S)
        return "" if child.returncode is None else f" with code {child.returncode}"

    def _log_tail(self, name: str) -> str:
        path = self.log_file(name)
        try:
            lines = path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
        except OSError:
            return f"\n(no log at {path})"
        return f"\n--- last lines of {path} ---\n" + "\n".join(lines)


@dataclass
class _Process:
    kind: str  # "zookeeper", "controller" or "broker"
    name: str
    pid: int | None
    marker: str  # in the process's command line: its config file
    connect: str = ""
    controller_id: int | None = None
    broker: BrokerEntry | None = None

    @property
    def address(self) -> str:
        return self.broker.address if self.broker is not None else self.connect

    def describe(self, zk: _ZooKeeperState | None) -> tuple[str, bool]:
        """What ZooKeeper says about this process, and whether that is as it should be."""
        if self.kind == "zookeeper":
            # leader / follower in an ensemble, standalone alone; none: running but not serving (no quorum).
            mode = _mode(self.connect)
            return f"{self.connect}, mode {mode}", zk is not None and mode != "none"
        if zk is None:
            return "ZooKeeper unreachable", False
        if self.broker is not None:
            registration = zk.brokers.get(self.broker.id)
            if registration is None:
                return f"not registered, {self.broker.address}", False
            return f"registered, {registration.connection_strings}, log dir {self.broker.log_dir}", True
        if zk.controller_id == self.controller_id:
            return f"active controller (controller epoch {zk.controller_epoch})", True
        return "standby", zk.controller_id is not None


@dataclass
class _ZooKeeperState:
    brokers: dict[int, BrokerInfo]
    controller_id: int | None
    controller_epoch: int | None


def _not_ready(zk: KafkaZkClient, info: ClusterInfo, brokers: list[BrokerEntry],
               channels: dict[int, grpc.Channel], whole_cluster: bool = True) -> dict[str, str]:
    """Process name -> why it is not ready yet; empty when the cluster is (or, without `whole_cluster`, when
    `brokers` are: a controller is then awaited only through their metadata, if one is active)."""
    pending: dict[str, str] = {}
    controller_id = zk.get_controller_id()
    if whole_cluster and controller_id not in {c.id for c in info.controllers}:
        pending.update((f"controller-{c.id}", "is not active, nor is any other controller") for c in info.controllers)
    registered = {b.id: b for b in zk.get_all_brokers()}
    for broker in brokers:
        name = f"broker-{broker.id}"
        registration = registered.get(broker.id)
        if registration is None or broker.port not in {e.port for e in registration.endpoints}:
            pending[name] = "is not registered in ZooKeeper"
            continue
        channel = channels[broker.id]
        try:
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
            metadata = pb_grpc.KafkaClientStub(channel).Metadata(pb.MetadataRequest(), timeout=1)
        except grpc.RpcError as e:
            pending[name] = f"does not answer ({e.code().name})"
            continue
        if health.status != health_pb2.HealthCheckResponse.SERVING:
            pending[name] = "is not SERVING"
        # With no controller active (the only one killed) nothing sends it UpdateMetadata: registered and serving
        # is all a restarted broker can be.
        elif (whole_cluster or controller_id is not None) and (
                {b.node_id for b in metadata.brokers} != set(registered) or metadata.controller_id < 0):
            pending[name] = "has no cluster metadata from the controller yet"
    return pending


def _zookeeper_state(connect: str) -> _ZooKeeperState | None:
    """Registrations and the controller as ZooKeeper has them, or None if it cannot be reached."""
    try:
        zk = KafkaZkClient.connect(connect, timeout=5)
    except KazooTimeoutError:
        return None
    with zk:
        epoch = zk.get_controller_epoch()
        return _ZooKeeperState({b.id: b for b in zk.get_all_brokers()}, zk.get_controller_id(),
                               None if epoch is None else epoch[0])


def _start_server(server: LocalZooKeeper, timeout: float) -> int:
    try:
        return server.start(timeout=timeout, detached=True)
    except ZooKeeperStartError as e:
        raise ClusterError(str(e)) from None
    except OSError as e:
        raise ClusterError(f"cannot start ZooKeeper in {server.data_dir}: {e.filename}: {e.strerror}") from None


def _mode(connect: str) -> str:
    host, _, port = connect.rpartition(":")
    return server_mode(host, int(port)) or "none"


def _zookeeper_nodes(previous: ClusterInfo | None, external: str | None, asked: int | None) -> int:
    """How many ZooKeeper servers `up` starts: as asked, else as many as the data dir had, else one. A data
    dir's ZooKeeper data (topics, configs) lives in its servers' dirs: their number cannot change under it."""
    had = None
    if previous is not None and not previous.zookeeper.external:
        had = len(previous.zookeeper.members) or 1
    nodes = asked if asked is not None else had or 1
    if nodes < 1:
        raise ClusterUsageError(f"--zookeeper-nodes must be at least 1, not {nodes}")
    if external is not None and nodes > 1:
        raise ClusterUsageError("--zookeeper-nodes and --zookeeper: the ensemble at --zookeeper is not ours to start")
    if external is None and had is not None and nodes != had:
        raise ClusterUsageError(f"the data dir's ZooKeeper has {had} server(s), and its topics and configs are"
                                f" theirs: --zookeeper-nodes {nodes} would start a ZooKeeper without them (use"
                                " another --data-dir)")
    return nodes


def _check_zookeeper_answers(connect: str, timeout: float) -> None:
    """Before anything is started on it: a ZooKeeper answers at `connect` (and its chroot exists)."""
    try:
        connect_checked(connect, timeout).close()
    except ZooKeeperUnreachableError as e:
        raise ClusterError(f"cannot connect to ZooKeeper at {connect}: {e}; nothing was started") from None


def _check_zookeeper(info: ClusterInfo) -> None:
    """At once, rather than after a process started on it gave up: the cluster's ZooKeeper must be up."""
    reason = unreachable_reason(info.zookeeper.connect)
    if reason is not None:
        raise ClusterError(f"cannot connect to the cluster's ZooKeeper at {info.zookeeper.connect} ({reason}): start"
                           " the cluster with `minibroker cluster up`, or its ZooKeeper alone with `minibroker"
                           " cluster restart-zookeeper`")


def _runs(pid: int, marker: str) -> bool:
    """Whether `pid` is alive and is the process whose command line contains `marker`."""
    if not Path("/proc").is_dir():  # not Linux: the pid is all we have
        return pid_alive(pid)
    deadline = time.monotonic() + _EXEC_WINDOW_S
    while True:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            return False
        # Empty: a zombie, or a process in the middle of an exec (with --netns, `ip netns exec` execs the
        # broker after Popen has returned), whose new command line is not there yet.
        if cmdline or state == "Z" or time.monotonic() >= deadline:
            return marker.encode() in cmdline.split(b"\0")
        time.sleep(0.01)


def _network_call(func: Callable[..., T], *args: Any) -> T:
    try:
        return func(*args)
    except NetworkError as e:
        raise ClusterError(str(e)) from None


def _check_broker_overrides(props: dict[str, str]) -> None:
    """Refuse a bad --override before anything starts: a misspelt key must not cost a ZooKeeper start-up."""
    try:
        KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": HOST, **props})
    except ConfigError as e:
        raise ClusterUsageError(f"--override: {e}") from None


def _key_values(items: Iterable[str]) -> dict[str, str]:
    """`key=value` overrides, as kafka-server-start's --override takes them."""
    props = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ClusterUsageError(f"an override must be key=value, not {item!r}")
        props[key.strip()] = value
    return props

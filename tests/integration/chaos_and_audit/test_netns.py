"""`minibroker cluster up --netns` and network partitions (chaos/netns.py), with real processes: every broker in a
network namespace of its own, ZooKeeper and a controller in another, clients on this machine reaching brokers by
their addresses on the bridge. A partition leader cut off from its peers and ZooKeeper (but not from clients) must
never acknowledge an acks=all write, loses its session and its leadership, and after the heal truncates to the
new leader's log and rejoins the ISR. Needs root (we are, on CI); a short session timeout keeps it quick."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chaos import netns
from client import Consumer, Producer
from client.admin import Admin, NewTopic
from local_cluster.cluster import LocalCluster
from local_cluster.cluster_file import PARTITIONS_FILE, ClusterInfo
from local_cluster.network import network_tag
from proto.errors import ErrorCode
from proto.types import TopicPartition
from zk.client import KafkaZkClient
from zk.paths import LeaderIsrAndControllerEpoch

if TYPE_CHECKING:
    from conftest import WaitUntil

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
TOPIC = "events"
TP = TopicPartition(TOPIC, 0)
OVERRIDES = (
    "zookeeper.session.timeout.ms=4000",
    "replica.lag.time.max.ms=2000",
    "replica.fetch.wait.max.ms=200",
    "replica.fetch.backoff.ms=200",
    "replica.socket.timeout.ms=3000",
    "min.insync.replicas=2",
)
# Session timeout (4 s) + election + metadata, on a loaded 2-core machine.
DEADLINE_S = 30.0


def minibroker(*args: str, prefix: tuple[str, ...] = (), timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, sys.executable, "-m", "minibroker.cli", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout)


def ok(*args: str, timeout: float = 60) -> str:
    """stdout of a command that must succeed."""
    result = minibroker(*args, timeout=timeout)
    assert result.returncode == 0, f"minibroker {' '.join(args)}: exit {result.returncode}\n{result.stderr}"
    return result.stdout


def leftovers(data_dir: Path) -> list[str]:
    """Namespaces and links of this data dir's network that still exist."""
    tag = network_tag(data_dir)
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, check=True).stdout
    # `ip -br link` names a veth "name@peer"
    return [line.split()[0].split("@")[0] for line in (names + links).splitlines()
            if f"mb{tag}" in line or f"-{tag}-" in line]


def alive(pid: int) -> bool:
    """Running, not a zombie: the processes of a SIGKILLed `cluster up` are orphans, reaped in init's own time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def serving(address: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        try:
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.RpcError:
            return False
    return health.status == health_pb2.HealthCheckResponse.SERVING


def segment_bytes(info: ClusterInfo) -> dict[int, bytes]:
    return {b.id: (Path(b.log_dir) / f"{TOPIC}-0" / f"{0:020d}.log").read_bytes() for b in info.brokers}


def test_an_isolated_leader_acks_nothing_loses_leadership_and_rejoins_with_identical_data(
        data_dir: Path, wait_until: WaitUntil) -> None:
    info = LocalCluster(data_dir).up(brokers=3, controllers=1, overrides=OVERRIDES, netns=True, timeout=60)
    network = info.network
    assert network is not None
    assert {f"minibroker-{network_tag(data_dir)}-{h}" for h in ("core", "broker-1", "broker-2", "broker-3")} \
        == set(network.namespaces.values())
    assert sorted(leftovers(data_dir)) == sorted([*network.namespaces.values(), *network.veths.values(),
                                                  network.bridge])
    assert [(b.host, b.port) for b in info.brokers] == [(network.addresses[f"broker-{i}"], 9092) for i in (1, 2, 3)]
    assert info.zookeeper.connect == f"{network.addresses['core']}:2181"

    Admin(bootstrap_servers=info.bootstrap_servers).create_topics(
        [NewTopic(TOPIC, 1, 3)], timeout_ms=20_000)
    zk = KafkaZkClient.connect(info.zookeeper.connect, timeout=15)
    try:
        def state() -> LeaderIsrAndControllerEpoch:
            current = zk.get_partition_state(TP)
            assert current is not None
            return current

        wait_until(lambda: zk.get_partition_state(TP) is not None and len(state().isr) == 3, timeout=DEADLINE_S)
        with Producer(bootstrap_servers=info.bootstrap_servers, acks="all", enable_idempotence=True) as producer:
            acked = [f"before-{i}".encode() for i in range(100)]
            for future in [producer.send(TOPIC, value, partition=0) for value in acked]:
                future.get(timeout=DEADLINE_S)
        old = state()
        leader = info.broker(old.leader)
        others = [b for b in info.brokers if b.id != old.leader]

        netns.isolate(data_dir, old.leader, keep_clients=True)
        assert [(p.broker_id, p.keep_clients) for p in netns.partitions(data_dir)] == [(old.leader, True)]
        wait_until(lambda: serving(leader.address), timeout=DEADLINE_S, message="clients to reach the isolated broker")
        # A producer that only knows the old leader keeps sending there: nothing may be acknowledged.
        with Producer(bootstrap_servers=leader.address, acks="all", enable_idempotence=True,
                      request_timeout_ms=3000, delivery_timeout_ms=6000) as stranded:
            error = stranded.send(TOPIC, b"stranded", partition=0).exception(timeout=DEADLINE_S)
        assert error is not None, "the isolated leader acknowledged an acks=all write"
        assert error.code in {ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS,
                              ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.NOT_LEADER_OR_FOLLOWER}, error
        # Its session expires; the controller elects one of the others with a new epoch.
        wait_until(lambda: old.leader not in {b.id for b in zk.get_all_brokers()}, timeout=DEADLINE_S,
                   message="the isolated broker's registration to expire")
        wait_until(lambda: state().leader in {b.id for b in others} and state().leader_epoch > old.leader_epoch,
                   timeout=DEADLINE_S, message="a new leader")
        assert old.leader not in state().isr
        # Writes go on through the others (ISR of two = min.insync.replicas).
        with Producer(bootstrap_servers=",".join(b.address for b in others), acks="all",
                      enable_idempotence=True) as producer:
            after = [f"after-{i}".encode() for i in range(100)]
            for future in [producer.send(TOPIC, value, partition=0) for value in after]:
                future.get(timeout=DEADLINE_S)
            acked += after

        assert [p.broker_id for p in netns.heal(data_dir)] == [old.leader]
        assert not (data_dir / PARTITIONS_FILE).exists()
        wait_until(lambda: old.leader in {b.id for b in zk.get_all_brokers()}, timeout=DEADLINE_S,
                   message="the healed broker to register again")
        wait_until(lambda: set(state().isr) == {1, 2, 3}, timeout=DEADLINE_S, message="the healed broker in the ISR")
        # It dropped what it appended alone (by the new leader's epoch) and holds the same bytes as the others.
        assert f"Truncating to offset {len(acked) - len(after)}" in (data_dir / "logs" / f"broker-{old.leader}.log") \
            .read_text()
        wait_until(lambda: len(set(segment_bytes(info).values())) == 1, timeout=DEADLINE_S,
                   message="identical replicas")
        consumer = Consumer(TOPIC, bootstrap_servers=info.bootstrap_servers, auto_offset_reset="earliest",
                            enable_auto_commit=False, consumer_timeout_ms=5000)
        with consumer:
            consumed = []
            for record in consumer:
                consumed.append(record.value)
                if len(consumed) == len(acked):
                    break
        assert consumed == acked

        # From the command line, cut off from clients too, then healed: a client sees it go and come back.
        d = ("--data-dir", str(data_dir))
        assert ok("cluster", "isolate", *d, "--id", str(old.leader), "--cut-clients") == \
            f"Broker {old.leader} is cut off from its peers, the controllers and ZooKeeper and from clients\n"
        assert not serving(leader.address)
        status = minibroker("cluster", "status", *d).stdout
        assert f"network: {network.subnet} on bridge {network.bridge}, clients from {network.gateway}\n" in status
        assert re.search(rf"^broker-{old.leader} isolated since \d\d:\d\d:\d\d \(from clients too\)$", status, re.M)
        assert ok("cluster", "heal", *d) == f"Healed broker-{old.leader}\n"
        assert ok("cluster", "heal", *d) == "Nothing was cut off\n"
        wait_until(lambda: serving(leader.address), timeout=DEADLINE_S)
    finally:
        zk.close()

    # `cluster down` reconnects a broker cut off before stopping it: cut off, it would hang on ZooKeeper on its
    # way down until SIGKILLed.
    netns.isolate(data_dir, old.leader, keep_clients=True)
    assert LocalCluster(data_dir).down() == ["broker-1", "broker-2", "broker-3", "controller-1001", "zookeeper"]
    assert f"[KafkaServer id={old.leader}] shut down completed" in \
        (data_dir / "logs" / f"broker-{old.leader}.log").read_text()
    assert leftovers(data_dir) == []
    assert netns.heal(data_dir) == []  # a nemesis healing after the cluster went down finds nothing to do

    # Up again without --netns: the data dir's configs name its network's addresses, so it comes back on one,
    # holding what was acknowledged.
    again = ok("cluster", "up", "--data-dir", str(data_dir), timeout=120)
    assert again == info.bootstrap_servers + "\n"
    try:
        with Consumer(TOPIC, bootstrap_servers=again.strip(), auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=5000) as consumer:
            assert [record.value for _, record in zip(acked, consumer, strict=False)] == acked
    finally:
        ok("cluster", "down", "--data-dir", str(data_dir))
    assert leftovers(data_dir) == []


def processes_using(data_dir: Path) -> list[str]:
    """The command lines of live processes that name a file under `data_dir`."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
        except OSError:
            continue
        if str(data_dir.resolve()) + "/" in cmdline:
            found.append(cmdline)
    return found


def test_down_cleans_up_after_a_crashed_up(data_dir: Path, wait_until: WaitUntil) -> None:
    up = subprocess.Popen([sys.executable, "-m", "minibroker.cli", "cluster", "up", "--netns", "--data-dir",
                           str(data_dir), "--brokers", "2", "--controllers", "1"], cwd=REPO_ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # SIGKILLed as soon as a broker is started: no `finally` of its own cleans anything up.
        wait_until(lambda: ClusterInfo.exists(data_dir) and len(ClusterInfo.load(data_dir).brokers) >= 1,
                   timeout=DEADLINE_S, message="cluster up to start a broker")
    finally:
        up.send_signal(signal.SIGKILL)
        up.wait()
    info = ClusterInfo.load(data_dir)
    assert info.network is not None and leftovers(data_dir)
    pids = [p for p in (info.zookeeper.pid, *(c.pid for c in info.controllers), *(b.pid for b in info.brokers)) if p]
    result = minibroker("cluster", "down", "--data-dir", str(data_dir))
    assert result.returncode == 0, result.stderr
    assert f"Removed mb{network_tag(data_dir)}-" in result.stderr
    assert leftovers(data_dir) == []
    assert pids and not any(alive(pid) for pid in pids)
    # Including a broker spawned after the last save of cluster.json: only its command line names this data dir.
    assert processes_using(data_dir) == []


def test_without_root_up_says_so_and_isolate_needs_a_netns_cluster(data_dir: Path) -> None:
    # Root without CAP_NET_ADMIN and CAP_SYS_ADMIN is as good as no root for `ip netns`.
    result = minibroker("cluster", "up", "--netns", "--data-dir", str(data_dir),
                        prefix=("setpriv", "--bounding-set", "-net_admin,-sys_admin"))
    assert result.returncode == 1
    assert re.fullmatch(r"minibroker cluster up: --netns needs root: creating network namespaces, veths and a bridge"
                        r" takes CAP_NET_ADMIN and CAP_SYS_ADMIN, which this process \(uid 0\) does not have; run it"
                        r" as root \(e\.g\. with sudo\)\n", result.stderr), result.stderr
    assert not data_dir.exists() and leftovers(data_dir) == []

    cluster_file = json.dumps({"zookeeper": {"connect": "127.0.0.1:2181", "pid": None}, "controllers": [],
                               "brokers": []})
    data_dir.mkdir()
    (data_dir / "cluster.json").write_text(cluster_file)
    isolate = minibroker("cluster", "isolate", "--data-dir", str(data_dir), "--id", "1")
    assert (isolate.returncode, isolate.stderr) == (1, (
        f"minibroker cluster isolate: the cluster in {data_dir} has no network namespaces to cut: start it with"
        f" `minibroker cluster up --netns --data-dir {data_dir}` (as root)\n"))
    assert netns.heal(data_dir) == []


def test_chaos_run_partitions_a_leader_of_its_own_netns_cluster(tmp_path: Path) -> None:
    """`chaos run --faults partition-leader` starts its cluster with --netns; the cut (7 s) is long enough for the
    leader's ZooKeeper session (6 s on that cluster) to expire, and the verdict must still be clean."""
    output = tmp_path / "chaos"
    try:
        result = minibroker("chaos", "run", "--faults", "partition-leader", "--interval", "14s", "--duration", "28s",
                            "--seed", "11", "--output", str(output), "--no-audit", "--partitions", "3",
                            timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "partition-leader 1" in result.stdout and "VERDICT: every safety check held" in result.stdout
        assert re.search(r"^nemesis: partition-leader broker-\d$", result.stderr, re.M), result.stderr
    finally:
        if ClusterInfo.exists(output / "cluster"):
            LocalCluster(output / "cluster").down(kill=True)
    assert leftovers(output / "cluster") == []

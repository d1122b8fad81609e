"""A local cluster started again on its data dir, as a user's scripts do: the same addresses, the user's edits to
the brokers' server.properties kept, no wait for the sessions a SIGKILLed cluster left in ZooKeeper; one broker
restarted while the controller is dead; a broker started on Kafka's own config/server.properties; and the tools
and `cluster restart-zookeeper` with its ZooKeeper stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from local_cluster.cluster import LocalCluster
from local_cluster.ports import KAFKA_PORT_OFFSET
from tests.integration.conftest import broker_argv, wait_until_serving
from zk.client import KafkaZkClient
from zk.server import free_port, port_in_use

if TYPE_CHECKING:
    from conftest import StartProcess

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
# Kafka 2.8's config/server.properties, comments shortened, with its listeners line on ports of the test's own
# and the one thing a minibroker broker needs beyond Kafka's file: a gRPC listener (replication, the controller).
KAFKA_SERVER_PROPERTIES = """\
############################# Server Basics #############################
# The id of the broker. This must be set to a unique integer for each broker.
broker.id=0

############################# Socket Server Settings #############################
listeners=PLAINTEXT://127.0.0.1:{kafka_port},GRPC://127.0.0.1:{port}
# The number of threads that the server uses for receiving requests from the network
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################
log.dirs={log_dirs}
num.partitions=1
num.recovery.threads.per.data.dir=1

############################# Internal Topic Settings  #############################
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

############################# Log Retention Policy #############################
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000

############################# Zookeeper #############################
zookeeper.connect={zookeeper}
zookeeper.connection.timeout.ms=18000

############################# Group Coordinator Settings #############################
group.initial.rebalance.delay.ms=0
cluster.credential=s3cret-of-the-cluster
"""
UNUSED = "num.network.threads, socket.send.buffer.bytes, socket.receive.buffer.bytes"


def minibroker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minibroker.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)


def ok(*args: str) -> subprocess.CompletedProcess[str]:
    result = minibroker(*args)
    assert result.returncode == 0, f"minibroker {' '.join(args)}: exit {result.returncode}\n{result.stderr}"
    return result


def free_port_base(brokers: int) -> int:
    """N such that the ports `--port-base N` plans (ZooKeeper's, the brokers' gRPC and Kafka listeners) are all
    free right now."""
    while True:
        base = free_port()
        planned = [base, *(base + i for i in range(1, brokers + 1)),
                   *(base + KAFKA_PORT_OFFSET + i for i in range(1, brokers + 1))]
        if not any(port_in_use("127.0.0.1", port) for port in planned):
            return base


def test_up_again_keeps_addresses_and_edits_and_does_not_wait_for_dead_sessions(data_dir: Path) -> None:
    d = ("--data-dir", str(data_dir))
    base = free_port_base(2)
    first = ok("cluster", "up", *d, "--brokers", "2", "--controllers", "1", "--port-base", str(base))
    bootstrap = f"127.0.0.1:{base + 1},127.0.0.1:{base + 2}"
    assert first.stdout == bootstrap + "\n"
    assert json.loads((data_dir / "cluster.json").read_text())["zookeeper"]["connect"] == f"127.0.0.1:{base}"

    # The user edits broker 1's config: Kafka keys this broker does not use, a comment, a setting of their own.
    config = data_dir / "broker-1" / "server.properties"
    edited = (config.read_text()
              + "# mine\nnum.network.threads=3\nsocket.send.buffer.bytes=102400\nlog.retention.hours=1\n")
    config.write_text(edited)
    ok("cluster", "down", *d, "--kill")

    started = time.monotonic()
    again = ok("cluster", "up", *d)  # no --port-base: the ports it had
    elapsed = time.monotonic() - started
    assert again.stdout == bootstrap + "\n"
    assert config.read_text() == edited, "cluster up rewrote the user's server.properties"
    # The SIGKILLed brokers' and controller's sessions had not expired (18 s): their znodes were removed instead.
    assert "Removed /brokers/ids/1: broker 1 " in again.stderr and "Removed /brokers/ids/2: broker 2 " in again.stderr
    assert "Removed /controller: controller 1001 " in again.stderr
    log = (data_dir / "logs" / "broker-1.log").read_text()
    for broker_log in (log, (data_dir / "logs" / "broker-2.log").read_text()):
        assert "is registered by another ZooKeeper session" not in broker_log  # no broker waited for its old one
    # Waiting would have taken the session timeout, 18 s.
    assert elapsed < 17, f"the second up took {elapsed:.1f} s:\n{again.stderr}"
    assert ("These configurations '[num.network.threads, socket.send.buffer.bytes]' were supplied but are not used"
            " yet.") in log
    assert "\tlog.retention.hours = 1\n" in log

    # An explicit --port-base moves them, and says what it changed in the kept configs.
    ok("cluster", "down", *d)
    other = free_port_base(2)
    moved = ok("cluster", "up", *d, "--port-base", str(other))
    assert moved.stdout == f"127.0.0.1:{other + 1},127.0.0.1:{other + 2}\n"
    assert "Kept broker-1/server.properties, set zookeeper.connect, listeners\n" in moved.stderr
    assert "# mine\nnum.network.threads=3\n" in config.read_text()


def test_a_broker_restarts_while_the_only_controller_is_dead(data_dir: Path) -> None:
    """restart_broker waits for its broker (registered, serving), not for the whole cluster: a controller killed
    by a fault (the console's button, chaos) does not make a broker that serves again a failed restart."""
    cluster = LocalCluster(data_dir)
    info = cluster.up(brokers=1, controllers=1)
    cluster.send_signal("controller-1001", signal.SIGKILL)

    broker = cluster.restart_broker(1, kill=True, timeout=60)

    assert broker.pid is not None and broker.pid != info.brokers[0].pid
    with grpc.insecure_channel(broker.address) as channel:
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    with KafkaZkClient.connect(info.zookeeper.connect, timeout=10) as zk:
        assert [b.id for b in zk.get_all_brokers()] == [1]


def test_a_controller_restarts_while_a_broker_is_dead(data_dir: Path) -> None:
    """restart_controller waits for an active controller, not for the whole cluster: a broker killed by a fault
    does not make a controller that is active again a failed restart."""
    cluster = LocalCluster(data_dir)
    info = cluster.up(brokers=2, controllers=1)
    cluster.send_signal("broker-2", signal.SIGKILL)

    entry = cluster.restart_controller(1001, kill=True, timeout=60)

    assert entry.pid is not None and entry.pid != info.controllers[0].pid
    with KafkaZkClient.connect(info.zookeeper.connect, timeout=10) as zk:
        assert zk.get_controller_id() == 1001


def test_a_broker_starts_on_kafkas_server_properties(processes: StartProcess, zk_connect: str,
                                                      tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(KAFKA_SERVER_PROPERTIES.format(port=port, kafka_port=free_port(),
                                                     log_dirs=tmp_path / "kafka-logs", zookeeper=zk_connect))
    broker = processes("kafka-config-broker", broker_argv(config))
    wait_until_serving(f"127.0.0.1:{port}", broker)
    log = broker.log()
    assert f"WARNING These configurations '[{UNUSED}]' were supplied but are not used yet. (" in log
    # The dump hides the password-type key only.
    assert "\tcluster.credential = [hidden]\n" in log and "s3cret-of-the-cluster" not in log
    assert f"\tlog.dirs = {tmp_path / 'kafka-logs'}\n" in log
    assert f"\tzookeeper.connect = {zk_connect}\n" in log
    assert "\tzookeeper.connection.timeout.ms = 18000\n" in log


def test_the_tools_name_a_stopped_zookeeper_and_restart_zookeeper_starts_it_alone(data_dir: Path) -> None:
    """With ZooKeeper SIGSTOPped, topic creation and config changes end with REQUEST_TIMED_OUT naming ZooKeeper,
    where it is and whether the broker is connected to it, after zookeeper.connection.timeout.ms (Kafka's
    ZooKeeperClient stops waiting for a connection then), and the broker's log says so; they waited 60 s for a
    REQUEST_TIMED_OUT / DEADLINE_EXCEEDED that named nothing. A SIGKILLed ZooKeeper is started again alone, as
    restart-broker starts a broker."""
    d = ("--data-dir", str(data_dir))
    ok("cluster", "up", *d, "--brokers", "1", "--controllers", "1",
       "--override", "zookeeper.connection.timeout.ms=3000")
    cluster = LocalCluster(data_dir)
    connect = cluster.load().zookeeper.connect
    create = ("topics", *d, "--create", "--partitions", "1", "--replication-factor", "1", "--topic")
    ok(*create, "before")
    away = f"ZooKeeper at {connect} did not answer within 3000 ms: this broker is "
    zookeeper_pid = cluster.send_signal("zookeeper", signal.SIGSTOP)
    try:
        created = minibroker(*create, "during")
        altered = minibroker("configs", *d, "--entity-type", "topics", "--entity-name", "before", "--alter",
                             "--add-config", "retention.ms=1000")
    finally:
        os.kill(zookeeper_pid, signal.SIGCONT)
    for result in (created, altered):
        said = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
        assert result.returncode == 1 and away in said[-1], result.stdout + result.stderr
    log = (data_dir / "logs" / "broker-1.log").read_text()
    assert f"CreateTopics: {away}" in log and f"IncrementalAlterConfigs: {away}" in log

    cluster.send_signal("zookeeper", signal.SIGKILL)
    refused = minibroker("cluster", "restart-broker", *d, "--id", "1")
    assert refused.returncode == 1 and "`minibroker cluster restart-zookeeper`" in refused.stderr, refused.stderr
    restarted = ok("cluster", "restart-zookeeper", *d)
    assert restarted.stdout.startswith(f"ZooKeeper zookeeper serving on {connect} (pid "), restarted.stdout
    assert cluster.running("zookeeper")
    ok(*create, "after")  # restart-zookeeper returned once the broker served with the cluster's metadata again

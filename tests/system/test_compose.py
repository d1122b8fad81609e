"""The docker-compose cluster as a user meets it (scripts/compose_system_test.sh runs this):

build the image, `docker-compose up -d`, create a topic with `minibroker topics
--bootstrap-server localhost:<port>` from the host, produce and consume from the
host (minibroker's client on the gRPC host listeners; kcat -L/-P/-C and confluent-kafka
on the Kafka host listeners, localhost:9092-9094 by default), SIGKILL a leader's
container (`docker kill`), check the cluster heals (a new
leader, acks=all writes go on, the restarted broker rejoins every ISR, nothing
acknowledged is lost), run short `minibroker chaos run --compose`s (a leader
SIGKILLed, paused, cut off the network with minibroker's client; then with confluent-kafka
a ZooKeeper server of the three SIGKILLed, one paused, a broker's or the controller's
session expired) to a clean verdict, and `docker-compose down -v` leaves no container, volume or network behind.

Needs `docker` and `docker-compose` talking to an engine (Docker, or Podman
serving the Docker API: DOCKER_HOST); BASE_IMAGE names the image to build FROM
when no registry is reachable. Without an engine it says so and skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from chaos.compose import PROJECT_LABEL, ComposeServices
from client import Admin, Consumer, Producer
from client.admin import PartitionInfo
from zk.server import free_port

REPO = Path(__file__).resolve().parents[2]
IMAGE = "minibroker:system-test"
BROKERS = {1: "broker-1", 2: "broker-2", 3: "broker-3"}
# Every service, and the role its health check takes (minibroker/container.py).
ZOOKEEPERS = ("zookeeper-1", "zookeeper-2", "zookeeper-3")
SERVICES = {**{service: "zookeeper" for service in ZOOKEEPERS}, "controller-1001": "controller",
            "controller-1002": "controller", **{service: "broker" for service in BROKERS.values()}}
TOPIC = "compose-heal"
KAFKA_TOPIC = "compose-kafka"
HEALTHY_TIMEOUT_S = 240.0


def _no_engine_reason() -> str | None:
    for command in ("docker", "docker-compose"):
        if shutil.which(command) is None:
            return f"no `{command}` command"
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer in 30 s"
    if info.returncode != 0:
        return f"no container engine answers `docker info` (DOCKER_HOST={os.environ.get('DOCKER_HOST')}): " + (
            info.stderr.strip().splitlines() or ["?"])[-1]
    return None


def _until(condition: Callable[[], bool], timeout: float, interval: float = 1.0) -> float | None:
    """Seconds it took until `condition`, or None at the deadline."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout:
            return None
        time.sleep(interval)
    return time.monotonic() - began


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> float:
    took = _until(condition, timeout)
    if took is None:
        pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
    return took


@dataclass
class ComposeCluster:
    project: str
    env: dict[str, str]
    host_ports: dict[int, int]  # broker id: the host port of its gRPC listener (GRPC_HOST)
    kafka_host_ports: dict[int, int]  # broker id: the host port of its Kafka listener (PLAINTEXT_HOST)
    services: ComposeServices

    @property
    def bootstrap(self) -> str:
        return ",".join(f"localhost:{port}" for port in self.host_ports.values())

    @property
    def kafka_bootstrap(self) -> str:
        return ",".join(f"localhost:{port}" for port in self.kafka_host_ports.values())

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["docker-compose", "--project-name", self.project, *args], cwd=REPO, env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def healthy(self, service: str) -> bool:
        try:
            container = self.services.container(service)
        except Exception:
            return False
        check = subprocess.run(["docker", "exec", container, "python", "-m", "minibroker.container", "health",
                                SERVICES[service]], capture_output=True, timeout=60, check=False)
        return check.returncode == 0

    def partitions(self) -> list[PartitionInfo]:
        with Admin(bootstrap_servers=self.bootstrap) as admin:
            [topic] = admin.describe_topics([TOPIC])
        return list(topic.partitions)

    def leftovers(self) -> dict[str, list[str]]:
        """What of the project is still there, by kind."""
        label = f"label={PROJECT_LABEL}={self.project}"
        listings = {
            "containers": ["docker", "ps", "--all", "--quiet", "--filter", label],
            "volumes": ["docker", "volume", "ls", "--quiet", "--filter", label],
            "networks": ["docker", "network", "ls", "--quiet", "--filter", label],
        }
        return {kind: subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
                for kind, argv in listings.items()}


def _log(message: str) -> None:
    print(f"compose system test: {message}", file=sys.stderr, flush=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[ComposeCluster]:
    reason = _no_engine_reason()
    if reason is not None:
        _log("!" * 60)
        _log(f"SKIPPED: no container runtime: {reason}")
        _log("run scripts/compose_system_test.sh, which starts one where it can")
        _log("!" * 60)
        pytest.skip(f"COMPOSE SYSTEM TEST NOT RUN, no container runtime: {reason}"
                    " (scripts/compose_system_test.sh prepares one where it can)")
    project = f"mbsystest{os.getpid()}"
    ports = {broker_id: free_port() for broker_id in BROKERS}
    kafka_ports = {broker_id: free_port() for broker_id in BROKERS}
    env = {**os.environ, "MINIBROKER_IMAGE": IMAGE, "DOCKER_BUILDKIT": "0",
           **{f"ZOOKEEPER_{i}_HOST_PORT": str(free_port()) for i in range(1, len(ZOOKEEPERS) + 1)},
           **{f"BROKER_{broker_id}_GRPC_HOST_PORT": str(port) for broker_id, port in ports.items()},
           **{f"BROKER_{broker_id}_HOST_PORT": str(port) for broker_id, port in kafka_ports.items()}}
    base_image = env.get("BASE_IMAGE", "python:3.11-slim-bookworm")
    began = time.monotonic()
    build = subprocess.run(["docker", "build", "--quiet", "--tag", IMAGE, "--build-arg", f"BASE_IMAGE={base_image}",
                            "."], cwd=REPO, env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert build.returncode == 0, f"docker build failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    _log(f"image {IMAGE} built FROM {base_image} in {time.monotonic() - began:.1f}s")
    compose = ComposeCluster(project, env, ports, kafka_ports, ComposeServices(project))
    try:
        began = time.monotonic()
        up = compose.compose("up", "--detach", "--no-build")
        assert up.returncode == 0, f"docker-compose up failed:\n{up.stderr[-3000:]}"
        _wait(lambda: all(compose.healthy(s) for s in SERVICES), HEALTHY_TIMEOUT_S, "every service healthy")
        _log(f"docker-compose up to every service healthy: {time.monotonic() - began:.1f}s")
        yield compose
    finally:
        compose.compose("down", "--volumes", "--remove-orphans", "--timeout", "10")


def test_topics_produce_and_consume_from_the_host(cluster: ComposeCluster) -> None:
    created = subprocess.run(
        [sys.executable, "-m", "minibroker.cli", "topics", "--create", "--topic", TOPIC, "--partitions", "3",
         "--replication-factor", "3", "--config", "min.insync.replicas=2",
         "--bootstrap-server", f"localhost:{cluster.host_ports[1]}"],
        capture_output=True, text=True, timeout=120, check=False)
    assert created.returncode == 0 and f"Created topic {TOPIC}." in created.stdout, created.stderr
    _wait(lambda: all(len(p.isr) == 3 for p in cluster.partitions()), 60, "three in-sync replicas per partition")

    with Producer(bootstrap_servers=f"localhost:{cluster.host_ports[2]}", acks="all",
                  enable_idempotence=True) as producer:
        for i in range(30):
            producer.send(TOPIC, f"before-{i}".encode(), key=str(i).encode())
        producer.flush(timeout=60)
    assert sorted(_consume_all(cluster, 30)) == sorted(f"before-{i}".encode() for i in range(30))


def test_kafka_clients_on_the_kafka_host_listeners(cluster: ComposeCluster) -> None:
    """kcat -L/-P/-C and confluent-kafka against the published Kafka listeners, as a Kafka user would."""
    bootstrap = f"localhost:{cluster.kafka_host_ports[1]}"
    created = subprocess.run(
        [sys.executable, "-m", "minibroker.cli", "topics", "--create", "--topic", KAFKA_TOPIC, "--partitions", "3",
         "--replication-factor", "3", "--config", "min.insync.replicas=2",
         "--bootstrap-server", f"localhost:{cluster.host_ports[1]}"],
        capture_output=True, text=True, timeout=120, check=False)
    assert created.returncode == 0, created.stderr

    def kcat(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(["kcat", "-b", bootstrap, *args], input=stdin, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, f"kcat {' '.join(args)}: {done.stderr}"
        return done.stdout

    def every_partition_led() -> bool:
        listing = kcat("-L", "-t", KAFKA_TOPIC)
        return listing.count("leader: -1") == 0 and listing.count("partition ") == 3
    _wait(every_partition_led, 60, f"kcat -L to show a leader for each partition of {KAFKA_TOPIC}")
    listing = kcat("-L")
    # The brokers as advertised on the listener kcat connected to: the host's Kafka ports, never a gRPC one.
    for broker_id, port in cluster.kafka_host_ports.items():
        assert f"broker {broker_id} at localhost:{port}" in listing, listing
    assert all(f":{port}" not in listing for port in cluster.host_ports.values()), listing

    kcat("-P", "-t", KAFKA_TOPIC, "-K:", "-X", "acks=all", stdin="".join(f"k{i}:kcat-{i}\n" for i in range(20)))
    producer = KafkaProducer({"bootstrap.servers": cluster.kafka_bootstrap, "enable.idempotence": True,
                              "acks": "all"})
    for i in range(20):
        producer.produce(KAFKA_TOPIC, f"confluent-{i}".encode(), key=f"k{i}".encode())
    assert producer.flush(60) == 0
    expected = sorted([f"kcat-{i}" for i in range(20)] + [f"confluent-{i}" for i in range(20)])

    read = kcat("-C", "-t", KAFKA_TOPIC, "-o", "beginning", "-e", "-q", "-f", "%s\n").split()
    assert sorted(read) == expected

    consumer = KafkaConsumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": "compose-system-test",
                              "enable.auto.commit": False})
    consumer.assign([KafkaTopicPartition(KAFKA_TOPIC, p, OFFSET_BEGINNING) for p in range(3)])
    values: list[str] = []
    deadline = time.monotonic() + 60
    while len(values) < len(expected) and time.monotonic() < deadline:
        for message in consumer.consume(100, timeout=1):
            assert message.error() is None, message.error()
            values.append(message.value().decode())
    consumer.close()
    assert sorted(values) == expected


def test_a_killed_leader_is_replaced_and_its_broker_rejoins(cluster: ComposeCluster) -> None:
    victim = cluster.partitions()[0].leader
    led_by_victim = {p.partition for p in cluster.partitions() if p.leader == victim}
    service = BROKERS[victim]
    cluster.services.kill(service)  # SIGKILL: no controlled shutdown, a torn log tail is possible
    _log(f"killed {service} (leader of partitions {sorted(led_by_victim)})")

    def new_leaders() -> bool:
        partitions = cluster.partitions()
        return all(p.leader not in (-1, victim) and victim not in p.isr for p in partitions)

    took = _wait(new_leaders, 120, f"new leaders and ISRs without broker {victim}")
    _log(f"new leaders {[(p.partition, p.leader) for p in cluster.partitions()]} after {took:.1f}s")

    # acks=all with min.insync.replicas=2 goes on with two brokers, each send acknowledged.
    survivor = next(port for broker_id, port in cluster.host_ports.items() if broker_id != victim)
    with Producer(bootstrap_servers=f"localhost:{survivor}", acks="all", enable_idempotence=True) as producer:
        for i in range(30):
            producer.send(TOPIC, f"during-{i}".encode(), key=str(i).encode()).get(timeout=60)

    # An engine may restart the container by its restart policy; if it has not, restart it as an operator would.
    if _until(lambda: cluster.services.running(service), 10) is None:
        cluster.services.start(service)
    took = _wait(lambda: all(victim in p.isr for p in cluster.partitions()), 180,
                 f"broker {victim} back in every ISR")
    _log(f"{service} back in every ISR {took:.1f}s after its restart")

    expected = [f"{phase}-{i}".encode() for phase in ("before", "during") for i in range(30)]
    assert sorted(_consume_all(cluster, len(expected))) == sorted(expected)


# minibroker's client on the gRPC host ports, librdkafka on the Kafka host ports; brokers' faults, then the
# ZooKeeper ensemble's (a server killed, one paused, a session expired under a running process).
@pytest.mark.parametrize(("client", "faults"), [("minibroker", "kill-leader,pause-leader,partition-leader"),
                                                ("confluent-kafka", "kill-zookeeper,pause-zookeeper,expire-session")])
def test_a_chaos_run_against_the_compose_cluster_holds(cluster: ComposeCluster, client: str, faults: str,
                                                       tmp_path: Path) -> None:
    began = time.monotonic()
    chaos = subprocess.run(
        [sys.executable, "-m", "minibroker.cli", "chaos", "run", "--compose", cluster.project, "--client", client,
         "--topic", f"chaos-{client}", "--faults", faults, "--interval", "10s",
         "--duration", "40s", "--seed", "6", "--no-audit", "--output", str(tmp_path / "chaos")],
        env=cluster.env, capture_output=True, text=True, timeout=900, check=False)
    _log(f"chaos run --compose --client {client} in {time.monotonic() - began:.1f}s:\n{chaos.stdout}")
    bootstrap = cluster.kafka_bootstrap if client == "confluent-kafka" else cluster.bootstrap
    assert f"{client} clients at {bootstrap}" in chaos.stderr, chaos.stderr[-3000:]
    assert chaos.returncode == 0, f"{chaos.stdout}\n{chaos.stderr[-5000:]}"
    assert "VERDICT: every safety check held" in chaos.stdout
    healed = [line for line in chaos.stderr.splitlines() if line.startswith("nemesis: healed")]
    assert {line.split()[2] for line in healed} == set(faults.split(",")), healed


def test_down_leaves_nothing_behind(cluster: ComposeCluster) -> None:
    down = cluster.compose("down", "--volumes", "--remove-orphans", "--timeout", "10")
    assert down.returncode == 0, down.stderr
    assert cluster.leftovers() == {"containers": [], "volumes": [], "networks": []}


def _consume_all(cluster: ComposeCluster, expected: int) -> list[bytes]:
    """Every value in the topic from the beginning, read from the host (fails if fewer than `expected` arrive)."""
    values: list[bytes] = []
    with Consumer(TOPIC, bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        deadline = time.monotonic() + 60
        while len(values) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(record.value for record in records if record.value is not None)
    return values

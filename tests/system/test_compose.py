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
Between them `minibroker console --bootstrap-server localhost:<port>` shows the whole cluster from the host.

Needs `docker` and `docker-compose` talking to an engine (Docker, or Podman
serving the Docker API: DOCKER_HOST); BASE_IMAGE names the image to build FROM
when no registry is reachable. Without an engine it says so and skips.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest
from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from selenium import webdriver

from client import Consumer, Producer
from tests.integration.console.console_browser import headless_chromium, screenshot
from tests.system.compose_cluster import BROKERS, ComposeCluster, compose_cluster, log, until, wait

TOPIC = "compose-heal"
KAFKA_TOPIC = "compose-kafka"


@pytest.fixture(scope="module")
def cluster() -> Iterator[ComposeCluster]:
    yield from compose_cluster(["docker-compose.yml"], "mbsystest")


def test_topics_produce_and_consume_from_the_host(cluster: ComposeCluster) -> None:
    created = subprocess.run(
        [sys.executable, "-m", "minibroker.cli", "topics", "--create", "--topic", TOPIC, "--partitions", "3",
         "--replication-factor", "3", "--config", "min.insync.replicas=2",
         "--bootstrap-server", f"localhost:{cluster.host_ports[1]}"],
        capture_output=True, text=True, timeout=120, check=False)
    assert created.returncode == 0 and f"Created topic {TOPIC}." in created.stdout, created.stderr
    wait(lambda: all(len(p.isr) == 3 for p in cluster.partitions(TOPIC)), 60, "three in-sync replicas per partition")

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
    wait(every_partition_led, 60, f"kcat -L to show a leader for each partition of {KAFKA_TOPIC}")
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
            value = message.value()
            assert message.error() is None and value is not None, message.error()
            values.append(value.decode())
    consumer.close()
    assert sorted(values) == expected


def test_the_console_from_the_host_shows_the_whole_cluster(cluster: ComposeCluster, tmp_path: Path) -> None:
    """`minibroker console --bootstrap-server localhost:<published port>`, nothing else, as a user on the host runs
    it: the controllers and ZooKeeper answer on in-container names only, so their events, the controller epoch
    and ZooKeeper's modes come through the brokers (forwarded DescribeEvents); the bytes from DescribeLogDirs on
    the Kafka listener a broker advertises on the host. Read from the page's event stream (server-sent events)
    while a consumer group holds the topic."""
    group = "compose-console"
    consumer = KafkaConsumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": group,
                              "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([KAFKA_TOPIC])
    read = 0
    deadline = time.monotonic() + 60
    while read < 40 and time.monotonic() < deadline:  # every record kcat and confluent-kafka wrote, from each partition
        read += sum(1 for m in consumer.consume(10, timeout=1) if m.error() is None)
    assert read == 40, f"the group's consumer read {read} records of 40"
    consumer.commit(asynchronous=False)
    log_file = tmp_path / "console.log"
    with log_file.open("w") as output:
        console = subprocess.Popen(
            [sys.executable, "-m", "minibroker.cli", "console", "--bootstrap-server",
             f"localhost:{cluster.host_ports[1]}", "--port", "0"], stdout=output, stderr=subprocess.STDOUT)
    try:
        wait(lambda: "minibroker console at http://" in log_file.read_text() or console.poll() is not None, 60,
             "the console to print its URL")
        url = re.search(r"http://127\.0\.0\.1:\d+/", log_file.read_text())
        assert url is not None, log_file.read_text()
        with urlopen(f"{url.group(0)}api/stream?topic={KAFKA_TOPIC}", timeout=30) as stream:
            picture = _picture_where(stream, lambda p: _shows_everything(p, _advertised(cluster)), 120)
        with headless_chromium() as browser:
            browser.get(f"{url.group(0)}?topic={KAFKA_TOPIC}")
            _check_the_page(browser, picture["zookeeper"]["controller_id"], _advertised(cluster))
            screenshot(browser, tmp_path, "console-compose.png")
    finally:
        console.terminate()
        console.wait(30)
        consumer.close()
    log(f"the console's picture of the compose cluster: {json.dumps(_summary(picture))}")
    assert picture["errors"] == [], picture["errors"]


def _advertised(cluster: ComposeCluster) -> dict[int, list[str]]:
    """Each broker's listeners as docker-compose.yml advertises them: in-container names, and localhost on the
    ports published for this run."""
    return {broker_id: [f"PLAINTEXT://{service}:29092", f"PLAINTEXT_HOST://localhost:{cluster.kafka_host_ports[broker_id]}",
                        f"GRPC://{service}:29192", f"GRPC_HOST://localhost:{cluster.host_ports[broker_id]}"]
            for broker_id, service in BROKERS.items()}


def _shows_everything(picture: dict[str, Any], listeners: dict[int, list[str]]) -> bool:
    """Each part of the page the issue asks for, with the compose cluster's own figures."""
    cluster, zookeeper = picture["cluster"], picture["zookeeper"]
    topic: dict[str, Any] = next((t for t in picture["topics"] if t["name"] == KAFKA_TOPIC), {})
    group: dict[str, Any] = next((g for g in picture["groups"] if g["group_id"] == "compose-console"), {})
    controllers = {e["source"] for e in picture["events"] if e["source"].startswith("controller-")}
    return bool(
        sorted(b["id"] for b in cluster.get("brokers", []) if b["answering"]) == sorted(BROKERS)
        and {b["id"]: b["listeners"] for b in cluster["brokers"]} == listeners
        and cluster.get("controller_id") in (1001, 1002)
        and sorted(s["mode"] for s in zookeeper.get("servers", [])) == ["follower", "follower", "leader"]
        and [s["connect"] for s in zookeeper["servers"]] == [f"zookeeper-{i}:2181" for i in (1, 2, 3)]
        and (zookeeper.get("controller_epoch") or 0) >= 1
        and controllers == {f"controller-{cluster['controller_id']}"}
        and any(e["kind"] == "Election" and e["topic"] == KAFKA_TOPIC for e in picture["events"])
        and any(e["source"].startswith("broker-") and e["kind"] == "LeaderEpoch" for e in picture["events"])
        and len(picture["partitions"]) == 3
        and all(len(p["bars"]) == 3 and (p["high_watermark"] or 0) > 0 for p in picture["partitions"])
        and (topic.get("bytes") or 0) > 0 and topic.get("configs") == {"min.insync.replicas": "2"}
        and group.get("state") == "Stable" and len(group.get("members", [])) == 1
        and {row["partition"] for row in group.get("partitions", []) if row["topic"] == KAFKA_TOPIC} == {0, 1, 2}
        and not picture["errors"])


def _check_the_page(browser: webdriver.Chrome, controller_id: int, listeners: dict[int, list[str]]) -> None:
    """What the page draws of it: each broker's listeners, ZooKeeper's members with their modes and the active
    controller in the cluster panel (no process list here), the epoch in the header, the controller's elections
    on the timeline, the topic's bytes and the group."""

    def read() -> dict[str, Any]:
        return browser.execute_script("""
            const text = (selector) => [...document.querySelectorAll(selector)].map((e) => e.textContent);
            const topic = document.querySelector(arguments[0]);
            const rows = [...document.querySelectorAll("#cluster tr[data-process]")];
            return {cluster: rows.map((r) => [r.dataset.process, r.querySelector(".hint").textContent]),
                    listeners: rows.map((r) => [r.dataset.process,
                                                [...r.querySelectorAll(".listener")].map((e) => e.textContent)]),
                    summary: text("#summary span").join(" | "),
                    elections: text('#timeline li[data-kind="Election"]').length,
                    bytes: topic ? Number(topic.dataset.bytes) : -1, groups: text("#groups .group").join(" | ")};
            """, f'#topics tr[data-topic="{KAFKA_TOPIC}"]') or {}

    def complete(page: dict[str, Any]) -> bool:
        rows = dict(page.get("cluster", []))  # name: detail
        modes = sorted(rows.get(f"zookeeper-{i}:2181", "") for i in (1, 2, 3))
        return bool(modes == ["mode follower", "mode follower", "mode leader"]
                    and rows.get(f"controller-{controller_id}") == "active"
                    and dict(page["listeners"]) == {
                        **{f"broker {b}": shown for b, shown in listeners.items()},
                        **{name: [] for name in rows if not name.startswith("broker ")}}
                    and "(epoch " in page["summary"] and page["elections"] > 0 and page["bytes"] > 0
                    and "compose-console Stable" in page["groups"])

    pages: list[dict[str, Any]] = []

    def shown() -> bool:
        pages.append(read())
        return complete(pages[-1])

    if until(shown, 60) is None:
        pytest.fail(f"the page still shows {pages[-1]}")


def _picture_where(stream: Any, condition: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
    """The first picture the event stream pushes that meets `condition` (the last one seen, at the deadline)."""
    deadline = time.monotonic() + timeout
    picture: dict[str, Any] = {}
    for line in stream:
        if line.startswith(b"data: "):
            picture = json.loads(line[len(b"data: "):])
            if condition(picture) or time.monotonic() > deadline:
                break
    if not condition(picture):
        pytest.fail(f"after {timeout:.0f}s the console still shows {json.dumps(_summary(picture))}")
    return picture


def _summary(picture: dict[str, Any]) -> dict[str, Any]:
    return {"cluster": picture.get("cluster"), "zookeeper": picture.get("zookeeper"), "errors": picture.get("errors"),
            "event sources": sorted({e["source"] for e in picture.get("events", [])}),
            "partitions": [(p["partition"], p["high_watermark"], len(p["bars"]))
                           for p in picture.get("partitions", [])],
            "topics": picture.get("topics"), "groups": picture.get("groups")}


def test_a_killed_leader_is_replaced_and_its_broker_rejoins(cluster: ComposeCluster) -> None:
    victim = cluster.partitions(TOPIC)[0].leader
    led_by_victim = {p.partition for p in cluster.partitions(TOPIC) if p.leader == victim}
    service = BROKERS[victim]
    cluster.services.kill(service)  # SIGKILL: no controlled shutdown, a torn log tail is possible
    log(f"killed {service} (leader of partitions {sorted(led_by_victim)})")

    def new_leaders() -> bool:
        partitions = cluster.partitions(TOPIC)
        return all(p.leader not in (-1, victim) and victim not in p.isr for p in partitions)

    took = wait(new_leaders, 120, f"new leaders and ISRs without broker {victim}")
    log(f"new leaders {[(p.partition, p.leader) for p in cluster.partitions(TOPIC)]} after {took:.1f}s")

    # acks=all with min.insync.replicas=2 goes on with two brokers, each send acknowledged.
    survivor = next(port for broker_id, port in cluster.host_ports.items() if broker_id != victim)
    with Producer(bootstrap_servers=f"localhost:{survivor}", acks="all", enable_idempotence=True) as producer:
        for i in range(30):
            producer.send(TOPIC, f"during-{i}".encode(), key=str(i).encode()).get(timeout=60)

    # An engine may restart the container by its restart policy; if it has not, restart it as an operator would.
    if until(lambda: cluster.services.running(service), 10) is None:
        cluster.services.start(service)
    took = wait(lambda: all(victim in p.isr for p in cluster.partitions(TOPIC)), 180,
                 f"broker {victim} back in every ISR")
    log(f"{service} back in every ISR {took:.1f}s after its restart")

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
    log(f"chaos run --compose --client {client} in {time.monotonic() - began:.1f}s:\n{chaos.stdout}")
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

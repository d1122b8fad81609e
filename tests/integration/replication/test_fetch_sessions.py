"""Followers fetch in KIP-227 fetch sessions (broker/replication/fetch_session.py, broker/fetcher/
fetch_session_handler.py) on three real brokers: each leader holds one session per follower with every partition
it leads, acks=all records written and read with confluent-kafka go through them, and a SIGKILLed and restarted
broker rejoins every ISR through new sessions. (FETCH_SESSION_ID_NOT_FOUND's fallback needs a fetcher thread
that outlives its leader's restart; its rules are unit-tested: test_broker_fetch_session_handler.py.)"""

from __future__ import annotations

import time
import urllib.request

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import BrokerProcess, StartBroker, StartController, WaitUntil, wait_until_serving
from tests.integration.kafka_cluster import start_kafka_cluster
from zk.server import free_port

pytestmark = pytest.mark.integration

TOPIC = "sessions"
PARTITIONS = 30
BROKER_IDS = (1, 2, 3)
DEADLINE_S = 120.0
# Kafka's default fetch wait: the followers' idle polls are what sessions make cheap.
OVERRIDES = {"replica.fetch.wait.max.ms": "500", "replica.lag.time.max.ms": "10000"}


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {sample.name: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if not sample.labels}


def sessions(port: int) -> tuple[float, float, float]:
    """(fetch sessions held, partitions held in them, partitions led) on the broker scraped."""
    m = scrape(port)
    return (m["kafka_server_FetchSessionCache_NumIncrementalFetchSessions"],
            m["kafka_server_FetchSessionCache_NumIncrementalFetchPartitionsCached"],
            m["kafka_server_ReplicaManager_LeaderCount"])


def not_led_with_full_isr(admin: AdminClient) -> list[int]:
    topic = admin.list_topics(TOPIC, timeout=30).topics[TOPIC]
    if topic.error is not None:
        return list(range(PARTITIONS))
    return [p for p in range(PARTITIONS) if p not in topic.partitions or topic.partitions[p].leader < 0
            or len(topic.partitions[p].isrs) != len(BROKER_IDS)]


def produce_one_each(bootstrap: str, round_: int) -> None:
    failed: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for p in range(PARTITIONS):
        producer.produce(TOPIC, f"{round_}-{p}".encode(), partition=p,
                         on_delivery=lambda err, msg: failed.append(str(err)) if err is not None else None)
    assert producer.flush(DEADLINE_S) == 0, "records still unacknowledged"
    assert failed == []


def read_all(bootstrap: str, expected: int) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    read: dict[int, list[bytes]] = {}
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + DEADLINE_S
        while sum(map(len, read.values())) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None and message.partition() is not None
            read.setdefault(message.partition(), []).append(value)
    finally:
        consumer.close()
    return read


def test_followers_fetch_in_sessions_and_a_restarted_broker_opens_new_ones(
        start_broker: StartBroker, start_controller: StartController, wait_until: WaitUntil) -> None:
    metrics_ports = {b: free_port() for b in BROKER_IDS}

    def start(broker_id: int, wait: bool) -> BrokerProcess:
        return start_broker(broker_id, {**OVERRIDES, "metrics.port": str(metrics_ports[broker_id])}, wait=wait)

    def start_each(broker_ids: tuple[int, ...], _overrides: object) -> dict[int, BrokerProcess]:
        started = {b: start(b, wait=False) for b in broker_ids}
        for broker in started.values():
            wait_until_serving(broker.address, broker.process)
        return started

    cluster = start_kafka_cluster(start_each, start_controller)
    brokers, bootstrap = cluster.brokers, cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, len(BROKER_IDS))], operation_timeout=60)[TOPIC].result()
    wait_until(lambda: not not_led_with_full_isr(admin), DEADLINE_S, "every partition led with a full ISR")

    def holds_one_session_per_follower(broker_id: int, exactly: bool = True) -> bool:
        held, cached, led = sessions(metrics_ports[broker_id])
        # Two followers, one fetcher thread each (num.replica.fetchers=1): each session holds what is led here.
        followers = len(BROKER_IDS) - 1 if led else 0
        if exactly:
            return (held, cached) == (followers, followers * led)
        return held >= followers and cached >= followers * led

    for b in BROKER_IDS:
        wait_until(lambda b=b: holds_one_session_per_follower(b), DEADLINE_S, f"broker {b}'s sessions")

    produce_one_each(bootstrap, 0)
    assert read_all(bootstrap, PARTITIONS) == {p: [f"0-{p}".encode()] for p in range(PARTITIONS)}

    # A SIGKILLed and restarted broker: its fetchers open new sessions with the leaders (back in every ISR
    # through them), and it answers whatever it leads again in sessions of its own.
    brokers[1].process.popen.kill()
    brokers[1].process.popen.wait(30)
    start(1, wait=True)
    wait_until(lambda: not not_led_with_full_isr(admin), DEADLINE_S, "broker 1 back in every ISR")
    wait_until(lambda: holds_one_session_per_follower(1), DEADLINE_S, "the restarted broker's sessions")
    # The others still hold the sessions broker 1 had before its restart, until a slot is needed (as Kafka).
    for b in (2, 3):
        wait_until(lambda b=b: holds_one_session_per_follower(b, exactly=False), DEADLINE_S, f"broker {b}'s")
    produce_one_each(bootstrap, 1)
    assert read_all(bootstrap, 2 * PARTITIONS) == {p: [f"0-{p}".encode(), f"1-{p}".encode()]
                                                   for p in range(PARTITIONS)}

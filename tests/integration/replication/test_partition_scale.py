"""A cluster with thousands of partitions works (issue 27's smoke test): 2,000 partitions at RF=3 on three
brokers, each partition led with its whole ISR, a record produced to each and read back from each by a real
client (confluent-kafka). Correctness only: what each step costs is bench/partitions.py's to measure."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import StartBrokers, StartController
from tests.integration.kafka_cluster import start_kafka_cluster

pytestmark = pytest.mark.integration

TOPIC = "wide"
PARTITIONS = 2000
REPLICATION_FACTOR = 3
# Generous for a loaded 2-core machine running the three brokers, the controller and ZooKeeper: these are
# deadlines for conditions, not timings.
DEADLINE_S = 300.0


def not_led_with_full_isr(admin: AdminClient) -> list[int]:
    """The partitions whose metadata (as clients see it) lacks a leader or a replica in the ISR."""
    topic = admin.list_topics(TOPIC, timeout=30).topics[TOPIC]
    if topic.error is not None:
        return list(range(PARTITIONS))
    return [p for p in range(PARTITIONS) if p not in topic.partitions or topic.partitions[p].leader < 0
            or len(topic.partitions[p].isrs) != REPLICATION_FACTOR]


def test_two_thousand_partitions_are_each_led_with_a_full_isr_and_serve_a_record(
    start_brokers: StartBrokers, start_controller: StartController,
) -> None:
    # Kafka's default fetch wait: the fixture's shorter one multiplies the followers' idle rounds by five.
    cluster = start_kafka_cluster(start_brokers, start_controller, {"replica.fetch.wait.max.ms": "500"})
    # librdkafka's socket.timeout.ms (60 s) bounds every request, CreateTopics' operation timeout or not.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": int(DEADLINE_S * 1000)})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, REPLICATION_FACTOR)],
                        operation_timeout=DEADLINE_S, request_timeout=DEADLINE_S)[TOPIC].result()
    deadline = time.monotonic() + DEADLINE_S
    while missing := not_led_with_full_isr(admin):
        assert time.monotonic() < deadline, f"{len(missing)} partitions without a leader or a full ISR: {missing[:20]}"
        time.sleep(0.5)  # a condition polled under a deadline: the LeaderAndIsr requests and the followers

    failed: list[str] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 20})
    for p in range(PARTITIONS):
        producer.produce(TOPIC, f"record-{p}".encode(), partition=p,
                         on_delivery=lambda err, msg: failed.append(str(err)) if err is not None else None)
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0, "records still unacknowledged"
    assert failed == []

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        read: dict[int, bytes | None] = {}
        deadline = time.monotonic() + DEADLINE_S
        while len(read) < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            partition = message.partition()
            assert partition is not None and partition not in read, f"a second record in partition {partition}"
            assert message.offset() == 0
            read[partition] = message.value()
    finally:
        consumer.close()
    assert read == {p: f"record-{p}".encode() for p in range(PARTITIONS)}

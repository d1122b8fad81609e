"""confluent-kafka (librdkafka) against the brokers' Kafka listeners: admin, metadata, produce with every codec
the broker reads, acks 0/1/all, the idempotent producer, consume by assign and seek."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster

pytestmark = pytest.mark.integration

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController) -> KafkaCluster:
    return start_kafka_cluster(start_brokers, start_controller)


def create_topic(bootstrap: str, name: str, partitions: int = 3, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer: its handle serves the future
    futures = admin.create_topics([NewTopic(name, partitions, 3, config=config or {})], operation_timeout=30)
    futures[name].result(timeout=60)
    wait_for_leaders(bootstrap, name, partitions)


def wait_for_leaders(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Until every partition's leader answers ListOffsets: CreateTopics returns once the metadata knows the
    topic, and an acks=0 batch sent before its leader took over is lost (as in Kafka: no answer, no retry)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        deadline = time.monotonic() + timeout
        for partition in range(partitions):
            while True:
                try:
                    consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
    finally:
        consumer.close()


def consume(bootstrap: str, assignments: list[TopicPartition], expected: int, timeout: float = 30.0) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign(assignments)
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append(message)
        return got
    finally:
        consumer.close()


def test_admin_creates_describes_and_deletes_topics(cluster: KafkaCluster, wait_until: WaitUntil) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    create_topic(cluster.bootstrap, "admin-t", 3, {"min.insync.replicas": "2", "retention.ms": "3600000"})
    metadata = admin.list_topics("admin-t", timeout=10)
    assert metadata.controller_id in cluster.brokers, "Kafka clients send CreateTopics to a broker"
    partitions = metadata.topics["admin-t"].partitions
    assert sorted(partitions) == [0, 1, 2]
    for p in partitions.values():
        assert sorted(p.replicas) == [1, 2, 3] and p.leader in p.replicas and p.error is None
    # Brokers are described as reached on the Kafka listener, never on the gRPC one.
    assert {b.port for b in metadata.brokers.values()} == {b.kafka_port for b in cluster.brokers.values()}

    with pytest.raises(KafkaException) as exists:
        create_topic(cluster.bootstrap, "admin-t")
    assert exists.value.args[0].name() == "TOPIC_ALREADY_EXISTS"

    resource = ConfigResource(ConfigResource.Type.TOPIC, "admin-t")
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["min.insync.replicas"].value == "2" and not configs["min.insync.replicas"].is_default
    assert configs["retention.ms"].value == "3600000"
    assert configs["segment.bytes"].value == str(1 << 30) and configs["segment.bytes"].is_default
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    assert admin.describe_configs([broker])[broker].result(timeout=30)["broker.id"].value == "1"

    admin.delete_topics(["admin-t"], operation_timeout=30)["admin-t"].result(timeout=60)
    wait_until(lambda: "admin-t" not in admin.list_topics(timeout=10).topics, message="topic deleted")


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_codec_keys_and_headers_round_trip(cluster: KafkaCluster, acks: str) -> None:
    topic = f"codecs-{acks}"
    create_topic(cluster.bootstrap, topic)
    sent = []
    base_ts = int(time.time() * 1000) - 60_000
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks, "compression.type": codec,
                             "linger.ms": 5})
        for i in range(200):
            key, value = f"k{i % 11}".encode(), f"{codec}-{i}".encode()
            headers = [("codec", codec.encode()), ("i", str(i).encode())]
            producer.produce(topic, value, key, headers=headers, timestamp=base_ts + i)
            sent.append((key, value, tuple(headers)))
        assert producer.flush(30) == 0
    got = consume(cluster.bootstrap, [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)], len(sent))
    assert Counter((m.key(), m.value(), tuple(m.headers())) for m in got) == Counter(sent)
    by_partition: dict[int, list[int]] = {}
    for m in got:
        by_partition.setdefault(m.partition(), []).append(m.offset())
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets))), "offsets contiguous from 0 in every partition"


def test_idempotent_producer_with_acks_all_and_min_insync(cluster: KafkaCluster) -> None:
    create_topic(cluster.bootstrap, "idem", 1, {"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                         "max.in.flight.requests.per.connection": 5, "linger.ms": 2})
    errors = []
    for i in range(3000):
        producer.produce("idem", str(i).encode(), on_delivery=lambda e, _m: errors.append(e) if e else None)
    assert producer.flush(60) == 0 and errors == []
    got = consume(cluster.bootstrap, [TopicPartition("idem", 0, OFFSET_BEGINNING)], 3000)
    assert [int(m.value()) for m in got] == list(range(3000)), "in order, none lost, none duplicated"


def test_seek_to_latest_and_by_timestamp(cluster: KafkaCluster) -> None:
    create_topic(cluster.bootstrap, "seek", 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    base_ts = 1_700_000_000_000
    for i in range(100):
        producer.produce("seek", str(i).encode(), timestamp=base_ts + i * 10)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        [found] = consumer.offsets_for_times([TopicPartition("seek", 0, base_ts + 425)], timeout=10)
        assert found.offset == 43, "the first record at or after the timestamp"
        low, high = consumer.get_watermark_offsets(TopicPartition("seek", 0), timeout=10)
        assert (low, high) == (0, 100)
        consumer.assign([TopicPartition("seek", 0, OFFSET_END)])
        assert consumer.poll(1.0) is None, "nothing after the end"
        producer.produce("seek", b"after")
        assert producer.flush(30) == 0
        deadline = time.monotonic() + 30
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None and message.value() == b"after" and message.offset() == 100
    finally:
        consumer.close()

"""A topic's record format settings through a Kafka admin client: `message.format.version` accepted and ignored
as Kafka 3 does (from inter-broker protocol 3.0 every batch is v2), and `compression.type` other than `producer`
recompressing on the leader as Kafka's LogValidator does."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from common.record import CompressionType, iter_headers
from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_clients.test_kafka_confluent import consume, wait_for_leaders
from tests.integration.kafka_cluster import start_kafka_cluster

pytestmark = pytest.mark.integration


def create(admin: AdminClient, name: str, config: dict[str, str], replicas: int = 1) -> None:
    admin.create_topics([NewTopic(name, 1, replicas, config=config)], operation_timeout=30)[name].result(timeout=60)


def test_message_format_version_is_accepted_and_ignored_with_kafka_3s_warnings(
        start_brokers: StartBrokers, start_controller: StartController, wait_until: WaitUntil) -> None:
    """Kafka 3 (KIP-724): log.message.format.version and a topic's message.format.version are validated, then
    ignored with MessageFormatVersion's warning when they name a format older than v2; the records stay v2."""
    cluster = start_kafka_cluster(start_brokers, start_controller, {"log.message.format.version": "0.10.2"},
                                  broker_ids=(1,))
    broker = cluster.brokers[1]
    assert ("Broker configuration log.message.format.version with value 0.10.2 is ignored because the inter-broker"
            " protocol version `3.0-IV1` is greater or equal than 3.0") in broker.process.log()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    create(admin, "old-format", {"message.format.version": "0.10.0"})
    wait_until(lambda: "Topic configuration message.format.version with value `0.10.0` is ignored for `old-format`"
               in broker.process.log(), message="the topic's warning")
    described = admin.describe_configs([ConfigResource("topic", "old-format")])
    entry = next(iter(described.values())).result(timeout=30)["message.format.version"]
    assert (entry.value, entry.source) == ("0.10.0", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    # Still v2: headers (which v0/v1 cannot carry) round trip.
    wait_for_leaders(cluster.bootstrap, "old-format", 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    producer.produce("old-format", b"v", key=b"k", headers=[("h", b"1")])
    assert producer.flush(30) == 0
    (message,) = consume(cluster.bootstrap, [CkTopicPartition("old-format", 0, 0)], 1)
    assert message.headers() == [("h", b"1")]

    # A value Kafka's ApiVersionValidator refuses is still refused.
    with pytest.raises(KafkaException) as refused:
        create(admin, "bad-format", {"message.format.version": "2.9"})
    assert refused.value.args[0].name() == "INVALID_CONFIG"
    assert "Version `2.9` is not a valid version" in refused.value.args[0].str()


def stored_batches(broker_log_dir: Path, topic: str) -> list[tuple[CompressionType, int]]:
    """(codec, record count) of every batch in the partition's segments, read from the broker's files."""
    return [(header.compression, header.record_count)
            for path in sorted((broker_log_dir / f"{topic}-0").glob("*.log"))
            for _, header in iter_headers(path.read_bytes())]


def test_a_topics_compression_type_recompresses_the_producers_batches(
        start_brokers: StartBrokers, start_controller: StartController, wait_until: WaitUntil) -> None:
    """Kafka's LogValidator: a batch whose codec is not the topic's compression.type is recompressed by the
    leader (and stored so on every replica); `producer` keeps the producer's codec; consumers read them all."""
    cluster = start_kafka_cluster(start_brokers, start_controller, broker_ids=(1, 2))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topics = {"to-gzip": "gzip", "to-zstd": "zstd", "to-none": "uncompressed", "as-produced": "producer"}
    for topic, compression in topics.items():
        create(admin, topic, {"compression.type": compression}, replicas=2)
        wait_for_leaders(cluster.bootstrap, topic, 1)
    expected = {"to-gzip": CompressionType.GZIP, "to-zstd": CompressionType.ZSTD, "to-none": CompressionType.NONE,
                "as-produced": CompressionType.LZ4}
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "compression.type": "lz4",
                         "linger.ms": 20})
    for topic in topics:
        for i in range(20):
            producer.produce(topic, f"{topic}-{i}".encode() * 10, key=str(i).encode(), headers=[("i", str(i))])
    assert producer.flush(30) == 0
    for topic, codec in expected.items():
        got = consume(cluster.bootstrap, [CkTopicPartition(topic, 0, 0)], 20)
        assert [(m.key(), m.value(), m.headers()) for m in got] == [
            (str(i).encode(), f"{topic}-{i}".encode() * 10, [("i", str(i).encode())]) for i in range(20)]
        for broker in cluster.brokers.values():
            def stored(log_dir: Path = broker.log_dir, name: str = topic) -> list[tuple[CompressionType, int]]:
                return stored_batches(log_dir, name)

            wait_until(lambda: sum(count for _, count in stored()) == 20, message=f"{topic} on every replica")
            assert {batch_codec for batch_codec, _ in stored()} == {codec}, (topic, broker.broker_id)
    described = admin.describe_configs([ConfigResource("topic", "to-zstd")])
    assert next(iter(described.values())).result(timeout=30)["compression.type"].value == "zstd"

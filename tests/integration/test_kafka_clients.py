"""kafka-python, aiokafka and kcat against the brokers' Kafka listeners, and records crossing the two front
doors: what a Kafka client writes, the project's gRPC consumer and `dump-log` read byte for byte, and the
other way round."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

import client
from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController) -> KafkaCluster:
    return start_kafka_cluster(start_brokers, start_controller)


def kp_create(bootstrap: str, name: str, partitions: int = 3, configs: dict[str, str] | None = None) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 3, topic_configs=configs or {})], timeout_ms=30_000)
    finally:
        admin.close()


def poll_until(consumer: Any, expected: int, timeout: float = 30.0) -> list[Any]:
    """Records from a consumer of kafka-python's shape (kafka-python's own, or minibroker's) until `expected`."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    return got


def test_kafka_python_admin_produce_and_consume(cluster: KafkaCluster, wait_until: WaitUntil) -> None:
    kp_create(cluster.bootstrap, "kp", configs={"min.insync.replicas": "2"})
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        # Only the topic's own overrides by default ("modified"): its source is TOPIC_CONFIG.
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")])
        assert {key: c["value"] for key, c in described["topic"]["kp"].items()} == {"min.insync.replicas": "2"}
        sent = []
        for codec in (None, "gzip", "snappy", "lz4", "zstd"):
            for acks in (0, 1, "all"):
                producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks=acks, compression_type=codec,
                                         linger_ms=5)
                for i in range(30):
                    key, value = f"{i % 5}".encode(), f"{codec}-{acks}-{i}".encode()
                    headers = [("codec", str(codec).encode())]
                    producer.send("kp", value, key=key, headers=headers)
                    sent.append((key, value, tuple(headers)))
                producer.flush(timeout=30)
                producer.close()
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
        tps = [KpTopicPartition("kp", p) for p in range(3)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        got = poll_until(consumer, len(sent))
        assert Counter((r.key, r.value, tuple(r.headers)) for r in got) == Counter(sent)
        assert sum(consumer.end_offsets(tps).values()) == len(sent)
        consumer.close()
        admin.delete_topics(["kp"], timeout_ms=30_000)
        wait_until(lambda: "kp" not in admin.list_topics(), message="topic deleted")
    finally:
        admin.close()


def test_aiokafka_round_trip(cluster: KafkaCluster) -> None:
    kp_create(cluster.bootstrap, "aio", partitions=1)

    async def run() -> list[tuple[bytes | None, bytes | None, tuple]]:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", compression_type="gzip",
                                    enable_idempotence=True)
        await producer.start()
        try:
            for i in range(100):
                await producer.send_and_wait("aio", f"v{i}".encode(), key=b"k", headers=[("i", str(i).encode())])
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = AioTopicPartition("aio", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got = []
            while len(got) < 100:
                batch = await asyncio.wait_for(consumer.getmany(tp, timeout_ms=1000), 30)
                got.extend((r.key, r.value, tuple(r.headers)) for r in batch.get(tp, []))
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(run())
    assert got == [(b"k", f"v{i}".encode(), (("i", str(i).encode()),)) for i in range(100)]


def test_kcat_lists_produces_and_consumes(cluster: KafkaCluster) -> None:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is installed by scripts/setup.sh"
    kp_create(cluster.bootstrap, "kcat", partitions=1)
    listing = subprocess.run([kcat, "-b", cluster.bootstrap, "-L"], capture_output=True, text=True, timeout=60,
                             check=True).stdout
    assert " 3 brokers:" in listing and 'topic "kcat" with 1 partitions:' in listing
    lines = "".join(f"key{i}:value {i}\n" for i in range(50))
    subprocess.run([kcat, "-b", cluster.bootstrap, "-P", "-t", "kcat", "-K:", "-X", "acks=all"], input=lines,
                   text=True, timeout=60, check=True)
    consumed = subprocess.run([kcat, "-b", cluster.bootstrap, "-C", "-t", "kcat", "-o", "beginning", "-e",
                               "-f", "%k:%s\n"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert consumed == lines


def test_records_cross_the_two_front_doors_byte_for_byte(cluster: KafkaCluster) -> None:
    kp_create(cluster.bootstrap, "cross", partitions=1)
    # confluent-kafka in through the Kafka door ...
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "compression.type": "zstd"})
    kafka_sent = [(f"ck-{i}".encode(), bytes(range(i % 256)) + b"\xff", (("h", b"\x00\x01"),), 1_700_000_000_000 + i)
                  for i in range(100)]
    for key, value, headers, ts in kafka_sent:
        producer.produce("cross", value, key, headers=list(headers), timestamp=ts)
    assert producer.flush(30) == 0
    # ... and the project's own client in through the gRPC door.
    grpc_producer = client.Producer(bootstrap_servers=cluster.grpc_bootstrap, acks="all")
    grpc_sent = [(f"mb-{i}".encode(), f"value {i}".encode() * 3, (("x", b"y"),), 1_700_000_001_000 + i)
                 for i in range(100)]
    for key, value, headers, ts in grpc_sent:
        grpc_producer.send("cross", value, key=key, headers=list(headers), timestamp_ms=ts)
    grpc_producer.flush(timeout=30)
    grpc_producer.close()
    everything = kafka_sent + grpc_sent

    grpc_consumer = client.Consumer(bootstrap_servers=cluster.grpc_bootstrap)
    grpc_consumer.assign([client.TopicPartition("cross", 0)])
    grpc_consumer.seek_to_beginning()
    got = poll_until(grpc_consumer, len(everything))
    grpc_consumer.close()
    assert [(r.key, r.value, tuple(r.headers), r.timestamp) for r in got] == everything

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([CkTopicPartition("cross", 0, OFFSET_BEGINNING)])
    kafka_got = []
    deadline = time.monotonic() + 30
    while len(kafka_got) < len(everything) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None
            kafka_got.append((message.key(), message.value(), tuple(message.headers() or ()),
                              message.timestamp()[1]))
    consumer.close()
    assert kafka_got == everything

    for broker in cluster.brokers.values():
        [segment] = (broker.log_dir / "cross-0").glob("*.log")
        dumped = subprocess.run([sys.executable, "-m", "minibroker.cli", "dump-log", "--files", str(segment),
                                 "--print-data-log"], capture_output=True, text=True, timeout=60).stdout
        for i in (0, 99):
            assert f"key: ck-{i} " in dumped and f"key: mb-{i} payload: {f'value {i}' * 3}" in dumped

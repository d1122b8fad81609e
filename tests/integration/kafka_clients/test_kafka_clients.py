"""kafka-python, aiokafka and kcat against the brokers' Kafka listeners, and records crossing the two front
doors: what a Kafka client writes, the project's gRPC consumer and `dump-log` read byte for byte, and the
other way round."""

from __future__ import annotations

import asyncio
import json
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


# Every compression codec a Kafka client can choose, each at every acks level.
CODECS = (None, "gzip", "snappy", "lz4", "zstd")
ACKS = (0, 1, "all")


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
        for codec in CODECS:
            for acks in ACKS:
                producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks=acks, compression_type=codec,
                                         linger_ms=5)
                for i in range(30):
                    key, value = f"{i % 5}".encode(), f"{codec}-{acks}-{i}".encode()
                    headers = [("codec", str(codec).encode())]
                    producer.send("kp", value, key=key, headers=headers)
                    sent.append((key, value, tuple(headers)))
                producer.flush(timeout=30)
                producer.close()
        # One record stamped later than all the others, for the timestamp seek.
        stamp = int(time.time() * 1000) + 3_600_000
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True)
        stamped = producer.send("kp", b"stamped", key=b"s", partition=0, timestamp_ms=stamp).get(timeout=30)
        producer.close()
        sent.append((b"s", b"stamped", ()))
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
        tps = [KpTopicPartition("kp", p) for p in range(3)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        got = poll_until(consumer, len(sent))
        assert Counter((r.key, r.value, tuple(r.headers)) for r in got) == Counter(sent)
        ends = consumer.end_offsets(tps)
        assert sum(ends.values()) == len(sent)
        consumer.seek_to_end()
        assert {tp: consumer.position(tp) for tp in tps} == ends
        found = consumer.offsets_for_times({tps[0]: stamp})[tps[0]]
        assert (found.offset, found.timestamp) == (stamped.offset, stamp)
        consumer.close()
        admin.delete_topics(["kp"], timeout_ms=30_000)
        wait_until(lambda: "kp" not in admin.list_topics(), message="topic deleted")
    finally:
        admin.close()


def test_aiokafka_metadata_every_codec_and_acks_idempotence_and_seeks(cluster: KafkaCluster) -> None:
    kp_create(cluster.bootstrap, "aio", partitions=1)
    tp = AioTopicPartition("aio", 0)
    stamp = int(time.time() * 1000) + 3_600_000  # later than every record sent before, which are stamped now

    async def run() -> None:
        sent: list[tuple[bytes | None, bytes | None, tuple]] = []
        for codec in CODECS:
            for acks in ACKS:
                producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks=acks, compression_type=codec,
                                            linger_ms=5)
                await producer.start()
                try:
                    for i in range(10):
                        key, value = f"{i % 3}".encode(), f"{codec}-{acks}-{i}".encode()
                        headers = (("codec", str(codec).encode()),)
                        await producer.send("aio", value, key=key, headers=list(headers))
                        sent.append((key, value, headers))
                    await producer.flush()
                finally:
                    await producer.stop()
        # The idempotent producer (InitProducerId, sequence numbers), its records stamped for the timestamp seek.
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True)
        await producer.start()
        try:
            assert await producer.partitions_for("aio") == {0}  # metadata
            for i in range(20):
                await producer.send_and_wait("aio", f"idem-{i}".encode(), key=b"k", timestamp_ms=stamp + i,
                                             headers=[("i", str(i).encode())])
                sent.append((b"k", f"idem-{i}".encode(), (("i", str(i).encode()),)))
        finally:
            await producer.stop()

        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            assert "aio" in await consumer.topics()
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got: list[tuple[bytes | None, bytes | None, tuple]] = []
            while len(got) < len(sent):
                batch = await asyncio.wait_for(consumer.getmany(tp, timeout_ms=1000), 30)
                got.extend((r.key, r.value, tuple(r.headers)) for r in batch.get(tp, []))
            assert Counter(got) == Counter(sent)
            end = (await consumer.end_offsets([tp]))[tp]
            assert end == len(sent)
            await consumer.seek_to_end(tp)
            assert await consumer.position(tp) == end
            assert (await consumer.getmany(tp, timeout_ms=500)).get(tp, []) == []
            found = (await consumer.offsets_for_times({tp: stamp + 5}))[tp]
            assert found is not None and (found.offset, found.timestamp) == (len(sent) - 15, stamp + 5)
            consumer.seek(tp, found.offset)
            first = (await asyncio.wait_for(consumer.getmany(tp, timeout_ms=5000, max_records=1), 30))[tp][0]
            assert first.value == b"idem-5"
        finally:
            await consumer.stop()

    asyncio.run(run())


def test_kcat_metadata_every_codec_and_acks_idempotence_and_seeks(cluster: KafkaCluster) -> None:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is installed by scripts/setup.sh"
    kp_create(cluster.bootstrap, "kcat", partitions=1)

    def run(*args: str, stdin: str | None = None) -> str:
        return subprocess.run([kcat, "-b", cluster.bootstrap, *args], input=stdin, capture_output=True, text=True,
                              timeout=60, check=True).stdout

    metadata = json.loads(run("-L", "-J"))
    assert len(metadata["brokers"]) == 3
    assert [len(t["partitions"]) for t in metadata["topics"] if t["topic"] == "kcat"] == [1]
    sent = []
    for codec in CODECS:
        for acks in ACKS:
            lines = [f"key{i % 3}:{codec}-{acks}-{i}" for i in range(10)]
            run("-P", "-t", "kcat", "-K:", "-z", codec or "none", "-X", f"acks={acks}", "-H", f"codec={codec}",
                stdin="".join(f"{line}\n" for line in lines))
            sent += [f"{line}:codec={codec}" for line in lines]
    before_idempotent = int(time.time() * 1000)
    idempotent = [f"idem{i}:i-{i}" for i in range(20)]
    run("-P", "-t", "kcat", "-K:", "-X", "enable.idempotence=true", "-X", "acks=all", "-H", "codec=idem",
        stdin="".join(f"{line}\n" for line in idempotent))
    sent += [f"{line}:codec=idem" for line in idempotent]

    consume = ("-C", "-t", "kcat", "-e", "-f", "%k:%s:%h\n")
    assert Counter(run(*consume, "-o", "beginning").splitlines()) == Counter(sent)
    assert run(*consume, "-o", "end") == ""
    # From a timestamp: what the idempotent producer wrote after it (librdkafka stamps CreateTime at send).
    assert run(*consume, "-o", f"s@{before_idempotent}").splitlines() == [f"{line}:codec=idem" for line in idempotent]


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

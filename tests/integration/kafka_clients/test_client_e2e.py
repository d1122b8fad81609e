"""The Python client against real ZooKeeper, controller and broker processes over loopback."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator

import pytest
from kafka.partitioner.default import murmur2

from client import Admin, Consumer, ConsumerRecord, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from proto.errors import ErrorCode, KafkaError
from tests.integration.conftest import CLUSTER_CREDENTIAL, StartBroker, StartProcess

pytestmark = pytest.mark.integration


@pytest.fixture
def bootstrap(start_broker: StartBroker, processes: StartProcess, zk_connect: str) -> Iterator[str]:
    """Two brokers and a controller; the bootstrap servers string. (__consumer_offsets must fit on two brokers:
    Kafka does not create it with fewer live brokers than offsets.topic.replication.factor.)"""
    overrides = {"offsets.topic.replication.factor": "2", "offsets.topic.num.partitions": "3",
                 "group.initial.rebalance.delay.ms": "0"}
    brokers = [start_broker(1, overrides), start_broker(2, overrides)]
    processes("controller", [sys.executable, "-m", "minibroker.cli", "controller", "--zookeeper", zk_connect,
                             "--controller-id", "1000", "--override", f"cluster.credential={CLUSTER_CREDENTIAL}",
                             "--override", "zookeeper.session.timeout.ms=3000"])
    yield ",".join(b.address for b in brokers)


def create(bootstrap: str, name: str, partitions: int = 3) -> None:
    admin = Admin(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=30_000)
    finally:
        admin.close()


def consume_all(bootstrap: str, topic: str, expected: int) -> list[ConsumerRecord]:
    consumer = Consumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    try:
        got: list[ConsumerRecord] = []
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_round_trip_every_acks_mode_and_codec(bootstrap: str, acks: int | str) -> None:
    topic = f"round-trip-{acks}"
    create(bootstrap, topic)
    sent = []
    for codec in (None, "gzip", "lz4", "zstd"):
        producer = Producer(bootstrap_servers=bootstrap, acks=acks, compression_type=codec, linger_ms=5)
        futures = []
        for i in range(150):
            value = f"{codec}-{i}".encode()
            futures.append(producer.send(topic, value, key=b"k%d" % (i % 7), headers=[("codec", str(codec).encode())]))
            sent.append(value)
        producer.flush(timeout=30)
        metadata = [f.get(timeout=30) for f in futures]
        producer.close()
        if acks != 0:
            assert all(m.offset >= 0 for m in metadata)
    got = consume_all(bootstrap, topic, len(sent))
    assert sorted(r.value for r in got) == sorted(sent)
    for tp_records in _by_partition(got).values():
        offsets = [r.offset for r in tp_records]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "offsets contiguous per partition"
    assert all(list(r.headers) == [("codec", r.value.split(b"-")[0])] for r in got)


def _by_partition(records: list[ConsumerRecord]) -> dict[int, list[ConsumerRecord]]:
    out: dict[int, list[ConsumerRecord]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    return out


def test_keyed_records_land_where_kafka_puts_them(bootstrap: str) -> None:
    create(bootstrap, "keyed", partitions=5)
    producer = Producer(bootstrap_servers=bootstrap, acks=1)
    keys = [f"user-{i}".encode() for i in range(200)]
    placed = {key: producer.send("keyed", b"v", key=key).get(timeout=30).partition for key in keys}
    producer.close()
    # kafka-python's murmur2 is Kafka's DefaultPartitioner: toPositive(murmur2(key)) % numPartitions.
    assert placed == {key: (murmur2(key) & 0x7FFFFFFF) % 5 for key in keys}


def test_idempotent_producer_and_committed_offsets(bootstrap: str) -> None:
    create(bootstrap, "ordered", partitions=2)
    producer = Producer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    for i in range(500):
        producer.send("ordered", str(i).encode(), key=b"same-key")
    producer.flush(timeout=30)
    producer.close()
    consumer = Consumer("ordered", bootstrap_servers=bootstrap, group_id="g1", auto_offset_reset="earliest",
                        enable_auto_commit=False)
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + 30
    while len(got) < 500 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    assert [int(r.value) for r in got] == list(range(500)), "one key: one partition, in send order, no duplicate"
    tp = TopicPartition("ordered", got[0].partition)
    consumer.commit()
    assert consumer.committed(tp) == 500
    consumer.close()
    again = Consumer(bootstrap_servers=bootstrap, group_id="g1")
    assert again.committed(tp) == 500
    # The commit's metadata string is kept with the offset (Kafka 0.8's znode dropped it).
    again.commit({tp: OffsetAndMetadata(42, "meta")})
    assert again.committed(tp, metadata=True) == OffsetAndMetadata(42, "meta", -1)
    again.close()


def test_long_poll_returns_when_a_record_arrives(bootstrap: str) -> None:
    create(bootstrap, "wake", partitions=1)
    consumer = Consumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=20_000)
    consumer.assign([TopicPartition("wake", 0)])
    consumer.seek_to_end()
    consumer.poll(timeout_ms=100)
    producer = Producer(bootstrap_servers=bootstrap, acks=1)

    def send_later() -> None:
        time.sleep(0.5)  # the point of the test: the record arrives while the fetch is parked
        producer.send("wake", b"hello").get(timeout=30)

    sender = threading.Thread(target=send_later)
    sender.start()
    start = time.monotonic()
    got: list[ConsumerRecord] = []
    while not got and time.monotonic() - start < 15:
        got = [r for records in consumer.poll(timeout_ms=15_000).values() for r in records]
    elapsed = time.monotonic() - start
    sender.join()
    producer.close()
    consumer.close()
    assert [r.value for r in got] == [b"hello"]
    assert elapsed < 10, f"the parked fetch must complete on the append, not at max_wait ({elapsed:.1f}s)"


def test_admin_errors_are_precise(bootstrap: str) -> None:
    create(bootstrap, "exists", partitions=1)
    admin = Admin(bootstrap_servers=bootstrap)
    try:
        with pytest.raises(KafkaError) as dup:
            admin.create_topics([NewTopic("exists", 1, 1)], timeout_ms=10_000)
        assert dup.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        with pytest.raises(KafkaError) as rf:
            admin.create_topics([NewTopic("too-many-replicas", 1, 3)], timeout_ms=10_000)
        assert rf.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
        with pytest.raises(KafkaError) as name:
            admin.create_topics([NewTopic("bad/name", 1, 1)], timeout_ms=10_000)
        assert name.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert "exists" in admin.list_topics()
    finally:
        admin.close()

"""Producer, Consumer and Admin against an in-process fake broker: the wiring, end to end, in milliseconds."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
from fake_broker import FakeBroker

from client import (
    Admin,
    Consumer,
    ErrorCode,
    FutureRecordMetadata,
    KafkaError,
    KafkaTimeoutError,
    NewTopic,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)
from client.partitioner import partition_for_key
from common.record import decode_records


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with FakeBroker() as b:
        b.create("t", 3)
        yield b


def stored(broker: FakeBroker, tp: TopicPartition) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for batch in broker.logs[tp] for r in decode_records(batch)]


def test_produce_then_consume_everything(broker: FakeBroker) -> None:
    with Producer(broker.address, acks="all", linger_ms=5, value_serializer=str.encode) as producer:
        assert producer.partitions_for("t") == {0, 1, 2}
        futures = [producer.send("t", f"v{i}", key=b"k%d" % (i % 5)) for i in range(60)]
        producer.flush(timeout=10)
        metadata = [f.get(timeout=0) for f in futures]
    for i, m in enumerate(metadata):
        assert m.partition == partition_for_key(b"k%d" % (i % 5), 3)
        assert (m.topic, m.serialized_key_size, m.serialized_value_size) == ("t", 2, len(f"v{i}"))
    by_partition: dict[int, list[int]] = {}
    for m in metadata:
        by_partition.setdefault(m.partition, []).append(m.offset)
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())

    consumer = Consumer("t", bootstrap_servers=broker.address, auto_offset_reset="earliest",
                        value_deserializer=bytes.decode, consumer_timeout_ms=500, fetch_max_wait_ms=50)
    received = list(consumer)
    consumer.close()
    assert sorted(r.value for r in received) == sorted(f"v{i}" for i in range(60))
    for p in range(3):  # per partition in offset order
        offsets = [r.offset for r in received if r.partition == p]
        assert offsets == sorted(offsets)


def test_keyless_records_stick_to_a_partition_per_batch(broker: FakeBroker) -> None:
    with Producer(broker.address, linger_ms=1000, batch_size=2000) as producer:
        futures = [producer.send("t", b"x" * 100) for _ in range(40)]
        producer.flush(timeout=10)
        partitions = [f.get(0).partition for f in futures]
    # Batches of ~17 records, each batch on one partition: the partition changes only at a batch boundary.
    changes = sum(1 for a, b in itertools.pairwise(partitions) if a != b)
    assert 1 <= changes <= 3
    assert len(broker.produce_requests) <= 4


def test_poll_respects_max_records_and_positions(broker: FakeBroker) -> None:
    tp = TopicPartition("t", 1)
    with Producer(broker.address) as producer:
        for i in range(25):
            producer.send("t", b"%d" % i, partition=1)
        producer.flush(10)
    consumer = Consumer(bootstrap_servers=broker.address, fetch_max_wait_ms=50)
    consumer.assign([tp])
    consumer.seek(tp, 5)
    got: list[int] = []
    deadline = time.monotonic() + 5
    while len(got) < 20 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200, max_records=7).values():
            assert len(records) <= 7
            got += [r.offset for r in records]
    assert got == list(range(5, 25))
    assert consumer.position(tp) == 25
    assert consumer.beginning_offsets([tp]) == {tp: 0} and consumer.end_offsets([tp]) == {tp: 25}
    consumer.seek_to_beginning(tp)
    assert consumer.position(tp) == 0
    consumer.close()


def test_committed_offsets_survive_the_consumer(broker: FakeBroker) -> None:
    tp = TopicPartition("t", 0)
    with Producer(broker.address) as producer:
        for i in range(10):
            producer.send("t", b"%d" % i, partition=0)
    first = Consumer(bootstrap_servers=broker.address, group_id="g", auto_offset_reset="earliest",
                     enable_auto_commit=False, fetch_max_wait_ms=50)
    first.assign([tp])
    assert first.committed(tp) is None
    records = first.poll(timeout_ms=2000, max_records=4)[tp]
    assert [r.offset for r in records] == [0, 1, 2, 3]
    first.commit()
    assert first.committed(tp) == 4
    assert first.committed(tp, metadata=True) == OffsetAndMetadata(4, "", -1)
    first.close()
    second = Consumer(bootstrap_servers=broker.address, group_id="g", auto_offset_reset="none")
    second.assign([tp])
    assert second.position(tp) == 4  # from the committed offset, not auto_offset_reset
    second.close()


def test_auto_offset_reset_none_without_committed_offset_raises(broker: FakeBroker) -> None:
    consumer = Consumer(bootstrap_servers=broker.address, group_id="fresh", auto_offset_reset="none")
    consumer.assign([TopicPartition("t", 0)])
    with pytest.raises(NoOffsetForPartitionError):
        consumer.position(TopicPartition("t", 0))
    consumer.close()


def test_latest_reset_skips_existing_records(broker: FakeBroker) -> None:
    tp = TopicPartition("t", 2)
    with Producer(broker.address) as producer:
        producer.send("t", b"old", partition=2)
        producer.flush(10)
        consumer = Consumer(bootstrap_servers=broker.address, fetch_max_wait_ms=50)  # auto_offset_reset='latest'
        consumer.assign([tp])
        assert consumer.position(tp) == 1
        producer.send("t", b"new", partition=2).get(10)
    records = consumer.poll(timeout_ms=2000)
    assert [r.value for r in records[tp]] == [b"new"]
    consumer.close()


def test_idempotent_retry_is_not_duplicated(broker: FakeBroker) -> None:
    tp = TopicPartition("t", 0)
    broker.fail_produce[tp] = [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT]
    with Producer(broker.address, acks="all", enable_idempotence=True, retry_backoff_ms=10) as producer:
        futures = [producer.send("t", b"%d" % i, partition=0) for i in range(5)]
        assert [f.get(10).offset for f in futures] == [0, 1, 2, 3, 4]
    assert [v for _, _, v in stored(broker, tp)] == [b"%d" % i for i in range(5)]
    assert len(broker.produce_requests) >= 3


def test_non_retriable_error_reaches_the_future(broker: FakeBroker) -> None:
    broker.fail_produce[TopicPartition("t", 0)] = [ErrorCode.INVALID_RECORD]
    with Producer(broker.address) as producer, pytest.raises(KafkaError) as err:
        producer.send("t", b"x", partition=0).get(10)
    assert err.value.code == ErrorCode.INVALID_RECORD and not err.value.retriable


def test_admin_topics_and_cluster(broker: FakeBroker) -> None:
    with Admin(broker.address) as admin:
        admin.create_topics([NewTopic("orders", 4, 1), NewTopic("pinned", replica_assignments={0: [1], 1: [1]})])
        assert admin.list_topics() == ["orders", "pinned", "t"]
        (orders,) = admin.describe_topics(["orders"])
        assert orders.name == "orders" and [p.partition for p in orders.partitions] == [0, 1, 2, 3]
        assert orders.partitions[0].leader == 1 and orders.partitions[0].isr == (1,)
        with pytest.raises(KafkaError) as err:
            admin.create_topics([NewTopic("orders", 1, 1)])
        assert err.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        admin.delete_topics(["orders"])
        with pytest.raises(KafkaError) as err:
            admin.describe_topics(["orders"])
        assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        cluster = admin.describe_cluster()
        assert (cluster.cluster_id, cluster.controller_id, [b.node_id for b in cluster.brokers]) == (
            "fake-cluster", 1, [1])


def test_no_broker_means_a_bounded_wait_not_a_hang() -> None:
    started = time.monotonic()
    producer = Producer("127.0.0.1:1", max_block_ms=300, request_timeout_ms=200, delivery_timeout_ms=200)
    future = producer.send("t", b"x")
    with pytest.raises(KafkaTimeoutError):
        future.get(5)
    producer.close(timeout=1)
    consumer = Consumer("t", bootstrap_servers="127.0.0.1:1", request_timeout_ms=200, fetch_max_wait_ms=50)
    assert consumer.poll(timeout_ms=300) == {}
    consumer.close()
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("compression", ["gzip", "lz4", "zstd"])
def test_compressed_records_with_headers_and_timestamps_round_trip(broker: FakeBroker, compression: str) -> None:
    tp = TopicPartition("t", 0)
    with Producer(broker.address, compression_type=compression, key_serializer=str.encode, linger_ms=20) as producer:
        futures = [producer.send("t", b"value-%d" % i, key=f"key-{i}", partition=0,
                                 headers=[("trace", b"%d" % i), ("empty", None)], timestamp_ms=1_600_000_000_000 + i)
                   for i in range(20)]
        producer.flush(10)
    assert futures[3].get(0).timestamp == 1_600_000_000_003
    assert futures[3].get(0).serialized_header_size == len("trace") + 1 + len("empty")
    consumer = Consumer(bootstrap_servers=broker.address, auto_offset_reset="earliest", key_deserializer=bytes.decode,
                        fetch_max_wait_ms=50)
    consumer.assign([tp])
    records = consumer.poll(timeout_ms=2000)[tp]
    consumer.close()
    assert [(r.key, r.value, r.timestamp, r.headers) for r in records] == [
        (f"key-{i}", b"value-%d" % i, 1_600_000_000_000 + i, (("trace", b"%d" % i), ("empty", None)))
        for i in range(20)]


def test_bad_configurations_are_refused_up_front() -> None:
    with pytest.raises(ValueError, match=r"enable.idempotence=true requires acks=all"):
        Producer("127.0.0.1:1", acks=1, enable_idempotence=True)  # the broker could lose what it acknowledged
    with pytest.raises(ValueError, match=r"max.in.flight.requests.per.connection"):
        Producer("127.0.0.1:1", acks="all", enable_idempotence=True, max_in_flight_requests_per_connection=6)
    with pytest.raises(ValueError, match="Invalid value 2 for configuration acks"):
        Producer("127.0.0.1:1", acks=2)
    with pytest.raises(ValueError, match=r"delivery.timeout.ms should be equal to or larger than"):
        Producer("127.0.0.1:1", delivery_timeout_ms=1000, request_timeout_ms=30000)
    with pytest.raises(ValueError):
        Consumer(bootstrap_servers="127.0.0.1:1", auto_offset_reset="smallest-ish")


def test_send_callback_sees_every_outcome(broker: FakeBroker) -> None:
    broker.fail_produce[TopicPartition("t", 0)] = [ErrorCode.INVALID_RECORD]
    outcomes: list[tuple[str, object]] = []

    def callback(future: FutureRecordMetadata) -> None:
        outcomes.append(("failed", future.exception().code) if future.failed() else ("ok", future.get(0).offset))

    with Producer(broker.address, max_request_size=1000) as producer:
        producer.send("t", b"x", partition=0, callback=callback)
        producer.send("t", b"x" * 2000, partition=1, callback=callback)  # refused before batching
        producer.send("t", b"y", partition=2, callback=callback)
        producer.flush(10)
    assert sorted(outcomes, key=str) == sorted([("failed", ErrorCode.INVALID_RECORD),
                                                ("failed", ErrorCode.MESSAGE_TOO_LARGE), ("ok", 0)], key=str)


def test_an_idempotent_producer_not_authorized_for_a_producer_id_fails_its_records_at_once(
        broker: FakeBroker) -> None:
    """Kafka's producer makes CLUSTER_AUTHORIZATION_FAILED on InitProducerId fatal: the records fail with it
    instead of waiting out delivery.timeout.ms."""
    broker.init_producer_id_error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with Producer(broker.address, enable_idempotence=True, delivery_timeout_ms=60_000) as producer:
        future = producer.send("t", b"value", partition=0)
        with pytest.raises(KafkaError) as refused:
            future.get(timeout=10)
        assert refused.value.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        # Once the principal may (an ACL added), the same producer gets its id and writes.
        broker.init_producer_id_error = 0
        assert producer.send("t", b"value", partition=0).get(timeout=10).offset == 0

"""RecordAccumulator: batching, linger, readiness, draining, ordering, expiry, memory, with an injected clock."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from client_helpers import cluster

from client.accumulator import RECORD_OVERHEAD_UPPER_BOUND, ProducerBatch, RecordAccumulator
from client.errors import KafkaTimeoutError
from client.future import FutureRecordMetadata
from common.record import HEADER_SIZE, CompressionType, assemble_batch, decode_records, validate_batch
from proto.types import TopicPartition
from tests.fakes import FakeMonotonic

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
VALUE = b"v" * 100


def make(clock: FakeMonotonic, **kwargs: object) -> RecordAccumulator:
    settings: dict[str, object] = dict(batch_size=1024, linger_ms=10, clock=clock)
    settings.update(kwargs)
    return RecordAccumulator(**settings)  # type: ignore[arg-type]


def append(acc: RecordAccumulator, tp: TopicPartition = TP0, value: bytes = VALUE, key: bytes | None = None,
           timestamp: int = 1_700_000_000_000, abort: bool = False) -> FutureRecordMetadata | None:
    return acc.append(tp, timestamp, key, value, (), -1 if key is None else len(key), len(value), -1, abort)


def test_records_fill_one_batch_until_batch_size() -> None:
    clock = FakeMonotonic()
    acc = make(clock)
    futures = [append(acc) for _ in range(12)]
    batches = acc.incomplete_batches()
    # A 100-byte value makes a 109-byte record: eight fit in 1024 - 61 header bytes, the ninth opens a new batch.
    assert [b.record_count for b in batches] == [8, 4]
    assert batches[0].is_full and not batches[1].is_full
    assert batches[0].size <= 1024
    batches[0].result.complete(base_offset=0)
    batches[1].result.complete(base_offset=100)
    assert [f.get(0).offset for f in futures if f is not None] == [*range(8), *range(100, 104)]


def test_a_record_larger_than_batch_size_gets_a_batch_of_its_own() -> None:
    acc = make(FakeMonotonic())
    append(acc)
    append(acc, value=b"x" * 5000)
    append(acc)
    assert [b.record_count for b in acc.incomplete_batches()] == [1, 1, 1]


def test_abort_on_new_batch_returns_none_instead_of_opening_one() -> None:
    acc = make(FakeMonotonic())
    assert append(acc, abort=True) is None  # the sticky partitioner then picks another partition
    assert acc.incomplete_batches() == []
    assert append(acc) is not None
    assert append(acc, abort=True) is not None  # an open batch with room takes it


def test_batch_is_ready_after_linger_ms() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=10)
    metadata = cluster({"t": 2})
    append(acc)
    result = acc.ready(metadata, clock.now_ms)
    assert result.ready_nodes == set() and result.next_ready_check_delay_ms == 10
    clock.advance(9)
    assert acc.ready(metadata, clock.now_ms).next_ready_check_delay_ms == 1
    clock.advance(1)
    assert acc.ready(metadata, clock.now_ms).ready_nodes == {1}


def test_full_batch_is_ready_at_once() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=10_000)
    for _ in range(9):
        append(acc, tp=TP1)
    assert acc.ready(cluster({"t": 2}), clock.now_ms).ready_nodes == {2}


def test_flush_and_close_make_everything_ready() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=10_000)
    append(acc)
    acc.begin_flush()
    assert acc.ready(cluster({"t": 1}), clock.now_ms).ready_nodes == {1}
    acc.end_flush()
    assert acc.ready(cluster({"t": 1}), clock.now_ms).ready_nodes == set()
    acc.close()
    assert acc.ready(cluster({"t": 1}), clock.now_ms).ready_nodes == {1}


def test_unknown_leader_is_reported_for_a_metadata_refresh() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=0)
    append(acc, tp=TopicPartition("other", 0))
    result = acc.ready(cluster({"t": 1}), clock.now_ms)
    assert result.ready_nodes == set() and result.unknown_leader_topics == {"other"}


def test_drain_takes_one_batch_per_partition_per_node() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=0, max_in_flight_per_partition=5)
    metadata = cluster({"t": 2}, leaders={("t", 0): 1, ("t", 1): 1})
    for _ in range(20):
        append(acc, tp=TP0)
    append(acc, tp=TP1)
    drained = acc.drain(metadata, {1}, 1 << 20, clock.now_ms)
    assert sorted((b.topic_partition.partition, b.record_count) for b in drained[1]) == [(0, 8), (1, 1)]


def test_drain_respects_max_request_size_but_always_sends_one() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=0)
    metadata = cluster({"t": 2}, leaders={("t", 0): 1, ("t", 1): 1})
    for tp in (TP0, TP1):
        for _ in range(8):
            append(acc, tp=tp)
    first = acc.drain(metadata, {1}, 100, clock.now_ms)
    assert len(first[1]) == 1  # larger than max_request_size, but a request carries at least one batch
    second = acc.drain(metadata, {1}, 100, clock.now_ms)
    assert len(second[1]) == 1 and second[1][0].topic_partition != first[1][0].topic_partition


def test_without_idempotence_one_batch_per_partition_is_in_flight() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=0, max_in_flight_per_partition=1)
    metadata = cluster({"t": 1})
    for _ in range(20):
        append(acc)
    (batch,) = acc.drain(metadata, {1}, 1 << 20, clock.now_ms)[1]
    assert acc.ready(metadata, clock.now_ms).ready_nodes == set()  # muted while in flight
    assert acc.drain(metadata, {1}, 1 << 20, clock.now_ms) == {}
    acc.answered(batch)
    assert acc.ready(metadata, clock.now_ms).ready_nodes == {1}


def test_with_idempotence_up_to_max_in_flight_batches_per_partition() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=0, max_in_flight_per_partition=3)
    metadata = cluster({"t": 1})
    for _ in range(50):
        append(acc)
    sent = [acc.drain(metadata, {1}, 1 << 20, clock.now_ms).get(1, []) for _ in range(5)]
    assert [len(s) for s in sent] == [1, 1, 1, 0, 0]


def test_retried_batch_goes_back_in_creation_order_after_backoff() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=0, max_in_flight_per_partition=5, retry_backoff_ms=100)
    metadata = cluster({"t": 1})
    for _ in range(30):
        append(acc)
    a = acc.drain(metadata, {1}, 1 << 20, clock.now_ms)[1][0]
    b = acc.drain(metadata, {1}, 1 << 20, clock.now_ms)[1][0]
    acc.answered(b)
    acc.reenqueue(b, clock.now_ms)
    acc.answered(a)
    acc.reenqueue(a, clock.now_ms)
    result = acc.ready(metadata, clock.now_ms)
    assert result.ready_nodes == set() and result.next_ready_check_delay_ms == 100  # retry_backoff_ms
    clock.advance(100)
    assert acc.drain(metadata, {1}, 1 << 20, clock.now_ms)[1] == [a]
    # A retry waits until nothing of its partition is in flight, so `b` cannot overtake or interleave.
    assert acc.drain(metadata, {1}, 1 << 20, clock.now_ms) == {}
    acc.answered(a)
    assert acc.drain(metadata, {1}, 1 << 20, clock.now_ms)[1] == [b]


def test_batches_expire_after_delivery_timeout() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=0, delivery_timeout_ms=1000)
    append(acc, tp=TP0)
    clock.advance(600)
    append(acc, tp=TP1)
    assert acc.ready(cluster({}), clock.now_ms).next_ready_check_delay_ms == 400  # wake up to expire it
    clock.advance(400)
    assert [b.topic_partition for b in acc.expired_batches(clock.now_ms)] == [TP0]
    clock.advance(600)
    assert [b.topic_partition for b in acc.expired_batches(clock.now_ms)] == [TP1]
    assert not acc.has_undrained()


# What one keyless VALUE record holds of buffer_memory: its bytes and the overhead's upper bound (a null key is -1).
RECORD_RESERVATION = len(VALUE) - 2 + RECORD_OVERHEAD_UPPER_BOUND


def test_buffer_memory_blocks_for_max_block_ms_then_times_out() -> None:
    clock = FakeMonotonic()
    acc = make(clock, batch_size=1024, buffer_memory=2 * (HEADER_SIZE + RECORD_RESERVATION), max_block_ms=0)
    append(acc, tp=TP0)
    append(acc, tp=TP1)
    with pytest.raises(KafkaTimeoutError):
        append(acc, tp=TopicPartition("t", 2))
    batch = acc.incomplete_batches()[0]
    batch.result.complete(0)
    acc.deallocate(batch)
    assert append(acc, tp=TopicPartition("t", 2)) is not None


def test_buffer_memory_counts_record_bytes_not_batch_size() -> None:
    # librdkafka's accounting: a producer spreading records over many partitions with large batches does not
    # run out of buffer_memory long before its records fill it (a batch_size reservation per batch did).
    clock = FakeMonotonic()
    acc = make(clock, batch_size=1_000_000, buffer_memory=64 * 1024, max_block_ms=0)
    for partition in range(100):
        assert append(acc, tp=TopicPartition("t", partition)) is not None
    assert sum(b.reserved for b in acc.incomplete_batches()) == 100 * (HEADER_SIZE + RECORD_RESERVATION)


def test_appending_to_an_open_batch_blocks_when_buffer_memory_is_full() -> None:
    clock = FakeMonotonic()
    acc = make(clock, batch_size=1_000_000, buffer_memory=HEADER_SIZE + 3 * RECORD_RESERVATION, max_block_ms=0)
    for _ in range(3):
        assert append(acc) is not None
    with pytest.raises(KafkaTimeoutError):
        append(acc)
    (batch,) = acc.incomplete_batches()
    assert batch.record_count == 3 and batch.reserved == HEADER_SIZE + 3 * RECORD_RESERVATION
    batch.result.complete(0)
    acc.deallocate(batch)
    assert append(acc) is not None


def test_sealed_batch_is_kafka_bytes_with_producer_state() -> None:
    batch = ProducerBatch(TP0, 0, 0, 1_000, 16384)
    for i in range(5):
        batch.try_append(1_000 + i, b"k%d" % i, b"v%d" % i, (("h", b"x"),) if i == 2 else ())
    data = batch.seal(CompressionType.GZIP, producer_id=7, producer_epoch=1, base_sequence=40)
    header = validate_batch(data)
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.record_count) == (7, 1, 40, 5)
    assert (header.base_timestamp, header.max_timestamp, header.compression) == (1_000, 1_004, CompressionType.GZIP)
    records = decode_records(data)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (i, 1_000 + i, b"k%d" % i, b"v%d" % i) for i in range(5)]
    assert records[2].headers == (("h", b"x"),)


def test_an_uncompressed_batch_is_sealed_in_place_as_assemble_batch_writes_it() -> None:
    """The header goes into the room left before the records: no copy, and the bytes assemble_batch would write
    for the same records; sealed again under a new producer id (after a reset), the new header replaces it."""
    batch = ProducerBatch(TP0, 0, 0, 1_000, 16384)
    for i in range(5):
        batch.try_append(1_000 + i, None, b"v%d" % i, (("h", b"x"),) if i == 2 else ())
    records = bytes(batch.buffer[HEADER_SIZE:])
    data = batch.seal(CompressionType.NONE, producer_id=7, producer_epoch=1, base_sequence=40, is_transactional=True)
    assert data is batch.buffer and batch.size == len(data) == HEADER_SIZE + len(records)
    assert data == assemble_batch(records, 5, 1_000, 1_004, producer_id=7, producer_epoch=1, base_sequence=40,
                                  is_transactional=True)
    batch.unseal()
    data = batch.seal(CompressionType.NONE, producer_id=8, producer_epoch=0, base_sequence=0)
    header = validate_batch(data)  # the CRC is the new header's
    assert (header.producer_id, header.base_sequence, header.is_transactional) == (8, 0, False)
    assert [r.value for r in decode_records(data)] == [b"v%d" % i for i in range(5)]


# ---------------------------------------------------------------- keyless records: KIP-794's uniform sticky partitioner

TPS = tuple(TopicPartition("t", p) for p in range(3))


def append_keyless(acc: RecordAccumulator, value: bytes = VALUE, available: tuple[int, ...] = (0, 1, 2)) -> int:
    """Append a record without key or partition to topic t (three partitions); the partition it went to."""
    future = acc.append_keyless("t", TPS, available, 1_700_000_000_000, value, (), len(value), -1)
    return future.get(0).partition if future.done() else future._result.topic_partition.partition


def drain_partition(acc: RecordAccumulator, clock: FakeMonotonic, partition: int) -> None:
    """Send the partition's batches (a leader answering at once): they leave the queue and free their slot."""
    metadata = cluster({"t": 3})
    for batch in acc.drain(metadata, {partition + 1}, 1 << 20, clock.now_ms).get(partition + 1, []):
        acc.answered(batch)


def test_keyless_records_stick_until_batch_size_bytes_and_the_batch_is_sent() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=0, rand=random.Random(1))
    first = append_keyless(acc)
    partitions = [first]
    for i in range(2, 16):
        partitions.append(append_keyless(acc))
        if i % 3 == 0:
            drain_partition(acc, clock, first)
    # A 109-byte record: the tenth makes batch.size (1024) bytes; the batch open then takes records until it is
    # sent, after the twelfth; the thirteenth would open a new batch, so it goes to the next partition.
    assert partitions[:12] == [first] * 12
    assert partitions[12] != first and partitions[12:] == [partitions[12]] * 3


def test_a_partition_whose_batches_are_not_sent_gets_between_one_and_two_batch_sizes() -> None:
    acc = make(FakeMonotonic(), rand=random.Random(2))
    partitions = [append_keyless(acc) for _ in range(17)]
    # Eight records fill a batch (953 bytes); the ninth opens a second one before batch.size bytes went to the
    # partition, the seventeenth would open a third after: it switches (Kafka: at a batch boundary, up to 2x).
    assert partitions[:16] == [partitions[0]] * 16
    assert partitions[16] != partitions[0]


def test_twice_batch_size_ends_a_turn_even_in_an_open_batch() -> None:
    acc = make(FakeMonotonic(), rand=random.Random(3))
    first = append_keyless(acc)
    for _ in range(8):
        append_keyless(acc)  # 9 records: 981 bytes, under batch.size
    assert append_keyless(acc, b"x" * 1200) == first  # a batch of its own: 2192 bytes, past twice batch.size
    append(acc, tp=TPS[first], key=b"k")  # a keyed record opens a batch with room on the same partition
    # Kafka's updatePartitionInfo: past 2 x batch.size the turn ends though the partition's batch is open.
    assert append_keyless(acc) != first


def test_keyless_bytes_spread_evenly_whatever_each_leader_drains() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=0, rand=random.Random(4), max_in_flight_per_partition=1000)
    records = Counter()
    for _ in range(3000):
        records[append_keyless(acc)] += 1
        drain_partition(acc, clock, 1)  # partitions 1 and 2 are sent as soon as they have a record,
        drain_partition(acc, clock, 2)  # partition 0 never (its leader is slow)
    # Each turn is 1 to 2 x batch.size bytes: the slow partition gets 16 records a turn, the others 10; with
    # KIP-480's switch at every new batch the others got one record a turn and partition 0 eight times that.
    assert sum(records.values()) == 3000
    assert max(records.values()) / min(records.values()) < 1.7


def test_adaptive_partitioning_leaves_out_a_leader_past_the_availability_timeout() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=0, rand=random.Random(5), partitioner_availability_timeout_ms=100)
    metadata = cluster({"t": 3})
    for tp in TPS:
        append(acc, tp=tp)  # every partition has a queue: the adaptive draw has queue sizes
    big = b"x" * 1500  # a batch each: every keyless record after the first switches partition
    append_keyless(acc, big)
    acc.update_node_latency_stats({1, 2, 3}, {2, 3}, clock.now_ms)
    clock.advance(101)
    acc.update_node_latency_stats({1, 2, 3}, {2, 3}, clock.now_ms)  # node 1 had data but no free slot for 101 ms
    acc.ready(metadata, clock.now_ms)
    assert 0 not in {append_keyless(acc, big) for _ in range(30)}


def test_without_adaptive_partitioning_every_partition_takes_turns() -> None:
    clock = FakeMonotonic()
    acc = make(clock, linger_ms=0, rand=random.Random(6), partitioner_availability_timeout_ms=100,
               partitioner_adaptive_partitioning_enable=False)
    for tp in TPS:
        append(acc, tp=tp)
    big = b"x" * 1500
    append_keyless(acc, big)
    acc.update_node_latency_stats({1, 2, 3}, {2, 3}, clock.now_ms)
    clock.advance(101)
    acc.update_node_latency_stats({1, 2, 3}, {2, 3}, clock.now_ms)
    acc.ready(cluster({"t": 3}), clock.now_ms)
    assert {append_keyless(acc, big) for _ in range(30)} == {0, 1, 2}

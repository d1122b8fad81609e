"""The consumer's Fetcher: records out of fetch answers (filtering below the position), positions, errors."""

from __future__ import annotations

import struct

import pytest
from client_helpers import FakeFuture, FakeMetadata, cluster

from client.errors import MessageTooLargeError, OffsetOutOfRangeError
from client.fetcher import Fetcher, parse_records
from client.subscription import OffsetResetStrategy, SubscriptionState
from common.record import (
    CONTROL_MASK,
    CRC_POS,
    HEADER_SIZE,
    ProducerRecord,
    TimestampType,
    build_batch,
    crc32c,
    decode_records,
    serialized_header_size,
    set_log_append_time,
)
from proto import minibroker_pb2 as pb
from proto.errors import CorruptMessageError, ErrorCode, InvalidRecordError, KafkaError
from proto.types import TopicPartition
from tests.fakes import FakeMonotonic

TP = TopicPartition("t", 0)


def batch(base_offset: int, n: int, *, ts: int = 1_000, key: bytes | None = None) -> bytes:
    return build_batch([ProducerRecord(b"v%d" % (base_offset + i), key, ts + i) for i in range(n)],
                       base_offset=base_offset, partition_leader_epoch=4)


def test_records_below_the_fetch_offset_are_dropped() -> None:
    # A fetch at 7 gets the whole batch 5..9: the first two records were returned before.
    data = batch(0, 5) + batch(5, 5) + batch(10, 2)
    records, next_offset = parse_records(TP, data, 7)
    assert [r.offset for r in records] == [7, 8, 9, 10, 11]
    assert next_offset == 12
    r = records[0]
    assert (r.topic, r.partition, r.value, r.timestamp, r.timestamp_type, r.leader_epoch) == ("t", 0, b"v7", 1_002,
                                                                                             0, 4)
    assert (r.key, r.serialized_key_size, r.serialized_value_size, r.headers, r.serialized_header_size) == (
        None, -1, 2, (), -1)


def test_partial_batch_at_the_end_is_ignored() -> None:
    data = batch(0, 3) + batch(3, 3)[:-5]
    records, next_offset = parse_records(TP, data, 0)
    assert [r.offset for r in records] == [0, 1, 2] and next_offset == 3
    records, next_offset = parse_records(TP, batch(0, 3) + batch(3, 3)[:8], 0)  # not even a whole length field
    assert next_offset == 3


def test_an_answer_without_one_whole_batch_is_an_error_not_a_stall() -> None:
    with pytest.raises(MessageTooLargeError):
        parse_records(TP, batch(0, 3)[:-1], 0)


def test_control_batches_are_skipped_but_move_the_position() -> None:
    control = bytearray(batch(3, 1))
    struct.pack_into(">h", control, 21, CONTROL_MASK)
    struct.pack_into(">I", control, CRC_POS, crc32c(control[21:]))
    records, next_offset = parse_records(TP, batch(0, 3) + bytes(control), 0)
    assert [r.offset for r in records] == [0, 1, 2] and next_offset == 4


def test_log_append_time_and_deserializers() -> None:
    data = bytearray(batch(0, 2, key=b"k"))
    set_log_append_time(data, 0, len(data), 99_000)
    records, _ = parse_records(TP, bytes(data), 0, key_deserializer=bytes.decode, value_deserializer=bytes.upper)
    assert [(r.key, r.value, r.timestamp, r.timestamp_type) for r in records] == [
        ("k", b"V0", 99_000, TimestampType.LOG_APPEND_TIME), ("k", b"V1", 99_000, TimestampType.LOG_APPEND_TIME)]
    assert records[0].serialized_key_size == 1


def test_corrupt_batch_is_reported_when_crcs_are_checked() -> None:
    data = bytearray(batch(0, 3))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptMessageError):
        parse_records(TP, bytes(data), 0)


# ---------------------------------------------------------------------- Fetcher with a fake broker connection


class FetchHarness:
    def __init__(self, reset: OffsetResetStrategy | None = OffsetResetStrategy.EARLIEST) -> None:
        self.clock = FakeMonotonic()
        self.metadata = FakeMetadata(cluster({"t": 2}, leaders={("t", 0): 1, ("t", 1): 1}))
        self.subscriptions = SubscriptionState(reset)
        self.subscriptions.assign_from_user([TP, TopicPartition("t", 1)])
        self.fetcher = Fetcher(self.metadata, self.subscriptions, retry_backoff_ms=100,  # type: ignore[arg-type]
                               clock=self.clock)
        self.connection = self.metadata.connection(1)

    def fetch_calls(self) -> list[tuple[pb.FetchRequest, FakeFuture]]:
        return [(request, future) for name, request, future in self.connection.calls if name == "Fetch"]

    def answer(self, index: int, partitions: dict[int, tuple[int, bytes]]) -> None:
        _request, future = self.fetch_calls()[index]
        response = pb.FetchResponse()
        topic = response.responses.add(topic="t")
        for partition, (code, records) in partitions.items():
            topic.partitions.add(partition_index=partition, error_code=code, high_watermark=100, records=records)
        future.settle(response)


def test_one_fetch_per_leader_with_every_fetchable_partition() -> None:
    h = FetchHarness()
    h.subscriptions.seek(TP, 5)
    assert h.fetcher.send_fetches() == 1
    assert h.fetcher.send_fetches() == 0  # t-0's fetch is in flight, t-1 has no position
    request = h.fetch_calls()[0][0]
    assert request.replica_id == -1
    assert [(p.partition, p.fetch_offset) for p in request.topics[0].partitions] == [(0, 5)]  # t-1 has no position


def test_a_partition_does_not_wait_behind_another_ones_long_poll_at_the_same_leader() -> None:
    # t-1 is at its end: its fetch waits fetch_max_wait_ms at the broker. t-0's records were buffered; once they
    # are handed out, t-0's next fetch goes to the same leader at once, not after t-1's long poll.
    h = FetchHarness()
    h.subscriptions.seek(TP, 0)
    h.subscriptions.seek(TopicPartition("t", 1), 0)
    assert h.fetcher.send_fetches() == 1
    h.answer(0, {0: (0, batch(0, 5)), 1: (0, b"")})
    h.fetcher.handle_answers()
    assert h.fetcher.send_fetches() == 1  # t-1 again; t-0 has buffered records
    (request, _), = h.fetch_calls()[1:]
    assert [(p.partition, p.fetch_offset) for p in request.topics[0].partitions] == [(1, 0)]
    assert [r.offset for r in h.fetcher.fetched_records(100)[TP]] == [0, 1, 2, 3, 4]
    assert len(h.fetch_calls()) == 3  # t-0's next fetch, while t-1's is still out
    (request, _), = h.fetch_calls()[2:]
    assert [(p.partition, p.fetch_offset) for p in request.topics[0].partitions] == [(0, 5)]
    assert h.fetcher.send_fetches() == 0  # one fetch per partition in flight
    h.answer(2, {0: (0, batch(5, 2))})
    h.fetcher.handle_answers()
    assert [r.offset for r in h.fetcher.fetched_records(100)[TP]] == [5, 6]


def test_poll_hands_out_max_records_and_advances_the_position() -> None:
    h = FetchHarness()
    h.subscriptions.seek(TP, 2)
    h.fetcher.send_fetches()
    h.answer(0, {0: (0, batch(0, 5) + batch(5, 5))})
    h.fetcher.handle_answers()
    first = h.fetcher.fetched_records(3)
    assert [r.offset for r in first[TP]] == [2, 3, 4] and h.subscriptions.position(TP) == 5
    assert h.fetcher.send_fetches() == 0  # t-0 still has buffered records
    second = h.fetcher.fetched_records(100)
    assert [r.offset for r in second[TP]] == [5, 6, 7, 8, 9] and h.subscriptions.position(TP) == 10
    assert h.subscriptions.state(TP).high_watermark == 100


def test_seek_while_a_fetch_is_out_discards_its_records() -> None:
    h = FetchHarness()
    h.subscriptions.seek(TP, 0)
    h.fetcher.send_fetches()
    h.subscriptions.seek(TP, 50)
    h.answer(0, {0: (0, batch(0, 5))})
    h.fetcher.handle_answers()
    assert h.fetcher.fetched_records(100) == {} and h.subscriptions.position(TP) == 50


def test_offset_out_of_range_resets_by_auto_offset_reset() -> None:
    h = FetchHarness(OffsetResetStrategy.LATEST)
    h.subscriptions.seek(TP, 500)
    h.fetcher.send_fetches()
    h.answer(0, {0: (ErrorCode.OFFSET_OUT_OF_RANGE, b"")})
    h.fetcher.handle_answers()
    state = h.subscriptions.state(TP)
    assert state.position is None and state.reset_strategy is OffsetResetStrategy.LATEST


def test_offset_out_of_range_raises_with_reset_none() -> None:
    h = FetchHarness(None)
    h.subscriptions.seek(TP, 500)
    h.fetcher.send_fetches()
    h.answer(0, {0: (ErrorCode.OFFSET_OUT_OF_RANGE, b"")})
    with pytest.raises(OffsetOutOfRangeError):
        h.fetcher.handle_answers()


def test_not_leader_refreshes_metadata_and_backs_the_partition_off() -> None:
    h = FetchHarness()
    h.subscriptions.seek(TP, 0)
    h.fetcher.send_fetches()
    h.answer(0, {0: (ErrorCode.NOT_LEADER_OR_FOLLOWER, b"")})
    h.fetcher.handle_answers()
    assert h.metadata.updates_requested == 1
    assert h.fetcher.send_fetches() == 0  # no tight loop: wait retry_backoff_ms
    h.clock.advance(100)
    assert h.fetcher.send_fetches() == 1


def test_transport_failure_backs_off_every_partition_of_the_request() -> None:
    h = FetchHarness()
    h.subscriptions.seek(TP, 0)
    h.subscriptions.seek(TopicPartition("t", 1), 0)
    h.fetcher.send_fetches()
    h.fetch_calls()[0][1].settle(error=KafkaError("gone", ErrorCode.NETWORK_EXCEPTION))
    h.fetcher.handle_answers()
    assert h.metadata.updates_requested == 1 and h.fetcher.send_fetches() == 0
    h.clock.advance(100)
    assert h.fetcher.send_fetches() == 1


def test_non_retriable_partition_error_is_raised() -> None:
    h = FetchHarness()
    h.subscriptions.seek(TP, 0)
    h.fetcher.send_fetches()
    h.answer(0, {0: (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, b"")})
    with pytest.raises(KafkaError) as err:
        h.fetcher.handle_answers()
    assert err.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_records_with_headers_keys_and_wide_varints_decode_like_decode_records() -> None:
    records_in = [ProducerRecord(b"v" * size, b"key-%d" % size, 1_000 + size * 1000,
                                 (("h", b"x" * size), ("n", None)) if size % 2 else ())
                  for size in (0, 1, 63, 64, 200, 8191, 8192, 70_000)]
    data = build_batch(records_in, base_offset=3, partition_leader_epoch=2)
    records, next_offset = parse_records(TP, data, 0)
    expected = decode_records(data)
    assert next_offset == 3 + len(records_in)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in expected]
    assert [r.serialized_key_size for r in records] == [len(r.key) for r in records_in]
    assert [r.serialized_value_size for r in records] == [len(r.value or b"") for r in records_in]
    assert [r.serialized_header_size for r in records] == [
        serialized_header_size(r.headers) if r.headers else -1 for r in records_in]
    assert {r.leader_epoch for r in records} == {2}


def test_a_record_running_past_its_length_is_invalid() -> None:
    data = bytearray(batch(0, 2))
    data[HEADER_SIZE] += 2  # the first record claims two bytes more than it has
    struct.pack_into(">I", data, CRC_POS, crc32c(data[21:]))
    with pytest.raises(InvalidRecordError):
        parse_records(TP, bytes(data), 0)


def test_handing_out_a_whole_answer_sends_the_next_fetch_before_decoding_it() -> None:
    h = FetchHarness()
    h.subscriptions.seek(TP, 2)
    h.fetcher.send_fetches()
    h.answer(0, {0: (0, batch(0, 5) + batch(5, 5))})
    h.fetcher.handle_answers()
    assert len(h.fetch_calls()) == 1  # nothing decoded or sent yet
    records = h.fetcher.fetched_records(100)
    assert [r.offset for r in records[TP]] == list(range(2, 10)) and h.subscriptions.position(TP) == 10
    (request, _), = h.fetch_calls()[1:]
    assert [(p.partition, p.fetch_offset) for p in request.topics[0].partitions] == [(0, 10)]
    h.answer(1, {0: (0, batch(10, 3))})  # and its answer is taken as the continuation
    h.fetcher.handle_answers()
    assert [r.offset for r in h.fetcher.fetched_records(100)[TP]] == [10, 11, 12]


def test_records_that_cannot_be_decoded_lose_nothing_and_an_early_fetch_is_dropped() -> None:
    h = FetchHarness()
    tp1 = TopicPartition("t", 1)
    h.subscriptions.seek(TP, 0)
    h.subscriptions.seek(tp1, 0)
    h.fetcher.send_fetches()
    h.answer(0, {0: (0, batch(0, 2)), 1: (0, batch(0, 2))})
    h.fetcher.handle_answers()
    failing = next(c for c in h.fetcher._completed if c.topic_partition == tp1)
    failing.value_deserializer = lambda _: (_ for _ in ()).throw(ValueError("not JSON"))
    first = h.fetcher.fetched_records(100)
    # t-0's records come out (and its next fetch, from 2, left early); t-1's error waits for the next poll.
    assert list(first) == [TP] and [r.offset for r in first[TP]] == [0, 1]
    assert h.subscriptions.position(tp1) == 0
    with pytest.raises(ValueError):
        h.fetcher.fetched_records(100)
    assert h.subscriptions.position(tp1) == 0 and h.subscriptions.position(TP) == 2
    # t-0's next fetch, and t-1's early one (sent before its decode failed), each in a request of its own.
    assert [[(p.partition, p.fetch_offset) for p in request.topics[0].partitions]
            for request, _ in h.fetch_calls()[1:]] == [[(0, 2)], [(1, 2)]]
    h.answer(2, {1: (0, batch(2, 2))})
    h.fetcher.handle_answers()  # answered for a position t-1 no longer has: dropped
    with pytest.raises(ValueError):
        h.fetcher.fetched_records(100)
    assert h.subscriptions.position(tp1) == 0

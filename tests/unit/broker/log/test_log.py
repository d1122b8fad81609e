"""Log: appends (leader and follower), reads, rolls, truncation, retention, flush, epoch-cache calls."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from log_helpers import RecordingEpochCache, make_batch, read_all, values

from broker.config.log_config import LogConfig
from broker.log.log import Log, UnexpectedAppendOffsetError
from common.record import CompressionType, TimestampType, iter_batches, iter_headers
from proto.errors import (
    ErrorCode,
    OffsetOutOfRangeError,
)
from tests.fakes import FakeClock

OpenLog = Callable[..., Log]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_log(tmp_path: Path, clock: FakeClock) -> OpenLog:
    def opener(cache: RecordingEpochCache | None = None, **settings: object) -> Log:
        config = {"segment_bytes": 2000, "index_interval_bytes": 200, "max_index_size": 400, **settings}
        return Log.open(tmp_path / "orders-3", LogConfig(**config), time=clock,  # type: ignore[arg-type]
                        leader_epoch_cache=cache)
    return opener


def batch_size(records: int) -> int:
    return len(make_batch(records=records))


# ---------------------------------------------------------------------- leader append


def test_leader_append_assigns_offsets_and_epoch_by_patching_headers(open_log: OpenLog) -> None:
    cache = RecordingEpochCache()
    log = open_log(cache)
    assert log.topic_partition == ("orders", 3)
    request = make_batch(records=2, tag=1) + make_batch(records=3, timestamp=5000, tag=2)
    info = log.append_as_leader(request, leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.num_messages, info.valid_bytes) == (0, 4, 5, len(request))
    assert (info.max_timestamp, info.offset_of_max_timestamp, info.log_append_time) == (5002, 4, -1)
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in info.batches] == [(0, 1, 7), (2, 4, 7)]
    info = log.append_as_leader(make_batch(records=4, tag=3), leader_epoch=8)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (5, 8, 9)
    stored = read_all(log)
    assert [b.header.base_offset for b in stored] == [0, 2, 5]
    assert [b.header.partition_leader_epoch for b in stored] == [7, 7, 8]
    assert [r.offset for b in stored for r in b.records] == list(range(9))
    assert values(stored)[0] == b"1:0:xxxxxx"
    # Only the stamped bytes differ from what the producer sent: records are never re-encoded.
    first = stored[0]
    original = make_batch(records=2, tag=1)
    assert first.header.crc == next(iter_headers(original))[1].crc
    assert [c for c in cache.calls if c[0] == "assign"] == [("assign", 7, 0), ("assign", 8, 5)]


def test_leader_append_patches_a_writable_buffer_in_place_and_copies_bytes(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch(), leader_epoch=0)
    immutable = make_batch()
    log.append_as_leader(immutable, leader_epoch=0)
    assert next(iter_headers(immutable))[1].base_offset == 0
    writable = bytearray(make_batch())
    log.append_as_leader(writable, leader_epoch=0)
    assert next(iter_headers(writable))[1].base_offset == 6


def test_log_append_time_stamps_batches_with_the_broker_clock(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    clock.now = 123_456
    info = log.append_as_leader(make_batch(records=2, timestamp=5) + make_batch(records=2, timestamp=9), 0)
    assert (info.log_append_time, info.max_timestamp, info.offset_of_max_timestamp) == (123_456, 123_456, 3)
    stored = read_all(log)
    assert all(b.header.timestamp_type == TimestampType.LOG_APPEND_TIME for b in stored)
    assert {r.timestamp for b in stored for r in b.records} == {123_456}


def test_empty_append_writes_nothing(open_log: OpenLog) -> None:
    log = open_log()
    info = log.append_as_leader(b"", 0)
    assert (info.first_offset, info.last_offset, info.num_messages, log.log_end_offset) == (-1, -1, 0, 0)


def test_compressed_batches_are_stored_as_sent(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch(records=20, compression=CompressionType.GZIP), 0)
    assert [r.offset for r in read_all(log)[0].records] == list(range(20))


# ---------------------------------------------------------------------- follower append


def leader_batches(count: int, first_offset: int = 0, epoch: int = 3, records: int = 2) -> bytes:
    return b"".join(
        make_batch(records=records, tag=i, base_offset=first_offset + i * records, partition_leader_epoch=epoch)
        for i in range(count)
    )


def test_follower_append_keeps_the_leaders_offsets_and_epochs(open_log: OpenLog) -> None:
    cache = RecordingEpochCache()
    log = open_log(cache)
    data = leader_batches(2, epoch=3) + make_batch(records=2, base_offset=4, partition_leader_epoch=5)
    info = log.append_as_follower(data)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 5, 6)
    assert log.read(0, 1 << 20).records.read() == data
    assert [c for c in cache.calls if c[0] == "assign"] == [("assign", 3, 0), ("assign", 5, 4)]


def test_follower_append_refuses_overlap_and_gap(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_follower(leader_batches(2))
    with pytest.raises(UnexpectedAppendOffsetError) as overlap:
        log.append_as_follower(leader_batches(1, first_offset=2))
    assert "First offset 2 is less than the next offset 4" in str(overlap.value)
    assert (overlap.value.first_offset, overlap.value.last_offset) == (2, 3)
    with pytest.raises(UnexpectedAppendOffsetError, match="First offset 6 skips past the next offset 4"):
        log.append_as_follower(leader_batches(1, first_offset=6))
    out_of_order = leader_batches(1, first_offset=4) + leader_batches(1, first_offset=9)
    with pytest.raises(UnexpectedAppendOffsetError, match="base offset 9 follows a batch ending at offset 5"):
        log.append_as_follower(out_of_order)
    assert log.log_end_offset == 4


def test_follower_fetch_larger_than_a_segment_is_split_across_segments(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1000)
    data = leader_batches(30, records=1)
    assert len(data) > 2000
    log.append_as_follower(data)
    assert log.num_segments >= 3
    assert all(s.size <= 1000 for s in log.segments)
    assert b"".join(batch_bytes(log)) == data


def batch_bytes(log: Log) -> list[bytes]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 30)
        out.append(info.records.read())
        offset = list(iter_batches(out[-1]))[-1].header.next_offset
    return out


# ---------------------------------------------------------------------- read


def fill(log: Log, batches: int, records: int = 2, value_size: int = 10) -> None:
    for i in range(batches):
        log.append_as_leader(make_batch(records=records, value_size=value_size, tag=i), 0)


def test_read_whole_batches_within_max_bytes(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=100_000)
    fill(log, 10)
    size = batch_size(records=2)
    info = log.read(4, max_bytes=3 * size + size // 2)
    assert len(info.records) == 3 * size
    assert [b.header.base_offset for b in iter_batches(info.records.read())] == [4, 6, 8]
    assert info.fetch_offset_metadata.message_offset == 4
    assert info.fetch_offset_metadata.relative_position_in_segment == 2 * size


def test_read_from_the_middle_of_a_batch_returns_the_whole_batch(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, 3, records=5)
    got = list(iter_batches(log.read(7, 1 << 20).records.read()))
    assert got[0].header.base_offset == 5


def test_read_stops_before_max_offset(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=100_000)
    fill(log, 10)
    assert [b.header.last_offset for b in iter_batches(log.read(0, 1 << 20, max_offset=8).records.read())] == [
        1, 3, 5, 7]
    at_bound = log.read(8, 1 << 20, max_offset=8)
    assert len(at_bound.records) == 0 and at_bound.fetch_offset_metadata.message_offset == 8
    assert len(log.read(9, 1 << 20, max_offset=8).records) == 0
    assert len(log.read(0, 1 << 20, max_offset=1).records) == 0  # batch 0..1 straddles the bound


def test_read_max_offset_in_an_earlier_segment(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=3 * batch_size(records=2))
    fill(log, 9)
    assert log.num_segments == 3
    assert len(log.read(8, 1 << 20, max_offset=4).records) == 0
    assert [b.header.base_offset for b in iter_batches(log.read(0, 1 << 20, max_offset=4).records.read())] == [0, 2]


def test_kip74_first_batch_returned_whole_even_above_max_bytes(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch(records=3, value_size=500), 0)
    log.append_as_leader(make_batch(), 0)
    one = log.read(0, max_bytes=10)
    assert [b.header.base_offset for b in iter_batches(one.records.read())] == [0]
    none = log.read(0, max_bytes=10, min_one_message=False)
    assert len(none.records) == 0 and none.first_entry_incomplete


def test_read_at_log_end_is_empty_and_out_of_range_names_the_range(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, 3)
    at_end = log.read(6, 100)
    assert len(at_end.records) == 0
    assert at_end.fetch_offset_metadata == log.log_end_offset_metadata
    assert at_end.records.read() == b""
    with pytest.raises(OffsetOutOfRangeError) as past:
        log.read(7, 100)
    assert past.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert str(past.value) == ("OFFSET_OUT_OF_RANGE: Received request for offset 7 for partition orders-3, but we"
                               " only have log segments in the range 0 to 6.")
    log.maybe_increment_log_start_offset(3)
    with pytest.raises(OffsetOutOfRangeError, match=r"offset 2 .* in the range 3 to 6"):
        log.read(2, 100)
    assert [b.header.base_offset for b in iter_batches(log.read(3, 1 << 20).records.read())] == [2, 4]


def test_a_read_covers_one_segment(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=2 * batch_size(records=2))
    fill(log, 5)
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    assert [b.header.base_offset for b in iter_batches(log.read(2, 1 << 20).records.read())] == [2]
    assert [b.header.base_offset for b in iter_batches(log.read(4, 1 << 20).records.read())] == [4, 6]
    assert values(read_all(log)) == values(read_all(log, 0))


def test_slice_goes_out_with_sendfile(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, 4)
    info = log.read(2, 1 << 20)
    left, right = socket.socketpair()
    with left, right:
        assert info.records.sendfile(left.fileno()) == len(info.records)
        received = b""
        while len(received) < len(info.records):
            received += right.recv(1 << 16)
    assert received == info.records.read()


def test_slice_outlives_the_deletion_of_its_segment(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(segment_bytes=2 * batch_size(records=2), retention_ms=1000)
    fill(log, 4)
    info = log.read(0, 1 << 20)
    expected = info.records.read()
    clock.now += 10**9
    assert log.delete_old_segments() == 1
    assert not info.records.file.path.exists()
    assert info.records.read() == expected
    left, right = socket.socketpair()
    with left, right:
        assert info.records.sendfile(left.fileno()) == len(expected)


def test_fetch_offset_by_timestamp_searches_segments_in_order(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=2 * batch_size(records=2))
    for i in range(6):
        log.append_as_leader(make_batch(records=2, timestamp=1000 * (i + 1)), 0)
    assert log.fetch_offset_by_timestamp(3001)[:2] == (3001, 5)  # type: ignore[index]
    assert log.fetch_offset_by_timestamp(3500)[:2] == (4000, 6)  # type: ignore[index]
    assert log.fetch_offset_by_timestamp(0)[:2] == (1000, 0)  # type: ignore[index]
    assert log.fetch_offset_by_timestamp(10**6) is None


# ---------------------------------------------------------------------- roll


def test_roll_on_segment_bytes(open_log: OpenLog) -> None:
    size = batch_size(records=2)
    log = open_log(segment_bytes=3 * size)
    fill(log, 7)
    assert [(s.base_offset, s.size) for s in log.segments] == [(0, 3 * size), (6, 3 * size), (12, size)]
    names = sorted(p.name for p in log.dir.iterdir())
    assert names[:3] == ["00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex"]
    assert "00000000000000000012.log" in names


def test_roll_on_segment_ms_by_record_timestamps(open_log: OpenLog) -> None:
    log = open_log(segment_ms=10_000)
    log.append_as_leader(make_batch(timestamp=50_000), 0)
    log.append_as_leader(make_batch(timestamp=60_002), 0)  # max timestamp 60004 - 50002 = 10002 > 10000
    assert [s.base_offset for s in log.segments] == [0, 3]


def test_roll_on_segment_ms_by_wall_clock_when_records_have_no_timestamp(open_log: OpenLog, clock: FakeClock) -> None:
    from test_segment import without_timestamps

    log = open_log(segment_ms=10_000)
    log.append_as_leader(without_timestamps(make_batch()), 0)
    clock.now += 10_000
    log.append_as_leader(without_timestamps(make_batch()), 0)
    assert log.num_segments == 1
    clock.now += 1
    log.append_as_leader(without_timestamps(make_batch()), 0)
    assert [s.base_offset for s in log.segments] == [0, 6]


def test_roll_on_full_index_and_trim_of_the_old_indexes(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1 << 20, index_interval_bytes=0, max_index_size=48)  # 3 usable time entries
    fill(log, 10)
    assert log.num_segments > 1
    old = log.segments[0]
    assert old.offset_index.path.stat().st_size == 8 * old.offset_index.entries
    assert old.time_index.path.stat().st_size == 12 * old.time_index.entries
    assert log.active_segment.offset_index.path.stat().st_size == 48
    assert values(read_all(log)) == [f"{i}:{j}:".encode().ljust(10, b"x") for i in range(10) for j in range(2)]


def test_explicit_roll_flushes_the_old_segment(open_log: OpenLog) -> None:
    log = open_log()
    assert log.roll() is log.active_segment  # nothing to roll
    fill(log, 2)
    assert log.recovery_point == 0
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 4]
    assert log.recovery_point == 4


# ---------------------------------------------------------------------- truncation


def test_truncate_to_removes_later_segments_and_keeps_the_prefix(open_log: OpenLog) -> None:
    cache = RecordingEpochCache()
    log = open_log(cache, segment_bytes=2 * batch_size(records=2))
    fill(log, 6)
    log.flush()
    assert log.truncate_to(5)
    assert (log.log_end_offset, log.recovery_point) == (4, 4)  # batch 4..5 straddled the target
    assert [s.base_offset for s in log.segments] == [0, 4]
    assert log.active_segment.size == 0
    assert ("truncate_from_end", 4) in cache.calls
    assert not log.truncate_to(10)
    log.append_as_leader(make_batch(records=2, tag=77), 1)
    assert [r.offset for b in read_all(log) for r in b.records] == list(range(6))
    assert values(read_all(log))[-1] == b"77:1:xxxxx"


def test_truncate_to_a_segment_boundary_reactivates_the_previous_segment(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=2 * batch_size(records=2))
    fill(log, 6)
    assert log.segments[1].offset_index.length < 400  # trimmed when segment 8 took over
    log.truncate_to(6)
    assert ([s.base_offset for s in log.segments], log.log_end_offset) == ([0, 4], 6)
    assert log.active_segment.offset_index.length == 400
    fill(log, 1)
    assert ([s.base_offset for s in log.segments], log.log_end_offset) == ([0, 4], 8)


def test_truncate_below_the_first_segment_starts_over(open_log: OpenLog) -> None:
    cache = RecordingEpochCache()
    log = open_log(cache, segment_bytes=2 * batch_size(records=2))
    fill(log, 6)
    log.maybe_increment_log_start_offset(8)
    assert log.segments[0].base_offset == 8
    log.truncate_to(3)
    assert (log.log_start_offset, log.log_end_offset, log.num_segments) == (3, 3, 1)
    assert ("clear_and_flush",) in cache.calls


def test_truncate_fully_and_start_at(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, 3)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (100, 100, 100)
    assert sorted(p.name for p in log.dir.iterdir() if p.suffix == ".log") == ["00000000000000000100.log"]
    log.append_as_follower(leader_batches(1, first_offset=100))
    assert log.log_end_offset == 102


# ---------------------------------------------------------------------- retention and log start offset


def test_retention_by_time_uses_the_newest_timestamp_and_spares_the_active_segment(
        open_log: OpenLog, clock: FakeClock) -> None:
    cache = RecordingEpochCache()
    log = open_log(cache, segment_bytes=2 * batch_size(records=2), retention_ms=10_000)
    for i in range(5):
        log.append_as_leader(make_batch(records=2, timestamp=1000 * i), 0)
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    assert log.delete_old_segments(now_ms=1001 + 10_000) == 0  # segment 0's newest is 1001
    assert log.delete_old_segments(now_ms=1002 + 10_000) == 1
    assert (log.log_start_offset, [s.base_offset for s in log.segments]) == (4, [4, 8])
    assert ("truncate_from_start", 4) in cache.calls
    assert log.delete_old_segments(now_ms=10**12) == 1
    assert [s.base_offset for s in log.segments] == [8]
    assert not (log.dir / "00000000000000000000.log").exists()
    assert not list(log.dir.glob("*.deleted"))


def test_retention_by_size_keeps_the_log_under_retention_bytes(open_log: OpenLog) -> None:
    size = batch_size(records=2)
    log = open_log(segment_bytes=2 * size, retention_bytes=3 * size, retention_ms=-1)
    fill(log, 7)
    assert [s.size for s in log.segments] == [2 * size, 2 * size, 2 * size, size]
    assert log.delete_old_segments() == 2
    assert log.size_in_bytes == 3 * size
    assert log.log_start_offset == 8


def test_retention_only_below_the_high_watermark(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=2 * batch_size(records=2), retention_bytes=0, retention_ms=-1)
    fill(log, 6)
    assert log.delete_old_segments(high_watermark=7) == 1
    assert log.delete_old_segments(high_watermark=8) == 1
    assert log.delete_old_segments() == 0  # the active segment stays
    assert log.num_segments == 1


def test_log_start_offset_moves_only_forward_and_not_past_the_end(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=2 * batch_size(records=2))
    fill(log, 5)
    log.maybe_increment_log_start_offset(5)
    assert (log.log_start_offset, [s.base_offset for s in log.segments]) == (5, [4, 8])
    log.maybe_increment_log_start_offset(2)
    assert log.log_start_offset == 5
    with pytest.raises(OffsetOutOfRangeError, match="larger than the log end offset 10"):
        log.maybe_increment_log_start_offset(11)


# ---------------------------------------------------------------------- flush


def test_flush_interval_messages(open_log: OpenLog) -> None:
    log = open_log(flush_interval_messages=5)
    fill(log, 2)
    assert log.recovery_point == 0
    fill(log, 1)
    assert log.recovery_point == 6 == log.log_end_offset


def test_flush_interval_ms_with_the_injected_clock(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(flush_interval_ms=1000)
    fill(log, 1)
    log.maybe_flush()
    assert log.recovery_point == 0
    clock.now += 1000
    log.maybe_flush()
    assert (log.recovery_point, log.last_flush_time) == (2, clock.now)
    fill(log, 1)
    clock.now += 1000
    fill(log, 1)  # an append notices the interval has passed too
    assert log.recovery_point == 6


def test_flush_up_to_an_offset(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, 4)
    log.flush(4)
    assert log.recovery_point == 4
    log.flush(2)
    assert log.recovery_point == 4
    log.flush()
    assert log.recovery_point == 8


def test_flush_syncs_the_leader_epoch_history_before_the_recovery_point_passes_it(open_log: OpenLog) -> None:
    # A new leader's first epoch is written without fsync (write_needs_fsync): the flush that makes its first
    # records durable makes the epoch durable first.
    recovery_points_at_sync: list[int] = []

    class Cache(RecordingEpochCache):
        def sync(self) -> None:
            recovery_points_at_sync.append(log.recovery_point)

    log = open_log(Cache())
    fill(log, 2)
    log.flush()
    assert recovery_points_at_sync == [0] and log.recovery_point == log.log_end_offset
    log.flush()  # nothing to flush: the history is synced all the same (a clean shutdown flushes this way)
    assert recovery_points_at_sync == [0, log.log_end_offset]


def test_close_flushes_and_trims_and_reopen_sees_everything(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, 6)
    log.close()
    active = sorted(log.dir.glob("*.index"))[-1]
    assert active.stat().st_size % 8 == 0 and active.stat().st_size < 400
    reopened = open_log()
    assert reopened.log_end_offset == 12
    assert reopened.recovery_report == []
    assert values(read_all(reopened)) == [f"{i}:{j}:".encode().ljust(10, b"x") for i in range(6) for j in range(2)]



# ---------------------------------------------------------------------- threads


def test_concurrent_appends_reads_flushes_and_retention(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=4 * batch_size(records=2), retention_bytes=40 * batch_size(records=2),
                   retention_ms=-1)
    writers, per_writer = 3, 60
    errors: list[BaseException] = []
    done = threading.Event()

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # surfaced by the main thread
                errors.append(exc)
        return run

    def write(writer: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(per_writer):
                log.append_as_leader(make_batch(records=2, tag=writer * 1000 + i), 0)
        return run

    def read() -> None:
        while not done.is_set():
            start, end = log.log_start_offset, log.log_end_offset
            for offset in range(start, end, 7):
                try:
                    data = log.read(offset, 300).records.read()
                except OffsetOutOfRangeError:
                    continue  # retention moved the log start meanwhile
                batches = list(iter_batches(data))  # whole, valid batches only
                assert batches and batches[0].header.base_offset <= offset <= batches[0].header.last_offset

    def housekeeping() -> None:
        while not done.is_set():
            log.flush()
            log.delete_old_segments()

    threads = [threading.Thread(target=guarded(write(w))) for w in range(writers)]
    background = [threading.Thread(target=guarded(read)), threading.Thread(target=guarded(housekeeping))]
    for thread in threads + background:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    for thread in background:
        thread.join()
    assert not errors, errors
    assert log.log_end_offset == writers * per_writer * 2
    stored = read_all(log)
    assert [r.offset for b in stored for r in b.records] == list(range(log.log_start_offset, log.log_end_offset))
    for writer in range(writers):  # each writer's batches in the order it appended them
        tags = [int(v.split(b":")[0]) for v in values(stored)[::2] if v and int(v.split(b":")[0]) // 1000 == writer]
        assert tags == sorted(tags)
    # Retention may have taken every batch of a writer that finished early, but never the newest batch,
    # which is some writer's last.
    newest = int(values(stored)[-2].split(b":")[0])
    assert newest in {writer * 1000 + per_writer - 1 for writer in range(writers)}


def test_works_with_the_real_leader_epoch_file_cache(tmp_path: Path, open_log: OpenLog) -> None:
    from broker.log.leader_epoch import LeaderEpochFileCache

    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    log = open_log(cache)
    fill(log, 2)
    log.append_as_leader(make_batch(records=2), 3)
    assert [tuple(e) for e in cache.entries] == [(0, 0), (3, 4)]
    log.truncate_to(4)
    assert [tuple(e) for e in cache.entries] == [(0, 0)]


def test_truncate_at_the_log_end_still_drops_an_epoch_entry_there(tmp_path: Path, open_log: OpenLog) -> None:
    """KAFKA-10706: a leader of epoch 7 that wrote nothing keeps (7, LEO) in its cache. As a follower of epoch 8 it
    asks about epoch 7, is told to truncate to its own log end, and must lose the entry, or it asks for ever."""
    from broker.log.leader_epoch import LeaderEpochFileCache

    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    log = open_log(cache)
    log.append_as_leader(make_batch(records=2), 5)
    cache.assign(7, log.log_end_offset)  # make_leader in epoch 7, then paused before any append
    assert not log.truncate_to(log.log_end_offset)
    assert [tuple(e) for e in cache.entries] == [(5, 0)]


def test_the_log_tells_each_move_of_its_recovery_point_or_log_start_offset(tmp_path: Path, clock: FakeClock) -> None:
    """What the LogManager's offset checkpoints are written on: a move, never an append alone."""
    moves: list[tuple[int, int]] = []
    log = Log.open(tmp_path / "orders-3", LogConfig(), time=clock,
                   offsets_moved=lambda: moves.append((log.recovery_point, log.log_start_offset)))
    for _ in range(10):
        log.append_as_leader(make_batch(1), leader_epoch=0)
    assert moves == []
    log.flush()
    log.flush()  # nothing new to flush
    assert moves == [(10, 0)]
    log.maybe_increment_log_start_offset(2)
    assert moves == [(10, 0), (10, 2)]
    log.truncate_to(12)  # past the log end: nothing moves
    log.truncate_to(6)
    assert moves == [(10, 0), (10, 2), (6, 2)]
    log.truncate_fully_and_start_at(20)
    assert moves[-1] == (20, 20) and len(moves) == 4

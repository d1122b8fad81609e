"""LogSegment: append and index rule, reads of whole batches, roll triggers, truncation, recovery rebuild."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from log_helpers import make_batch, open_files_under

from broker.config.log_config import LogConfig
from broker.log.files import filename_prefix_from_offset
from broker.log.index import OffsetPosition, TimestampOffset
from broker.log.segment import BatchSpan, LogSegment
from broker.log.transaction_index import AbortedTxn
from common.record import BatchHeader, crc32c, iter_batches, iter_headers, patch_base_offset_and_epoch
from proto.errors import CorruptMessageError


def stamped(raw: list[bytes], first_offset: int) -> tuple[memoryview, list[BatchHeader]]:
    """Batches back to back with offsets assigned from `first_offset`, as a leader would."""
    data = bytearray()
    headers = []
    offset = first_offset
    for batch in raw:
        position = len(data)
        data += batch
        patch_base_offset_and_epoch(data, position, offset, 0)
        header = next(iter_headers(bytes(data[position:])))[1]
        headers.append(header)
        offset = header.next_offset
    return memoryview(data), headers


def spans(headers: list[BatchHeader]) -> list[BatchSpan]:
    return [BatchSpan(h.last_offset, h.max_timestamp, h.size) for h in headers]


def new_segment(tmp_path: Path, base: int = 0, now: int = 0, **config: int) -> LogSegment:
    settings = {"segment_bytes": 10_000, "index_interval_bytes": 100, "max_index_size": 1200}
    settings.update(config)
    return LogSegment(tmp_path, base, LogConfig(**settings), now, create=True)  # type: ignore[arg-type]


def append(segment: LogSegment, raw: list[bytes], first_offset: int) -> list[BatchHeader]:
    data, headers = stamped(raw, first_offset)
    segment.append(data, spans(headers))
    return headers


def test_file_names_are_twenty_digit_base_offsets(tmp_path: Path) -> None:
    new_segment(tmp_path, base=42)
    assert filename_prefix_from_offset(42) == "00000000000000000042"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000042.index", "00000000000000000042.log", "00000000000000000042.timeindex",
    ]


def test_index_entry_per_interval_keyed_by_batch_last_offset_at_batch_start(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    raw = [make_batch(records=3, value_size=30, timestamp=1000 + 10 * i, tag=i) for i in range(6)]
    size = len(raw[0])  # each batch is larger than the 100-byte interval
    assert size > 100
    headers = append(segment, raw, 0)
    assert segment.size == 6 * size
    # Kafka's rule: bytes since the last entry must exceed the interval, so batch 0 is never indexed.
    expected = [OffsetPosition(h.last_offset, i * size) for i, h in enumerate(headers)][1:]
    assert [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)] == expected
    assert segment.time_index.last_entry == TimestampOffset(headers[-1].max_timestamp, headers[-1].last_offset)


def test_recover_rebuilds_the_same_indexes_the_appends_wrote(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    offset = 0
    for i in range(8):  # appends of one to three batches of varied sizes
        raw = [make_batch(records=1 + j, value_size=20 + 15 * i, timestamp=500 + i, tag=i) for j in range(i % 3 + 1)]
        offset = append(segment, raw, offset)[-1].next_offset
    written = [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)]
    written_time = [segment.time_index.entry(i) for i in range(segment.time_index.entries)]
    result = segment.recover()
    assert (result.valid_bytes, result.truncated_bytes, result.reason) == (segment.size, 0, None)
    assert [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)] == written
    assert [segment.time_index.entry(i) for i in range(segment.time_index.entries)] == written_time


def test_translate_offset_finds_the_batch_holding_an_offset(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, base=50)
    headers = append(segment, [make_batch(records=4, value_size=40, tag=i) for i in range(5)], 50)
    size = headers[0].size
    for i, header in enumerate(headers):
        for offset in (header.base_offset, header.last_offset):
            position, found = segment.translate_offset(offset)  # type: ignore[misc]
            assert (position, found.base_offset) == (i * size, header.base_offset)
    assert segment.translate_offset(headers[-1].next_offset) is None
    assert segment.read_next_offset() == headers[-1].next_offset == 70


def test_an_offset_of_the_last_append_is_found_from_where_that_append_began(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caught-up follower fetches from where the leader's last append began: one header read there, not a scan
    of every batch since the index's last entry (issue 27: small batches over many partitions)."""
    segment = new_segment(tmp_path, index_interval_bytes=1 << 20)  # no index entry: the index says position 0
    headers = [append(segment, [make_batch(records=1, value_size=20, tag=i)], i)[0] for i in range(30)]
    last_two = append(segment, [make_batch(records=1, value_size=20, tag=i) for i in (30, 31)], 30)
    reads: list[int] = []
    header_at = segment._header_at
    monkeypatch.setattr(segment, "_header_at", lambda position: reads.append(position) or header_at(position))
    found = segment.translate_offset(31)
    assert found is not None and found[1].base_offset == 31
    assert len(reads) == 2, "the last append's two batches, not the 31 before"
    # Offsets before the last append are still found (from the index), and every one lands on its batch.
    expected = 0
    for header in [*headers, *last_two]:
        position, batch = segment.translate_offset(header.base_offset)  # type: ignore[misc]
        assert (position, batch.base_offset) == (expected, header.base_offset)
        expected += header.size
    # Truncation forgets where the last append began: a later append begins a new one.
    segment.truncate_to(31, now_ms=0)
    assert segment.translate_offset(31) is None
    again = append(segment, [make_batch(records=1, value_size=20, tag=99)], 31)[0]
    reads.clear()
    assert segment.translate_offset(31)[1].base_offset == again.base_offset  # type: ignore[index]
    assert len(reads) == 1


def test_read_returns_whole_batches_within_max_size_and_max_position(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    headers = append(segment, [make_batch(records=2, value_size=50, tag=i) for i in range(6)], 0)
    size = headers[0].size
    info = segment.read(2, max_size=3 * size - 1, max_position=segment.size, min_one_message=False)
    assert info is not None
    assert (info.fetch_offset_metadata.relative_position_in_segment, len(info.records)) == (size, 2 * size)
    assert [b.header.base_offset for b in iter_batches(info.records.read())] == [2, 4]
    bounded = segment.read(2, max_size=10_000, max_position=3 * size, min_one_message=False)
    assert bounded is not None and len(bounded.records) == 2 * size
    too_small = segment.read(2, max_size=size - 1, max_position=segment.size, min_one_message=False)
    assert too_small is not None and len(too_small.records) == 0 and too_small.first_entry_incomplete
    kip74 = segment.read(2, max_size=1, max_position=segment.size, min_one_message=True)
    assert kip74 is not None and len(kip74.records) == size and not kip74.first_entry_incomplete


def test_should_roll_when_the_append_would_not_fit(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, segment_bytes=1000)
    append(segment, [make_batch(value_size=100)], 0)
    assert not segment.should_roll(1000 - segment.size, 1000, 10, now_ms=0)
    assert segment.should_roll(1000 - segment.size + 1, 1000, 10, now_ms=0)


def test_should_roll_on_age_of_first_batch_timestamp(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, segment_ms=1000)
    append(segment, [make_batch(timestamp=5000)], 0)  # batch max timestamp 5002
    assert not segment.should_roll(10, max_timestamp_in_messages=6002, max_offset_in_messages=5, now_ms=10**9)
    assert segment.should_roll(10, max_timestamp_in_messages=6003, max_offset_in_messages=5, now_ms=0)


def without_timestamps(batch: bytes) -> bytes:
    """The batch with baseTimestamp and maxTimestamp -1 (NO_TIMESTAMP), CRC redone."""
    data = bytearray(batch)
    data[27:43] = struct.pack(">qq", -1, -1)
    data[17:21] = struct.pack(">I", crc32c(bytes(data[21:])))
    return bytes(data)


def test_should_roll_on_wall_clock_age_without_timestamps(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, now=10_000, segment_ms=1000)
    assert not segment.should_roll(10, -1, 0, now_ms=10**9)  # an empty segment never rolls on time
    append(segment, [without_timestamps(make_batch())], 0)
    assert not segment.should_roll(10, -1, 5, now_ms=11_000)
    assert segment.should_roll(10, -1, 5, now_ms=11_001)


def test_should_roll_on_relative_offset_overflow(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, base=10)
    append(segment, [make_batch()], 10)
    assert not segment.should_roll(10, 0, 10 + 2**31 - 1, now_ms=0)
    assert segment.should_roll(10, 0, 10 + 2**31, now_ms=0)


def test_should_roll_on_full_offset_index(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, index_interval_bytes=0, max_index_size=36)  # 4 offset entries
    append(segment, [make_batch(timestamp=5) for _ in range(4)], 0)
    assert segment.offset_index.entries == 3
    assert not segment.should_roll(10, 0, 100, now_ms=0)
    append(segment, [make_batch(timestamp=5)], 12)
    assert segment.offset_index.is_full and not segment.time_index.is_full
    assert segment.should_roll(10, 0, 100, now_ms=0)


def test_should_roll_on_full_time_index(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, index_interval_bytes=0, max_index_size=24)  # 1 usable time entry
    append(segment, [make_batch(timestamp=5)], 0)
    assert not segment.should_roll(10, 0, 100, now_ms=0)
    append(segment, [make_batch(timestamp=9)], 3)
    assert segment.time_index.is_full and not segment.offset_index.is_full
    assert segment.should_roll(10, 0, 100, now_ms=0)


def test_truncate_to_drops_the_batch_holding_the_offset_and_everything_after(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, now=7)
    headers = append(segment, [make_batch(records=3, value_size=60, timestamp=100 * i, tag=i) for i in range(5)], 0)
    size = headers[0].size
    assert segment.truncate_to(7, now_ms=9) == 3 * size  # offset 7 lies in batch 6..8
    assert (segment.size, segment.read_next_offset()) == (2 * size, 6)
    assert segment.offset_index.last_offset < 6
    assert segment.time_index.last_entry.offset < 6
    assert segment.max_timestamp_and_offset == TimestampOffset(102, 5)
    assert segment.truncate_to(6, now_ms=9) == 0
    assert segment.truncate_to(0, now_ms=9) == 2 * size
    assert segment.created_ms == 9


def test_find_offset_by_timestamp_returns_the_first_record_at_or_after(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    append(segment, [make_batch(records=5, value_size=40, timestamp=1000 * (i + 1), tag=i) for i in range(4)], 0)
    assert segment.find_offset_by_timestamp(2002, starting_offset=0)[:2] == (2002, 7)  # type: ignore[index]
    assert segment.find_offset_by_timestamp(0, starting_offset=0)[:2] == (1000, 0)  # type: ignore[index]
    assert segment.find_offset_by_timestamp(0, starting_offset=12)[:2] == (3002, 12)  # type: ignore[index]
    assert segment.find_offset_by_timestamp(4005, starting_offset=0) is None


def test_preallocated_log_is_trimmed_when_the_segment_becomes_inactive(tmp_path: Path) -> None:
    preallocated = LogSegment(tmp_path, 100, LogConfig(segment_bytes=4096, preallocate=True), 0, create=True)
    assert preallocated.path.stat().st_size == 4096
    append(preallocated, [make_batch()], 100)
    preallocated.on_become_inactive()
    assert preallocated.path.stat().st_size == preallocated.size
    assert preallocated.offset_index.path.stat().st_size == 0


def test_on_become_inactive_trims_indexes_and_records_final_time_entry(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, index_interval_bytes=10**6)
    append(segment, [make_batch(timestamp=70)], 0)
    assert segment.time_index.entries == 0
    segment.on_become_inactive()
    assert segment.time_index.entries == 1
    assert segment.time_index.path.stat().st_size == 12
    assert segment.offset_index.path.stat().st_size == 0


@pytest.mark.parametrize("corruption", ["crc", "torn", "offset gap"])
def test_recover_truncates_at_the_first_bad_batch(tmp_path: Path, corruption: str) -> None:
    segment = new_segment(tmp_path)
    headers = append(segment, [make_batch(records=2, value_size=50, tag=i) for i in range(4)], 0)
    size = headers[0].size
    with open(segment.path, "r+b") as f:
        if corruption == "crc":
            f.seek(2 * size + 70)
            byte = f.read(1)
            f.seek(2 * size + 70)
            f.write(bytes([byte[0] ^ 0xFF]))
        elif corruption == "torn":
            f.truncate(3 * size + 20)
        else:
            f.seek(2 * size)
            f.write((99).to_bytes(8, "big"))  # base offset lies outside the CRC: only contiguity catches it
    damaged_size = segment.size = segment.log_file.size()
    result = segment.recover()
    assert result.valid_bytes == (3 if corruption == "torn" else 2) * size
    assert result.truncated_bytes == damaged_size - result.valid_bytes
    assert segment.size == result.valid_bytes == segment.log_file.size()
    assert segment.read_next_offset() == result.valid_bytes // size * 2
    assert result.reason is not None and f"position {result.valid_bytes}" in result.reason


def test_headers_walks_every_batch_as_batches_from_does(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, base=100)
    assert list(segment.headers()) == []
    written = append(segment, [make_batch(records=2, tag=i) for i in range(5)], 100)
    assert list(segment.headers()) == written == [h for _, h in segment.batches_from(0)]


def test_headers_stops_at_a_malformed_header(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    written = append(segment, [make_batch(tag=i) for i in range(3)], 0)
    with open(segment.path, "r+b") as f:  # the second batch's magic byte (offset 16 in its header)
        f.seek(written[0].size + 16)
        f.write(b"\x07")
    walked = segment.headers()
    assert next(walked) == written[0]
    with pytest.raises(CorruptMessageError, match=r"malformed batch header .* magic 7"):
        next(walked)


# ---------------------------------------------------------------------- files held open


def sealed_segment(tmp_path: Path) -> tuple[LogSegment, list[BatchHeader]]:
    """A segment written, rolled away from (sealed) and closed, then opened as loading opens it."""
    segment = new_segment(tmp_path, base=10)
    headers = append(segment, [make_batch(records=2, value_size=60, timestamp=100 * i, tag=i) for i in range(5)], 10)
    segment.on_become_inactive()
    segment.close()
    return LogSegment(tmp_path, 10, segment.config, 0, create=False), headers


def test_a_segment_holds_one_file_descriptor_its_log(tmp_path: Path) -> None:
    """Kafka's cost of a segment: its `.log`; the indexes are mapped without one, the `.txnindex` opened per use."""
    segment = new_segment(tmp_path)
    append(segment, [make_batch(records=2, value_size=60, tag=i) for i in range(5)], 0)
    segment.txn_index.append(AbortedTxn(producer_id=1, first_offset=0, last_offset=9, last_stable_offset=0))
    segment.flush()
    assert segment.offset_index.entries > 0 and segment.time_index.entries > 0
    assert open_files_under(tmp_path) == ["00000000000000000000.log"]


def test_a_loaded_segment_maps_its_indexes_on_the_first_lookup_only(tmp_path: Path) -> None:
    segment, headers = sealed_segment(tmp_path)
    # What loading and retention ask of every segment leaves the indexes unmapped (peeked, then cached).
    assert segment.sanity_check() == segment.read_next_offset() == headers[-1].next_offset
    assert segment.max_timestamp_and_offset == TimestampOffset(headers[-1].max_timestamp, headers[-1].last_offset)
    segment.flush()
    assert (segment.lazy_offset_index.is_loaded, segment.lazy_time_index.is_loaded) == (False, False)
    found = segment.translate_offset(headers[3].base_offset)  # a fetch: the offset index is mapped for good
    assert found is not None and found[1].base_offset == headers[3].base_offset
    assert (segment.lazy_offset_index.is_loaded, segment.lazy_time_index.is_loaded) == (True, False)
    found_by_time = segment.find_offset_by_timestamp(200, 10)
    assert found_by_time is not None and found_by_time.offset == headers[2].base_offset
    assert segment.lazy_time_index.is_loaded


def test_an_unloaded_segment_is_renamed_and_deleted_whole(tmp_path: Path) -> None:
    segment, _ = sealed_segment(tmp_path)
    segment.change_file_suffixes("", ".swap")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000010.index.swap", "00000000000000000010.log.swap", "00000000000000000010.timeindex.swap"]
    segment.delete()
    assert list(tmp_path.iterdir()) == [] and not segment.lazy_offset_index.is_loaded


def test_a_loaded_segment_reads_its_txnindex_on_the_first_look_only(tmp_path: Path) -> None:
    """Kafka's TransactionIndex opens its file lazily: opening a log reads none of its segments' `.txnindex`."""
    segment = new_segment(tmp_path)
    aborted = AbortedTxn(producer_id=1, first_offset=0, last_offset=9, last_stable_offset=0)
    segment.txn_index.append(aborted)
    segment.close()
    config = segment.config
    del segment  # its .log's descriptor goes with it
    reopened = LogSegment(tmp_path, 0, config, 0, create=False)
    reopened.flush()
    reopened.change_file_suffixes("", ".swap")
    reopened.change_file_suffixes(".swap", "")
    assert not reopened.txn_index.is_loaded
    assert reopened.txn_index.collect_aborted_txns(0, 20) == ([aborted], False)
    assert reopened.txn_index.is_loaded and open_files_under(tmp_path) == ["00000000000000000000.log"]

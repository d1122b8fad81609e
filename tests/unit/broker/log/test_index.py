"""OffsetIndex / TimeIndex: lookups, appends, truncation, preallocation, trimming, reopening, sanity checks."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from log_helpers import open_files_under

from broker.log import index as index_module
from broker.log.index import CorruptIndexError, OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset

BASE = 100


def offset_index(tmp_path: Path, max_size: int = 8 * 10) -> OffsetIndex:
    return OffsetIndex(tmp_path / "00000000000000000100.index", BASE, max_size)


def time_index(tmp_path: Path, max_size: int = 12 * 10) -> TimeIndex:
    return TimeIndex(tmp_path / "00000000000000000100.timeindex", BASE, max_size)


def test_new_offset_index_is_preallocated_to_whole_entries(tmp_path: Path) -> None:
    index = offset_index(tmp_path, max_size=8 * 10 + 5)
    assert index.path.stat().st_size == 80
    assert (index.entries, index.max_entries, index.is_full) == (0, 10, False)


def test_offset_index_lookup_is_largest_entry_at_or_below(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for offset, position in [(105, 400), (110, 900), (120, 1500)]:
        index.append(offset, position)
    assert index.lookup(99) == OffsetPosition(BASE, 0)
    assert index.lookup(104) == OffsetPosition(BASE, 0)
    assert index.lookup(105) == OffsetPosition(105, 400)
    assert index.lookup(119) == OffsetPosition(110, 900)
    assert index.lookup(10**9) == OffsetPosition(120, 1500)
    assert index.lookup_by_position(899) == OffsetPosition(105, 400)
    assert index.lookup_by_position(900) == OffsetPosition(110, 900)
    assert index.lookup_by_position(10) == OffsetPosition(BASE, 0)
    assert index.last_entry == OffsetPosition(120, 1500)


def test_offset_index_entries_are_relative_big_endian(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(105, 400)
    index.close()
    assert index.path.read_bytes() == struct.pack(">ii", 5, 400)


def test_offset_index_refuses_non_increasing_offsets_and_overflow_when_full(tmp_path: Path) -> None:
    index = offset_index(tmp_path, max_size=16)
    index.append(105, 400)
    with pytest.raises(ValueError, match="no larger than the last offset"):
        index.append(105, 500)
    index.append(106, 500)
    assert index.is_full
    with pytest.raises(ValueError, match="full index"):
        index.append(107, 600)


def test_offset_index_relative_offset_must_fit_in_int32(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    assert index.can_append_offset(BASE + 2**31 - 1)
    assert not index.can_append_offset(BASE + 2**31)
    assert not index.can_append_offset(BASE - 1)
    with pytest.raises(ValueError, match="does not fit"):
        index.append(BASE + 2**31, 10)


def test_offset_index_truncate_to_drops_entries_at_or_above(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for offset, position in [(105, 400), (110, 900), (120, 1500)]:
        index.append(offset, position)
    index.truncate_to(111)
    assert index.entries == 2
    index.truncate_to(110)
    assert index.entries == 1
    index.truncate_to(50)
    assert index.entries == 0
    index.append(101, 30)
    assert index.last_entry == OffsetPosition(101, 30)


def test_trim_then_reopen_keeps_exact_entries(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(105, 400)
    index.append(110, 900)
    index.trim_to_valid_size()
    assert index.path.stat().st_size == 16
    index.close_handler()
    reopened = offset_index(tmp_path)
    assert not reopened.newly_created
    assert (reopened.entries, reopened.lookup(200)) == (2, OffsetPosition(110, 900))
    assert reopened.lookup_by_position(10**6) == OffsetPosition(110, 900)  # last slot of a trimmed map
    reopened.resize(80)
    assert (reopened.entries, reopened.max_entries) == (2, 10)
    reopened.append(111, 950)
    assert reopened.entries == 3


def test_reopen_after_unclean_stop_ignores_zero_filled_preallocated_tail(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(105, 400)
    index.append(110, 900)
    index.close_handler()  # no trim: what a killed process leaves behind
    assert index.path.stat().st_size == 80
    reopened = offset_index(tmp_path)
    assert reopened.entries == 2
    assert reopened.lookup(200) == OffsetPosition(110, 900)
    # Usable, but not what a sealed segment leaves: its segment rebuilds it rather than trust it.
    with pytest.raises(CorruptIndexError, match="80 bytes but 2 entries: it was not trimmed"):
        reopened.sanity_check(log_size=1000)
    reopened.trim_to_valid_size()
    reopened.sanity_check(log_size=1000)


def test_reopening_a_preallocated_index_reads_only_its_data_not_its_holes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An active segment's index is preallocated sparse to segment.index.bytes; after an unclean stop every
    partition opens two. Its entries are found in the pages that hold data, not by reading the whole file."""
    index = OffsetIndex(tmp_path / "00000000000000000100.index", base_offset=100, max_index_size=10 << 20)
    index.append(105, 400)
    index.append(110, 900)
    index.close_handler()
    scanned: list[int] = []
    real = index_module._length_before_zero_tail

    def spy(data: bytes, end: int | None = None) -> int:
        scanned.append(len(data) if end is None else min(end, len(data)))
        return real(data) if end is None else real(data, end)

    monkeypatch.setattr(index_module, "_length_before_zero_tail", spy)
    reopened = OffsetIndex(tmp_path / "00000000000000000100.index", base_offset=100, max_index_size=10 << 20)
    assert reopened.entries == 2 and reopened.lookup(200) == OffsetPosition(110, 900)
    assert scanned and max(scanned) <= 1 << 16, f"read {max(scanned)} bytes of a 10 MiB index to find 2 entries"

def test_time_index_of_one_zero_entry_is_kept_when_trimmed(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    index.maybe_append(0, BASE)  # timestamp 0 at the base offset: an all-zero entry
    index.close()
    assert time_index(tmp_path).entries == 1


def test_time_index_appends_only_growing_timestamps(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    assert index.last_entry == TimestampOffset(-1, BASE)
    index.maybe_append(1000, 104)
    index.maybe_append(1000, 106)  # same timestamp: nothing new to say
    index.maybe_append(900, 107)  # older: ignored
    index.maybe_append(1500, 110)
    assert index.entries == 2
    assert index.lookup(999) == TimestampOffset(-1, BASE)
    assert index.lookup(1000) == TimestampOffset(1000, 104)
    assert index.lookup(1499) == TimestampOffset(1000, 104)
    assert index.lookup(10**12) == TimestampOffset(1500, 110)
    with pytest.raises(ValueError, match="no larger than the last offset"):
        index.maybe_append(2000, 109)


def test_time_index_keeps_a_slot_for_the_final_entry(tmp_path: Path) -> None:
    index = time_index(tmp_path, max_size=36)
    index.maybe_append(1, 101)
    index.maybe_append(2, 102)
    assert index.is_full  # 3 slots, one reserved
    with pytest.raises(ValueError, match="full time index"):
        index.maybe_append(3, 103)
    index.maybe_append(3, 103, skip_full_check=True)
    assert index.entries == 3


def test_time_index_truncate_and_reopen(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    for ts, offset in [(10, 101), (20, 105), (30, 109)]:
        index.maybe_append(ts, offset)
    index.truncate_to(105)
    assert (index.entries, index.last_entry) == (1, TimestampOffset(10, 101))
    index.maybe_append(25, 106)
    index.close()
    reopened = time_index(tmp_path)
    assert reopened.entries == 2
    assert reopened.last_entry == TimestampOffset(25, 106)
    reopened.sanity_check(next_offset=107)


def write_offset_entries(path: Path, entries: list[tuple[int, int]]) -> None:
    path.write_bytes(b"".join(struct.pack(">ii", rel, pos) for rel, pos in entries))


@pytest.mark.parametrize(
    ("entries", "log_size", "message"),
    [
        ([(5, 400), (3, 900)], 2000, "offsets that do not increase"),
        ([(5, 400), (9, 300)], 2000, "positions that do not increase"),
        ([(5, 400), (9, 900)], 900, "points at position 900 but the log has 900 bytes"),
        ([(-4, 400)], 2000, "offsets that do not increase"),
    ],
)
def test_offset_index_sanity_check_rejects(tmp_path: Path, entries: list[tuple[int, int]], log_size: int,
                                           message: str) -> None:
    path = tmp_path / "00000000000000000100.index"
    write_offset_entries(path, entries)
    with pytest.raises(CorruptIndexError, match=message):
        OffsetIndex(path, BASE, 80).sanity_check(log_size)


def test_offset_index_sanity_check_rejects_a_length_that_is_not_whole_entries(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(struct.pack(">ii", 5, 400) + b"\x01\x02\x03")
    index = OffsetIndex(path, BASE, 80)
    with pytest.raises(CorruptIndexError, match="not a multiple of 8"):
        index.sanity_check(10_000)


@pytest.mark.parametrize(
    ("entries", "next_offset", "message"),
    [
        ([(10, 5), (10, 9)], 200, "timestamps that do not increase"),
        ([(10, 5), (20, 3)], 200, "offsets that decrease"),
        ([(10, 5), (20, 9)], 109, "segment ends at offset 109"),
    ],
)
def test_time_index_sanity_check_rejects(tmp_path: Path, entries: list[tuple[int, int]], next_offset: int,
                                         message: str) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    path.write_bytes(b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries))
    with pytest.raises(CorruptIndexError, match=message):
        TimeIndex(path, BASE, 120).sanity_check(next_offset)


@pytest.mark.parametrize("entries", [0, 1, 8191, 8192, 8193, 20_000])
def test_reopen_of_a_large_preallocated_index_counts_entries_across_chunks(tmp_path: Path, entries: int) -> None:
    # 1 MiB of 8-byte slots: the zero tail is found chunk by chunk (64 KiB = 8192 entries per chunk).
    index = offset_index(tmp_path, max_size=1 << 20)
    for i in range(entries):
        index.append(BASE + 1 + i, 4 * (i + 1))
    index.close_handler()
    reopened = offset_index(tmp_path, max_size=1 << 20)
    assert reopened.entries == entries
    if entries:
        assert reopened.last_entry == OffsetPosition(BASE + entries, 4 * entries)


# ---------------------------------------------------------------------- the file behind the mapping


def test_an_index_holds_no_file_descriptor_while_mapped(tmp_path: Path) -> None:
    """Kafka closes the index's file right after mapping it: 10,000 replicas' indexes must not cost 20,000 fds."""
    index = offset_index(tmp_path)
    index.append(BASE + 3, 40)
    assert index.is_mapped and open_files_under(tmp_path) == []
    index.truncate_to(BASE)
    index.resize(8 * 20)  # a remap (roll, truncation) opens the file only for the change
    index.append(BASE + 5, 60)
    index.flush()
    index.trim_to_valid_size()
    reopened = time_index(tmp_path)
    reopened.maybe_append(7, BASE + 5)
    assert (index.is_mapped, reopened.is_mapped, open_files_under(tmp_path)) == (True, True, [])
    assert OffsetIndex(index.path, BASE, 0).lookup(BASE + 5) == OffsetPosition(BASE + 5, 60)


def test_flush_writes_the_mapping_back_with_msync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no descriptor to fsync, the mapping itself is flushed (Kafka's mmap.force); an unmapped index has
    nothing to flush."""
    flushed: list[int] = []
    real_flush = index_module.MappedFile.flush

    def spy(mapping: index_module.MappedFile) -> None:
        flushed.append(len(mapping))
        real_flush(mapping)

    monkeypatch.setattr(index_module.MappedFile, "flush", spy)
    index = offset_index(tmp_path)
    index.append(BASE + 3, 40)
    index.flush()
    index.trim_to_valid_size()
    index.flush()
    index.close_handler()
    index.flush()
    assert flushed == [80, 8]


def test_resize_remaps_the_file_keeping_the_entries_that_fit(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(1, 5):
        index.append(BASE + i, 10 * i)
    index.resize(8 * 3 + 7)  # rounded down to three entries: the fourth is dropped
    assert (index.path.stat().st_size, index.entries, index.last_entry) == (24, 3, OffsetPosition(BASE + 3, 30))
    index.resize(8 * 10)
    index.append(BASE + 9, 90)
    assert [index.entry(i) for i in range(index.entries)] == [
        OffsetPosition(BASE + 1, 10), OffsetPosition(BASE + 2, 20), OffsetPosition(BASE + 3, 30),
        OffsetPosition(BASE + 9, 90)]

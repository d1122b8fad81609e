"""LogLoader: opening a log after a clean or unclean stop: what is re-validated, cut, rebuilt, deleted and reported."""

from __future__ import annotations

import itertools
import logging
import os
import struct
from pathlib import Path

import pytest
from log_helpers import RecordingEpochCache, make_batch, read_all, values

from broker.config.log_config import LogConfig
from broker.log.log import Log
from broker.log.log_loader import RecoveryAction, RecoveryActionKind
from common.record import iter_headers

BATCH = len(make_batch(records=2, value_size=40))
# Three batches (6 offsets) per segment; an index entry for every batch after the first.
CONFIG = LogConfig(segment_bytes=3 * BATCH, index_interval_bytes=BATCH - 1, max_index_size=120)


def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "events-0"


def open_log(tmp_path: Path, **kwargs: object) -> Log:
    return Log.open(log_dir(tmp_path), CONFIG, time=lambda: 1_000, **kwargs)  # type: ignore[arg-type]


def write_log(tmp_path: Path, batches: int, *, close: bool = True, epochs: tuple[int, ...] = (0,)) -> Log:
    log = open_log(tmp_path)
    for i in range(batches):
        batch = make_batch(records=2, value_size=40, timestamp=1000 * (i + 1), tag=i)
        log.append_as_leader(batch, epochs[min(i, len(epochs) - 1)])
    if close:
        log.close()
    return log


def expected_values(batches: int) -> list[bytes | None]:
    return [f"{i}:{j}:".encode().ljust(40, b"x") for i in range(batches) for j in range(2)]


def segment_file(tmp_path: Path, base: int, suffix: str = ".log") -> Path:
    return log_dir(tmp_path) / f"{base:020d}{suffix}"


def flip_byte(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ 0x40]))


def kinds(log: Log) -> list[RecoveryActionKind]:
    return [action.kind for action in log.recovery_report]


# ---------------------------------------------------------------------- log data


def test_flipped_byte_in_the_middle_batch_of_the_last_segment(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_log(tmp_path, 8, close=False)  # segments 0, 6, 12 (the last with 2 batches)
    last = segment_file(tmp_path, 12)
    assert last.stat().st_size == 2 * BATCH
    flip_byte(last, BATCH + 70)  # inside the records of batch 14..15, covered by its CRC
    with caplog.at_level(logging.WARNING, logger="broker.log.log_loader"):
        log = open_log(tmp_path, recovery_point=12)
    assert log.recovery_report == [
        RecoveryAction(RecoveryActionKind.TRUNCATED_SEGMENT, last, BATCH, BATCH, log.recovery_report[0].reason),
    ]
    assert "CRC" in log.recovery_report[0].reason
    assert (log.log_end_offset, log.recovery_point) == (14, 14)
    assert values(read_all(log)) == expected_values(7)
    assert last.stat().st_size == BATCH
    warning = next(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert f"Found invalid messages in log segment {last} at byte offset {BATCH}" in warning
    assert f"Truncated {BATCH} invalid bytes" in warning
    assert "[Log partition=events-0" in warning


def test_file_cut_in_the_middle_of_a_batch(tmp_path: Path) -> None:
    write_log(tmp_path, 8, close=False)
    last = segment_file(tmp_path, 12)
    os.truncate(last, BATCH + 70)  # header whole, records torn
    log = open_log(tmp_path)
    (action,) = log.recovery_report
    assert (action.kind, action.file, action.position, action.bytes) == (
        RecoveryActionKind.TRUNCATED_SEGMENT, last, BATCH, 70)
    assert f"declares {BATCH} bytes but only 70 follow" in action.reason
    assert log.log_end_offset == 14
    log.append_as_leader(make_batch(records=2, value_size=40, tag=7), 0)
    assert values(read_all(log)) == expected_values(8)


def test_corruption_in_an_earlier_segment_deletes_every_later_one(tmp_path: Path) -> None:
    write_log(tmp_path, 8, close=False)
    flip_byte(segment_file(tmp_path, 6), 2 * BATCH + 61)  # last batch of segment 6
    log = open_log(tmp_path, recovery_point=6)
    assert [(a.kind, a.file, a.position, a.bytes) for a in log.recovery_report] == [
        (RecoveryActionKind.TRUNCATED_SEGMENT, segment_file(tmp_path, 6), 2 * BATCH, BATCH),
        (RecoveryActionKind.DELETED_SEGMENT, segment_file(tmp_path, 12), 0, 2 * BATCH),
    ]
    assert [s.base_offset for s in log.segments] == [0, 6]
    assert not segment_file(tmp_path, 12).exists()
    assert not segment_file(tmp_path, 12, ".index").exists()
    assert log.log_end_offset == 10
    assert values(read_all(log)) == expected_values(5)


def test_segments_before_the_recovery_point_are_trusted(tmp_path: Path) -> None:
    write_log(tmp_path, 8, close=False)
    flip_byte(segment_file(tmp_path, 0), 70)
    log = open_log(tmp_path, recovery_point=6)
    assert log.recovery_report == []  # as Kafka: flushed segments are not re-read
    assert log.log_end_offset == 16


def test_every_segment_is_revalidated_from_recovery_point_zero(tmp_path: Path) -> None:
    write_log(tmp_path, 8, close=False)
    flip_byte(segment_file(tmp_path, 0), 70)
    log = open_log(tmp_path)
    assert kinds(log) == [RecoveryActionKind.TRUNCATED_SEGMENT] + [RecoveryActionKind.DELETED_SEGMENT] * 2
    assert (log.log_end_offset, log.num_segments) == (0, 1)


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_loading_maps_only_the_active_segments_indexes(tmp_path: Path, clean_shutdown: bool) -> None:
    """Kafka's LazyIndex: a trusted segment's indexes are checked without staying mapped, so a broker's
    thousands of inactive segments cost no mapping until a fetch reads one."""
    write_log(tmp_path, 8)
    log = open_log(tmp_path, clean_shutdown=clean_shutdown, recovery_point=12)
    loaded = [(s.base_offset, s.lazy_offset_index.is_loaded, s.lazy_time_index.is_loaded) for s in log.segments]
    assert loaded == [(0, False, False), (6, False, False), (12, True, True)]
    assert (log.recovery_report, values(read_all(log))) == ([], expected_values(8))
    assert log.segments[0].lazy_offset_index.is_loaded


def test_clean_shutdown_skips_validation(tmp_path: Path) -> None:
    write_log(tmp_path, 8)
    flip_byte(segment_file(tmp_path, 12), 70)
    log = open_log(tmp_path, clean_shutdown=True)
    assert (log.recovery_report, log.log_end_offset) == ([], 16)


def test_unclean_stop_with_preallocated_indexes_recovers_everything(tmp_path: Path) -> None:
    write_log(tmp_path, 8, close=False)
    assert segment_file(tmp_path, 12, ".index").stat().st_size == 120  # still preallocated
    log = open_log(tmp_path, recovery_point=6)
    assert log.recovery_report == []
    assert (log.log_end_offset, log.recovery_point) == (16, 16)
    assert values(read_all(log)) == expected_values(8)
    for offset in range(16):  # every offset found through the rebuilt indexes
        first = next(iter_headers(log.read(offset, 1).records.read()))[1]
        assert first.base_offset <= offset <= first.last_offset


def test_preallocated_log_file_tail_is_cut_after_an_unclean_stop(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=4096, preallocate=True)
    log = Log.open(log_dir(tmp_path), config)
    log.append_as_leader(make_batch(), 0)
    assert segment_file(tmp_path, 0).stat().st_size == 4096
    reopened = Log.open(log_dir(tmp_path), config)
    (action,) = reopened.recovery_report
    assert (action.kind, action.position, action.bytes) == (
        RecoveryActionKind.TRUNCATED_SEGMENT, len(make_batch()), 4096 - len(make_batch()))
    assert reopened.log_end_offset == 3


def test_leader_epochs_are_reassigned_from_recovered_batches(tmp_path: Path) -> None:
    write_log(tmp_path, 8, close=False, epochs=(0, 0, 0, 0, 2, 2, 5, 5))
    cache = RecordingEpochCache(entries=[(0, 0), (2, 8)])
    flip_byte(segment_file(tmp_path, 12), BATCH + 70)
    log = open_log(tmp_path, recovery_point=6, leader_epoch_cache=cache)
    # Epoch 2 is already known; only the newer epoch 5 is assigned, then the end cut off.
    assert [c for c in cache.calls if c[0] == "assign"] == [("assign", 5, 12)]
    assert ("truncate_from_end", 14) in cache.calls
    assert cache.entries == [(0, 0), (2, 8), (5, 12)]
    assert log.log_end_offset == 14


# ---------------------------------------------------------------------- indexes


def rebuilt_files(log: Log) -> list[Path]:
    return [a.file for a in log.recovery_report if a.kind is RecoveryActionKind.REBUILT_INDEX]


def offset_entries(path: Path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]


def damage_index(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "garbage":
        path.write_bytes(bytes((i * 37 + 11) % 256 for i in range(len(data))))
    elif how == "zero-filled":
        path.write_bytes(b"\0" * 120)
    elif how == "shifted positions":
        path.write_bytes(b"".join(struct.pack(">ii", rel, pos + 4) for rel, pos in offset_entries(path)))
    elif how == "shifted entries":
        entries = offset_entries(path)
        shifted = [(rel, pos) for (rel, _), (_, pos) in itertools.pairwise(entries)]
        path.write_bytes(b"".join(struct.pack(">ii", rel, pos) for rel, pos in shifted))
    elif how == "past the end":
        path.write_bytes(data + struct.pack(">ii", 100, 10**6))
    elif how == "torn entry":
        path.write_bytes(data[:-3])
    elif how == "missing":
        path.unlink()


@pytest.mark.parametrize(
    "how", ["garbage", "zero-filled", "shifted positions", "shifted entries", "past the end", "torn entry", "missing"])
def test_damaged_offset_index_is_rebuilt_from_its_log(tmp_path: Path, how: str) -> None:
    write_log(tmp_path, 8)
    index = segment_file(tmp_path, 6, ".index")
    original = index.read_bytes()
    assert len(offset_entries(index)) == 2
    damage_index(index, how)
    log = open_log(tmp_path, clean_shutdown=True)
    assert rebuilt_files(log) == [index, segment_file(tmp_path, 6, ".timeindex")]
    assert log.recovery_report[0].reason
    assert index.read_bytes() == original
    assert values(read_all(log)) == expected_values(8)
    for offset in range(16):
        assert next(iter_headers(log.read(offset, 1).records.read()))[1].last_offset >= offset


def test_damaged_time_index_is_rebuilt(tmp_path: Path) -> None:
    write_log(tmp_path, 8)
    time_index = segment_file(tmp_path, 0, ".timeindex")
    original = time_index.read_bytes()
    entries = [struct.unpack_from(">qi", original, i) for i in range(0, len(original), 12)]
    time_index.write_bytes(b"".join(struct.pack(">qi", ts, rel) for ts, rel in reversed(entries)))
    log = open_log(tmp_path, recovery_point=16)
    assert rebuilt_files(log) == [segment_file(tmp_path, 0, ".index"), time_index]
    assert "timestamps that do not increase" in log.recovery_report[0].reason
    assert time_index.read_bytes() == original


def test_leftover_deleted_and_cleaned_files_and_orphan_indexes_are_removed(tmp_path: Path) -> None:
    write_log(tmp_path, 4)
    directory = log_dir(tmp_path)
    leftovers = [directory / "00000000000000000000.log.deleted", directory / "00000000000000000003.index.cleaned",
                 directory / "00000000000000000099.index", directory / "00000000000000000099.timeindex"]
    for path in leftovers:
        path.write_bytes(b"junk")
    log = open_log(tmp_path, clean_shutdown=True)
    assert sorted(a.file for a in log.recovery_report) == sorted(leftovers)
    assert set(kinds(log)) == {RecoveryActionKind.DELETED_FILE}
    assert not any(path.exists() for path in leftovers)
    assert log.log_end_offset == 8


# ---------------------------------------------------------------------- log start offset


def test_log_start_offset_is_at_least_the_first_segment_base(tmp_path: Path) -> None:
    log = write_log(tmp_path, 8, close=False)
    log.maybe_increment_log_start_offset(7)
    log.close()
    assert open_log(tmp_path, clean_shutdown=True).log_start_offset == 6
    assert open_log(tmp_path, clean_shutdown=True, log_start_offset=9).log_start_offset == 9


def test_log_start_offset_past_the_end_empties_the_log(tmp_path: Path) -> None:
    write_log(tmp_path, 4)
    log = open_log(tmp_path, clean_shutdown=True, log_start_offset=50)
    assert kinds(log) == [RecoveryActionKind.DELETED_SEGMENT] * 2
    assert (log.log_start_offset, log.log_end_offset, [s.base_offset for s in log.segments]) == (50, 50, [50])


def test_empty_directory_starts_at_the_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, log_start_offset=40)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (40, 40, 40)
    assert segment_file(tmp_path, 40).exists()


# ---------------------------------------------------------------------- holes between segments


class _Killed(Exception):
    """Stands for SIGKILL: the process stops between two file operations."""


def test_a_kill_during_multi_segment_truncation_leaves_no_hole(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from broker.log.segment import LogSegment

    log = write_log(tmp_path, 8, close=False)  # segments 0, 6, 12
    real_delete = LogSegment.delete
    deleted: list[int] = []

    def delete_then_die(segment: LogSegment) -> None:
        if deleted:
            raise _Killed
        deleted.append(segment.base_offset)
        real_delete(segment)

    monkeypatch.setattr(LogSegment, "delete", delete_then_die)
    with pytest.raises(_Killed):
        log.truncate_to(2)
    monkeypatch.undo()
    reopened = open_log(tmp_path)
    offsets = [r.offset for b in read_all(reopened) for r in b.records]
    assert offsets == list(range(reopened.log_end_offset)), "a hole in the log"


def test_loading_cuts_the_log_at_the_first_gap_between_segments(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    write_log(tmp_path, 8)  # segments 0, 6, 12
    for suffix in (".log", ".index", ".timeindex"):
        segment_file(tmp_path, 6, suffix).unlink()
    with caplog.at_level(logging.WARNING, logger="broker.log.log_loader"):
        log = open_log(tmp_path, recovery_point=16, clean_shutdown=True)
    assert [(a.kind, a.file, a.bytes) for a in log.recovery_report] == [
        (RecoveryActionKind.DELETED_SEGMENT, segment_file(tmp_path, 12), 2 * BATCH)]
    assert "starts at offset 12 but the segment before it ends at offset 6" in log.recovery_report[0].reason
    assert ([s.base_offset for s in log.segments], log.log_end_offset) == ([0], 6)
    assert values(read_all(log)) == expected_values(3)
    assert "starts at offset 12 but the segment before it ends at offset 6" in caplog.text

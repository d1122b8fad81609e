"""`minibroker dump-log`: Kafka's DumpLogSegments lines, damage reported with positions, never a traceback."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.log.log import AppendOrigin, Log
from common.record import ControlRecordType, ProducerRecord, build_batch, build_end_txn_marker
from minibroker.cli import main


def make_log(tmp_path: Path, batches: int = 3) -> Log:
    log = Log.open(tmp_path / "t-0", LogConfig(index_interval_bytes=1))
    for i in range(batches):
        log.append_as_leader(build_batch([ProducerRecord(b"v%d" % i, b"k")] * 2, now_ms=1000 + i), leader_epoch=4)
    return log


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(["dump-log", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_dump_log_prints_kafka_batch_lines_and_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = make_log(tmp_path)
    path = log.segments[0].path
    log.close()
    lines = run(capsys, "--files", str(path), "--print-data-log")
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1")
    assert "partitionLeaderEpoch: 4 isTransactional: false isControl: false position: 0 CreateTime: 1000" in lines[2]
    assert lines[2].endswith("isvalid: true")
    assert "magic: 2 compresscodec: NONE crc: " in lines[2]
    assert lines[3] == ("| offset: 0 CreateTime: 1000 keysize: 1 valuesize: 2 sequence: -1 headerKeys: []"
                        " key: k payload: v0")
    assert sum(line.startswith("baseOffset:") for line in lines) == 3


def test_markers_and_the_txnindex_are_printed_as_kafka_prints_them(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig())
    log.append_as_leader(build_batch([ProducerRecord(b"v", b"k")], producer_id=7, producer_epoch=0, base_sequence=0,
                                     is_transactional=True, now_ms=1000), 0)
    log.append_as_leader(build_end_txn_marker(7, 0, ControlRecordType.ABORT, 3, 1001), 0,
                         origin=AppendOrigin.COORDINATOR)
    segment = log.segments[0]
    log.close()
    lines = run(capsys, "--files", str(segment.path), "--print-data-log")
    assert "isTransactional: true isControl: true" in lines[4]
    assert lines[5] == ("| offset: 1 CreateTime: 1001 keysize: 4 valuesize: 6 sequence: -1 headerKeys: []"
                        " endTxnMarker: ABORT coordinatorEpoch: 3")
    lines = run(capsys, "--files", str(segment.txn_index.path))
    assert lines == [f"Dumping {segment.txn_index.path}",
                     "version: 0 producerId: 7 firstOffset: 0 lastOffset: 1 lastStableOffset: 2"]


def test_flipped_byte_and_torn_tail_are_reported_with_positions(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    log = make_log(tmp_path)
    path = log.segments[0].path
    log.close()
    data = bytearray(path.read_bytes())
    batch_size = struct.unpack_from(">i", data, 8)[0] + 12
    data[batch_size + 70] ^= 0x01  # inside the second batch's records
    path.write_bytes(bytes(data[:-5]))  # and tear the last batch
    lines = run(capsys, "--files", str(path))
    assert f"position: {batch_size} " in lines[3] and lines[3].endswith("isvalid: false")
    assert lines[4] == (f"Found corrupt data in {path.name}: batch at position {2 * batch_size} declares"
                        f" {batch_size} bytes but only {batch_size - 5} remain")
    assert lines[5] == f"Found {batch_size - 5} invalid bytes at the end of {path.name}"


def test_index_entries_and_mismatch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = make_log(tmp_path)
    segment = log.segments[0]
    index_path = segment.offset_index.path
    log.close()
    lines = run(capsys, "--files", str(index_path))
    size = segment.size // 3
    # As Kafka: an entry once more than index.interval.bytes were appended since the last, so none at position 0.
    assert [line for line in lines if line.startswith("offset:")] == [
        f"offset: 3 position: {size}", f"offset: 5 position: {2 * size}"]
    assert not any("Mismatches" in line for line in lines)
    data = bytearray(index_path.read_bytes())
    struct.pack_into(">i", data, 0, 2)  # the first entry names offset 2 instead of 3
    index_path.write_bytes(bytes(data))
    lines = run(capsys, "--files", str(index_path))
    assert f"Mismatches in :{index_path}" in lines
    assert "  Index offset: 2, log offset: 3" in lines


def test_index_sanity_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = make_log(tmp_path)
    index_path = log.segments[0].offset_index.path
    time_index_path = log.segments[0].time_index.path
    log.close()
    assert run(capsys, "--files", f"{index_path},{time_index_path}", "--index-sanity-check") == [
        f"Dumping {index_path}", f"{index_path} passed sanity check.",
        f"Dumping {time_index_path}", f"{time_index_path} passed sanity check.",
    ]
    index_path.write_bytes(struct.pack(">ii", 5, 0) + struct.pack(">ii", 3, 9999))
    # A failed check is a failure of the command (Kafka's tool dies of the CorruptIndexException).
    out, err = run_failing(capsys, "--files", str(index_path), "--index-sanity-check")
    assert out == [f"Dumping {index_path}"]
    assert err[0].startswith(f"Error: {index_path} failed sanity check: Corrupt index found")


def run_failing(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[list[str], list[str]]:
    assert main(["dump-log", *argv]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return captured.out.splitlines(), captured.err.splitlines()


def test_missing_and_unknown_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hi")
    missing = tmp_path / "00000000000000000000.log"
    out, err = run_failing(capsys, "--files", f"{missing},{other}")
    assert err == [f"Error: {missing} (No such file or directory)"]
    assert out == [f"Dumping {missing}", f"Dumping {other}", f"Ignoring unknown file {other}"]


@pytest.mark.parametrize("suffix", [".log", ".index", ".timeindex"])
def test_file_not_named_by_a_base_offset_is_a_precise_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            suffix: str) -> None:
    log = make_log(tmp_path)
    segment_path = log.segments[0].path
    log.close()
    copy = tmp_path / f"seg{suffix}"
    copy.write_bytes(segment_path.with_suffix(suffix).read_bytes())
    _, err = run_failing(capsys, "--files", str(copy))
    assert err == [f"Error: {copy}: not a segment file name: the name before the suffix must be the segment's"
                   f" base offset (as in 00000000000000000000{suffix}), not 'seg'"]


def file_states(directory: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_size, p.read_bytes()) for p in sorted(directory.iterdir()) if p.is_file()}


def test_dump_never_writes_the_files_of_an_open_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An open log's active indexes are preallocated and mapped: a dump must leave them, and the log, as they are."""
    log = make_log(tmp_path)
    segment = log.segments[0]
    assert segment.offset_index.path.stat().st_size == LogConfig().max_index_size  # preallocated, not trimmed
    before = file_states(log.dir)
    files = ",".join(str(log.dir / name) for name in before if name.endswith((".log", ".index", ".timeindex")))
    run(capsys, "--files", files, "--print-data-log")
    run(capsys, "--files", files, "--index-sanity-check")
    assert file_states(log.dir) == before
    # The log's own mapping still covers its file: appends through it keep working.
    for i in range(3, 200):
        log.append_as_leader(build_batch([ProducerRecord(b"v%d" % i, b"k")], now_ms=1000 + i), leader_epoch=4)
    assert segment.offset_index.entries > 2
    log.close()
    run(capsys, "--files", str(segment.offset_index.path), "--index-sanity-check")


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_index_of_a_partial_entry_is_neither_padded_nor_passed(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               suffix: str) -> None:
    log = make_log(tmp_path)
    index_path = log.segments[0].path.with_suffix(suffix)
    log.close()
    index_path.write_bytes(b"\0\0\0\x02\0")
    run(capsys, "--files", str(index_path))
    _, err = run_failing(capsys, "--files", str(index_path), "--index-sanity-check")
    assert "is corrupt, found 5 bytes which is not a multiple of" in err[0]
    assert index_path.read_bytes() == b"\0\0\0\x02\0"


def test_index_left_with_a_partial_entry_is_rebuilt_on_a_clean_load(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """5 bytes that zero-padding would turn into a plausible entry (offset 1 at position 0): rebuilt, not trusted."""
    log = make_log(tmp_path)
    index_path = log.segments[0].offset_index.path
    log.close()
    original = index_path.read_bytes()
    index_path.write_bytes(b"\0\0\0\x01\0")
    run(capsys, "--files", str(index_path))  # a look at it with the dump tool changes nothing
    reopened = Log.open(log.dir, LogConfig(index_interval_bytes=1), clean_shutdown=True)
    assert [action.file.name for action in reopened.recovery_report] == [
        index_path.name, index_path.with_suffix(".timeindex").name]
    assert "found 5 bytes which is not a multiple of 8" in reopened.recovery_report[0].reason
    reopened.close()
    assert index_path.read_bytes() == original

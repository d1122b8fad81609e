"""`minibroker dump-log`: Kafka's DumpLogSegments lines, damage reported with positions, never a traceback."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from broker.log.config import LogConfig
from broker.log.log import Log
from common.record import ProducerRecord, build_batch
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
    lines = run(capsys, "--files", str(index_path), "--index-sanity-check")
    assert lines[1].startswith(f"{index_path} failed sanity check: Corrupt index found")


def test_missing_and_unknown_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hi")
    lines = run(capsys, "--files", f"{tmp_path / '00000000000000000000.log'},{other}")
    assert lines[1].endswith("no such file")
    assert lines[3] == f"Ignoring unknown file {other}"

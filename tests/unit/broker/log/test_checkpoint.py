"""Checkpoint files: Kafka's text layout, atomic replacement, precise errors for damaged files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from broker.log import checkpoint as cp
from broker.log import files
from broker.log.checkpoint import (
    CorruptCheckpointError,
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    atomic_write,
)
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition


def test_offset_checkpoint_exact_text_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / files.REPLICATION_OFFSET_CHECKPOINT
    offsets = {TopicPartition("orders", 1): 987, TopicPartition("orders", 0): 1234, TopicPartition("a-b", 10): 0}
    OffsetCheckpointFile(path).write(offsets)
    assert path.read_text() == "0\n3\na-b 10 0\norders 0 1234\norders 1 987\n"
    assert OffsetCheckpointFile(path).read() == offsets


def test_leader_epoch_checkpoint_exact_text_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / files.LEADER_EPOCH_CHECKPOINT
    entries = [EpochEntry(0, 0), EpochEntry(3, 120), EpochEntry(7, 4000)]
    LeaderEpochCheckpointFile(path).write(entries)
    assert path.read_text() == "0\n3\n0 0\n3 120\n7 4000\n"
    assert LeaderEpochCheckpointFile(path).read() == entries


def test_empty_checkpoint_round_trip(tmp_path: Path) -> None:
    path = tmp_path / files.LOG_START_OFFSET_CHECKPOINT
    OffsetCheckpointFile(path).write({})
    assert path.read_text() == "0\n0\n"
    assert OffsetCheckpointFile(path).read() == {}


def test_missing_or_empty_file_reads_as_empty(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "absent").read() == {}
    (tmp_path / "empty").write_bytes(b"")  # Kafka creates checkpoint files empty
    assert LeaderEpochCheckpointFile(tmp_path / "empty").read() == []


def test_reads_kafka_written_whitespace_and_no_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_text("0\n2\norders  0\t5\norders 1 6")
    assert OffsetCheckpointFile(path).read() == {TopicPartition("orders", 0): 5, TopicPartition("orders", 1): 6}


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("1\n0\n", "line 1: unrecognized version 1, expected 0"),
        ("x\n0\n", "line 1: version 'x' is not an integer"),
        ("0\n", "line 2: missing entry count"),
        ("0\ntwo\n", "line 2: entry count 'two' is not an integer"),
        ("0\n-1\n", "line 2: negative entry count -1"),
        ("0\n2\nt 0 1\n", "expected 2 entries, found 1"),
        ("0\n1\nt 0 1\nt 1 2\n", "expected 1 entries, found 2"),
        ("0\n2\nt 0 1\nt 1\n", "line 4: malformed entry 't 1': expected 3 fields (topic partition offset), found 2"),
        ("0\n1\nt p 1\n", "line 3: malformed entry 't p 1': partition 'p' is not an integer"),
        ("0\n1\nt 0 1_0\n", "line 3: malformed entry 't 0 1_0': offset '1_0' is not an integer"),
        ("0\n1\nt 2147483648 0\n", "line 3: malformed entry 't 2147483648 0': partition 2147483648 is out of range"),
        ("0\n1\nt 0 1\n\n", "line 4: malformed entry ''"),
    ],
)
def test_malformed_offset_checkpoint_names_file_and_line(tmp_path: Path, text: str, detail: str) -> None:
    path = tmp_path / files.RECOVERY_POINT_OFFSET_CHECKPOINT
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError) as info:
        OffsetCheckpointFile(path).read()
    assert f"Malformed checkpoint file {path}: {detail}" in str(info.value)
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert isinstance(info.value, KafkaError)


def test_malformed_epoch_line(tmp_path: Path) -> None:
    path = tmp_path / files.LEADER_EPOCH_CHECKPOINT
    path.write_text("0\n2\n0 0\n1 2 3\n")
    with pytest.raises(CorruptCheckpointError, match=r"line 4: malformed entry '1 2 3': expected 2 fields"):
        LeaderEpochCheckpointFile(path).read()


def test_non_utf8_file_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\n1\n\xff 0 1\n")
    with pytest.raises(CorruptCheckpointError, match="not UTF-8"):
        OffsetCheckpointFile(path).read()


def test_leftover_tmp_is_ignored_and_overwritten(tmp_path: Path) -> None:
    path = tmp_path / files.REPLICATION_OFFSET_CHECKPOINT
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({TopicPartition("t", 0): 5})
    Path(f"{path}.tmp").write_text("garbage from a crashed write")
    assert checkpoint.read() == {TopicPartition("t", 0): 5}
    checkpoint.write({TopicPartition("t", 0): 6})
    assert checkpoint.read() == {TopicPartition("t", 0): 6}
    assert not Path(f"{path}.tmp").exists()


def test_crash_before_rename_leaves_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / files.REPLICATION_OFFSET_CHECKPOINT
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({TopicPartition("t", 0): 5})

    def crash(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cp.os, "replace", crash)
    with pytest.raises(KafkaError) as info:
        checkpoint.write({TopicPartition("t", 0): 6})
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert str(path) in str(info.value)
    monkeypatch.undo()
    assert checkpoint.read() == {TopicPartition("t", 0): 5}
    assert not Path(f"{path}.tmp").exists()


def test_atomic_write_fsyncs_file_then_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        events.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(cp.os, "fsync", fsync)
    monkeypatch.setattr(cp.os, "replace", replace)
    atomic_write(tmp_path / "meta.properties", b"broker.id=1\n")
    assert events == ["fsync-file", "rename", "fsync-dir"]
    assert (tmp_path / "meta.properties").read_bytes() == b"broker.id=1\n"

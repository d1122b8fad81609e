"""LogManager: dir ownership, loading, clean-shutdown marker, checkpoints, deletion."""

from __future__ import annotations

import errno
import os
import re
import threading
import time
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.log.checkpoint import OffsetCheckpointFile
from broker.log.files import (
    CLEAN_SHUTDOWN_FILE,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    delete_dir_name,
)
from broker.log.log_loader import LogLoader
from broker.log.manager import LogDirOwnedError, LogManager, read_meta_properties
from common.record import ProducerRecord, build_batch
from proto.types import TopicPartition
from tests.fakes import FakeClock

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("my-topic", 1)



def batch(n: int) -> bytes:
    return build_batch([ProducerRecord(b"x" * 50) for _ in range(n)], now_ms=1_000_000)


def manager(dirs: list[Path], clock: FakeClock | None = None, broker_id: int = 1) -> LogManager:
    return LogManager(dirs, LogConfig(segment_bytes=4096), broker_id=broker_id, time_ms=clock or FakeClock())


def test_meta_properties_written_and_other_broker_refused(tmp_path: Path) -> None:
    lm = manager([tmp_path / "d1"])
    lm.startup()
    assert read_meta_properties(tmp_path / "d1")["broker.id"] == "1"
    assert read_meta_properties(tmp_path / "d1")["version"] == "0"
    lm.shutdown()
    other = manager([tmp_path / "d1"], broker_id=2)
    with pytest.raises(LogDirOwnedError, match=r"belongs to broker\.id 1"):
        other.startup()


def test_logs_spread_over_dirs_and_reload_after_clean_shutdown(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    lm = manager(dirs)
    lm.startup()
    lm.get_or_create_log(TP0).append_as_leader(batch(10), leader_epoch=0)
    lm.get_or_create_log(TP1).append_as_leader(batch(3), leader_epoch=0)
    assert {lm.log_dir_of(TP0), lm.log_dir_of(TP1)} == {d.resolve() for d in dirs}
    lm.shutdown()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
    assert OffsetCheckpointFile(lm.log_dir_of(TP0) / RECOVERY_POINT_OFFSET_CHECKPOINT).read() == {TP0: 10}

    again = manager(dirs)
    again.startup()
    assert again.get_log(TP0).log_end_offset == 10  # type: ignore[union-attr]
    assert again.get_log(TP1).log_end_offset == 3  # type: ignore[union-attr]
    # The marker speaks for one stop only: a crash from now on must mean recovery.
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    assert again.get_log(TP0).recovery_report == []  # type: ignore[union-attr]


def test_unclean_restart_recovers_torn_tail(tmp_path: Path) -> None:
    lm = manager([tmp_path / "d"])
    lm.startup()
    log = lm.get_or_create_log(TP0)
    log.append_as_leader(batch(5), leader_epoch=0)
    log.append_as_leader(batch(5), leader_epoch=0)
    # No shutdown(): the process "died". Tear the last batch in half.
    log_file = log.active_segment.path
    size = log_file.stat().st_size
    with open(log_file, "r+b") as f:
        f.truncate(size - 20)
    again = manager([tmp_path / "d"])
    again.startup()
    recovered = again.get_log(TP0)
    assert recovered is not None
    assert recovered.log_end_offset == 5
    assert recovered.recovery_report, "recovery must say what it cut"


def test_high_watermark_checkpoint_per_dir(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    lm = manager(dirs)
    lm.startup()
    lm.get_or_create_log(TP0)
    lm.get_or_create_log(TP1)
    lm.write_high_watermarks([(TP0, 7), (TP1, 2), (TopicPartition("gone", 0), 5)])
    assert lm.read_high_watermarks() == {TP0: 7, TP1: 2}
    assert OffsetCheckpointFile(lm.log_dir_of(TP0) / REPLICATION_OFFSET_CHECKPOINT).read() == {TP0: 7}


def test_high_watermarks_unchanged_since_the_last_write_leave_the_file_alone(tmp_path: Path) -> None:
    """At 10,000 idle partitions the checkpoint was grouped by dir, formatted and fsynced every 5 s for the same
    bytes."""
    lm = manager([tmp_path / "d"])
    lm.startup()
    lm.get_or_create_log(TP0)
    lm.get_or_create_log(TP1)
    path = tmp_path / "d" / REPLICATION_OFFSET_CHECKPOINT
    lm.write_high_watermarks([(TP0, 7), (TP1, 2)])
    written = path.stat().st_ino  # each write renames a new file over the old one
    lm.write_high_watermarks([(TP0, 7), (TP1, 2)])
    assert path.stat().st_ino == written
    lm.write_high_watermarks([(TP0, 8), (TP1, 2)])
    assert path.stat().st_ino != written
    assert OffsetCheckpointFile(path).read() == {TP0: 8, TP1: 2}


def offset_checkpoints_written(log_dir: Path) -> tuple[int, int]:
    """The inodes of a dir's recovery point and log start offset checkpoints: each write renames a new file over
    the old one."""
    return ((log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT).stat().st_ino,
            (log_dir / LOG_START_OFFSET_CHECKPOINT).stat().st_ino)


def test_an_unchanged_logs_offset_checkpoints_are_not_rewritten(tmp_path: Path) -> None:
    """At 10,000 idle partitions a broker formatted and fsynced both files' 10,000 unchanged lines every minute."""
    lm = manager([tmp_path / "d"])
    lm.startup()
    lm.get_or_create_log(TP0).append_as_leader(batch(2), leader_epoch=0)
    lm.get_or_create_log(TP1)
    lm.checkpoint_log_offsets()
    written = offset_checkpoints_written(tmp_path / "d")
    lm.get_or_create_log(TP0).append_as_leader(batch(2), leader_epoch=0)  # the recovery point stays at 0
    lm.checkpoint_log_offsets()
    assert offset_checkpoints_written(tmp_path / "d") == written


def test_a_moved_recovery_point_or_log_start_offset_is_written_in_its_dir_alone(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    lm = manager(dirs)
    lm.startup()
    lm.get_or_create_log(TP0).append_as_leader(batch(10), leader_epoch=0)
    lm.get_or_create_log(TP1).append_as_leader(batch(3), leader_epoch=0)
    lm.checkpoint_log_offsets()
    dir0, dir1 = lm.log_dir_of(TP0), lm.log_dir_of(TP1)
    assert dir0 is not None and dir1 is not None and dir0 != dir1
    written0, written1 = offset_checkpoints_written(dir0), offset_checkpoints_written(dir1)
    lm.get_or_create_log(TP0).flush()
    lm.checkpoint_log_offsets()
    assert OffsetCheckpointFile(dir0 / RECOVERY_POINT_OFFSET_CHECKPOINT).read() == {TP0: 10}
    assert offset_checkpoints_written(dir0) != written0 and offset_checkpoints_written(dir1) == written1
    written0 = offset_checkpoints_written(dir0)
    lm.get_or_create_log(TP1).maybe_increment_log_start_offset(2)
    lm.checkpoint_log_offsets()
    assert OffsetCheckpointFile(dir1 / LOG_START_OFFSET_CHECKPOINT).read() == {TP1: 2}
    assert offset_checkpoints_written(dir0) == written0
    # A new log in a dir is a new line there.
    new = TopicPartition("new", 0)
    lm.get_or_create_log(new)
    lm.checkpoint_log_offsets()
    new_dir = lm.log_dir_of(new)
    assert new_dir is not None and new in OffsetCheckpointFile(new_dir / LOG_START_OFFSET_CHECKPOINT).read()


def test_a_failed_offset_checkpoint_write_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lm = manager([tmp_path / "d"])
    lm.startup()
    lm.get_or_create_log(TP0).append_as_leader(batch(4), leader_epoch=0)
    lm.checkpoint_log_offsets()
    lm.get_or_create_log(TP0).flush()
    real_write = OffsetCheckpointFile.write

    def no_space(self: OffsetCheckpointFile, offsets: dict[TopicPartition, int]) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(OffsetCheckpointFile, "write", no_space)
    lm.checkpoint_log_offsets()  # reported to the failure channel, the dir not yet taken out of service
    assert OffsetCheckpointFile(tmp_path / "d" / RECOVERY_POINT_OFFSET_CHECKPOINT).read() == {TP0: 0}
    monkeypatch.setattr(OffsetCheckpointFile, "write", real_write)
    lm.checkpoint_log_offsets()
    assert OffsetCheckpointFile(tmp_path / "d" / RECOVERY_POINT_OFFSET_CHECKPOINT).read() == {TP0: 4}


def test_delete_log_removes_dir_and_checkpoint_entries(tmp_path: Path) -> None:
    lm = manager([tmp_path / "d"])
    lm.startup()
    lm.get_or_create_log(TP0).append_as_leader(batch(2), leader_epoch=0)
    lm.get_or_create_log(TP1)
    lm.checkpoint_log_offsets()
    lm.delete_log(TP0)
    assert lm.get_log(TP0) is None
    assert not (tmp_path / "d" / str(TP0)).exists()
    assert TP0 not in OffsetCheckpointFile(tmp_path / "d" / LOG_START_OFFSET_CHECKPOINT).read()
    assert TP1 in OffsetCheckpointFile(tmp_path / "d" / LOG_START_OFFSET_CHECKPOINT).read()


@pytest.mark.parametrize("partition", [0, 12345])
def test_delete_log_of_a_topic_with_the_longest_name(tmp_path: Path, partition: int) -> None:
    """249 characters (Kafka's limit): `<topic>-<p>.<uuid>-delete` would pass 255 bytes, so the topic part is cut."""
    tp = TopicPartition("t" * 249, partition)
    lm = manager([tmp_path / "d"])
    lm.startup()
    lm.get_or_create_log(tp).append_as_leader(batch(2), leader_epoch=0)
    lm.delete_log(tp)
    assert lm.get_log(tp) is None
    assert [p for p in (tmp_path / "d").iterdir() if p.is_dir()] == []


def test_delete_dir_name_fits_a_file_name() -> None:
    name = delete_dir_name(TopicPartition("t" * 249, 12345))
    assert len(name.encode()) == 255
    assert re.fullmatch(r"t+-12345\.[0-9a-f]{32}-delete", name)
    assert re.fullmatch(r"orders-3\.[0-9a-f]{32}-delete", delete_dir_name(TopicPartition("orders", 3)))


def test_leftover_delete_dirs_and_strangers_are_handled(tmp_path: Path) -> None:
    d = tmp_path / "d"
    (d / "orders-0.0123abcd-delete").mkdir(parents=True)
    shortened = d / delete_dir_name(TopicPartition("t" * 249, 7))
    shortened.mkdir()
    (d / "not a partition").mkdir()
    lm = manager([d])
    lm.startup()
    assert not (d / "orders-0.0123abcd-delete").exists()
    assert not shortened.exists()
    assert lm.all_logs() == {}
    assert (d / META_PROPERTIES).exists()


def test_retention_through_manager_respects_high_watermark(tmp_path: Path) -> None:
    clock = FakeClock()
    lm = LogManager([tmp_path / "d"], LogConfig(segment_bytes=1024, retention_ms=1000), broker_id=1, time_ms=clock)
    lm.startup()
    log = lm.get_or_create_log(TP0)
    for _ in range(20):
        log.append_as_leader(batch(4), leader_epoch=0)
    assert log.num_segments > 3
    clock.now += 10_000_000
    assert lm.cleanup_logs(lambda tp: 0) == 0  # nothing below a HW of 0 may go
    deleted = lm.cleanup_logs()
    assert deleted > 0 and log.log_start_offset > 0


def test_a_rolled_segment_is_flushed_by_the_flush_log_task_not_by_the_appending_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's roll schedules "flush-log" (the producer snapshot, then the segments below the new one) on its
    scheduler: the produce that rolled never waits for an fsync (141 ms appends where the median was 1.15 ms)."""
    lm = manager([tmp_path / "d1"])
    lm.startup()
    log = lm.get_or_create_log(TP0)
    log.append_as_leader(batch(40), leader_epoch=0)
    fsyncs: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        fsyncs.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    log.append_as_leader(batch(40), leader_epoch=0)  # past segment.bytes (4096): rolls at offset 40
    assert [s.base_offset for s in log.segments] == [0, 40]
    assert threading.current_thread().name not in fsyncs, "the appending thread fsynced the rolled segment"
    deadline = time.monotonic() + 30
    while log.recovery_point < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log.recovery_point == 40
    assert fsyncs and all(name.startswith("flush-log") for name in fsyncs), fsyncs
    lm.shutdown()


def test_creating_a_new_log_fsyncs_nothing_and_counts_no_logs_with_one_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 1,000-partition topic makes 1,000 logs on each replica's broker at once: a new log holds nothing to make
    durable (its leader-epoch-checkpoint is created empty, as Kafka's CheckpointFile), and with one log dir there
    is no dir to choose by counting every log (Kafka's nextLogDirs)."""
    logs = manager([tmp_path / "d1"])
    for p in range(3):
        logs.get_or_create_log(TopicPartition("warm", p), is_new=True)
    fsyncs: list[int] = []
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd))

    class Uncountable(dict):  # type: ignore[type-arg]
        def values(self):  # type: ignore[no-untyped-def]
            raise AssertionError("counted every log to choose the only dir")

    monkeypatch.setattr(logs, "_logs", Uncountable(logs._logs))
    log = logs.get_or_create_log(TopicPartition("wide", 0), is_new=True)
    assert fsyncs == []
    assert (log.dir / LEADER_EPOCH_CHECKPOINT).exists()
    assert log.log_end_offset == 0


def test_a_new_replicas_log_is_created_without_listing_its_empty_dir(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Three scans of a directory just made (and a second mkdir) were a tenth of each new replica's cost when a
    10,000-partition topic was created."""
    lm = manager([tmp_path / "logs"])
    lm.startup()
    scanned: list[Path] = []
    real = LogLoader._remove_temp_and_orphan_files

    def scan(self: LogLoader, recovery: object) -> list[int]:
        scanned.append(self.dir)
        return real(self, recovery)  # type: ignore[arg-type]
    monkeypatch.setattr(LogLoader, "_remove_temp_and_orphan_files", scan)
    log = lm.get_or_create_log(TopicPartition("orders", 0), is_new=True)
    assert scanned == [] and log.log_end_offset == 0
    log.append_as_leader(batch(2), 0)
    assert log.log_end_offset == 2
    # A dir that was there already (an earlier life's) is loaded as ever: its leftovers cleaned up.
    leftover = tmp_path / "logs" / "orders-1"
    leftover.mkdir()
    (leftover / "00000000000000000000.log.deleted").write_bytes(b"x")
    lm.get_or_create_log(TopicPartition("orders", 1), is_new=True)
    assert scanned == [leftover] and not (leftover / "00000000000000000000.log.deleted").exists()
    lm.shutdown()

"""Log dir failure in the log layer: the LogDirFailureChannel, a Log whose writes meet ENOSPC, the index writing
each page through the file before writing through the mapping, and the LogManager taking a dir out of service
(halting on the last). A full disk is an OSError injected where the file system would raise it."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.log import checkpoint as checkpoint_module
from broker.log import index as index_module
from broker.log import manager as manager_module
from broker.log import segment as segment_module
from broker.log.checkpoint import OffsetCheckpointFile
from broker.log.files import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from broker.log.index import OffsetIndex
from broker.log.log import Log
from broker.log.log_dir_failure import LogDirFailedError, LogDirFailureChannel
from broker.log.manager import LogManager
from common.record import ProducerRecord, build_batch
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from tests.fakes import FakeClock

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)


def batch(n: int = 3) -> bytes:
    return build_batch([ProducerRecord(b"x" * 50) for _ in range(n)], now_ms=1_000_000)


def no_space(*_: object) -> int:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class Halted(Exception):
    """What the injected halt raises, so a test sees it was called (production halts the process)."""


def halt(status: int) -> None:
    raise Halted(status)


def manager(dirs: list[Path], channel: LogDirFailureChannel) -> LogManager:
    lm = LogManager(dirs, LogConfig(segment_bytes=4096), broker_id=1, time_ms=FakeClock(),
                    log_dir_failure_channel=channel, halt=halt)
    lm.startup()
    return lm


# --- the channel ---


def test_a_dir_is_queued_once_however_often_it_is_reported(tmp_path: Path) -> None:
    channel = LogDirFailureChannel()
    error = OSError(errno.EIO, "I/O error")
    channel.maybe_add_offline_log_dir(tmp_path / "a", "Error while flushing", error)
    channel.maybe_add_offline_log_dir(tmp_path / "a", "Error while appending", error)
    channel.maybe_add_offline_log_dir(tmp_path / "b", "Error while appending", error)
    channel.close()
    assert [channel.take_next_offline_log_dir() for _ in range(3)] == [tmp_path / "a", tmp_path / "b", None]
    assert channel.has_offline_log_dir(tmp_path / "a") and not channel.has_offline_log_dir(tmp_path / "c")


# --- the log ---


def test_enospc_on_append_reports_the_dir_and_fails_with_kafka_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = LogDirFailureChannel()
    log = Log.open(tmp_path / "d" / "orders-0", LogConfig(), time=FakeClock(), log_dir_failure_channel=channel)
    log.append_as_leader(batch(), leader_epoch=0)
    monkeypatch.setattr(segment_module.os, "pwrite", no_space)
    with pytest.raises(LogDirFailedError) as raised:
        log.append_as_leader(batch(), leader_epoch=0)
    assert raised.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert "Error while appending records to orders-0 in dir" in str(raised.value)
    assert channel.take_next_offline_log_dir() == tmp_path / "d"
    # Nothing of the refused batch counts: the log end is where the last good append left it.
    assert log.log_end_offset == 3


def test_an_offline_log_refuses_everything_at_once(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "d" / "orders-0", LogConfig(), time=FakeClock(),
                   log_dir_failure_channel=LogDirFailureChannel())
    log.append_as_leader(batch(), leader_epoch=0)
    log.mark_offline()
    for call in (lambda: log.read(0, 1000), lambda: log.append_as_follower(batch()), lambda: log.flush(),
                 lambda: log.truncate_to(0), log.roll):
        with pytest.raises(KafkaError) as raised:
            call()
        assert raised.value.code is ErrorCode.KAFKA_STORAGE_ERROR
        assert "offline log dir" in str(raised.value)


def test_without_a_channel_the_os_error_passes_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tools and tests that open a log alone see the file system's error, not a broker's reaction to it."""
    log = Log.open(tmp_path / "orders-0", LogConfig(), time=FakeClock())
    monkeypatch.setattr(os, "fsync", no_space)
    log.append_as_leader(batch(), leader_epoch=0)
    with pytest.raises(OSError, match="No space left"):
        log.flush()


# --- the index ---


def test_the_index_writes_each_page_through_the_file_before_writing_through_the_mapping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write through the mapping into a hole of a full tmpfs is a SIGBUS; writing the page's zeros with pwrite
    first makes it ENOSPC, raised before the entry counts. The write also spares the mapping's first write into a
    never-written page (ext4's slow page_mkwrite, issue 27): posix_fallocate reserved the blocks but left that."""
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 1 << 20)
    written: list[tuple[int, int]] = []
    real_pwrite = os.pwrite

    def recording(fd: int, data: bytes | memoryview, offset: int) -> int:
        assert not any(data), "only zeros, past every entry"
        written.append((offset, len(data)))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(index_module.os, "pwrite", recording)
    per_page = os.sysconf("SC_PAGE_SIZE") // 8
    for i in range(per_page + 1):
        index.append(i + 1, i * 100)
    page = os.sysconf("SC_PAGE_SIZE")
    assert written == [(0, page), (page, page)], "one write per page, as the entries reach it"
    assert [index.entry(i).offset for i in (0, per_page - 1, per_page)] == [1, per_page, per_page + 1]

    monkeypatch.setattr(index_module.os, "pwrite", no_space)
    for i in range(per_page + 1, 2 * per_page):
        index.append(i + 1, i * 100)  # still in the written page
    with pytest.raises(OSError, match="No space left"):
        index.append(2 * per_page + 1, 2 * per_page * 100)
    assert index.entries == 2 * per_page and index.last_offset == 2 * per_page


# --- the log manager ---


def test_a_failed_dir_leaves_service_and_its_logs_go_offline(tmp_path: Path) -> None:
    channel = LogDirFailureChannel()
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = manager(dirs, channel)
    lost = lm.get_or_create_log(TP0)
    kept = lm.get_or_create_log(TP1)
    assert lost.dir.parent == dirs[0].resolve() and kept.dir.parent == dirs[1].resolve()
    kept.append_as_leader(batch(), leader_epoch=0)
    lm.write_high_watermarks([(TP0, 0), (TP1, 3)])

    assert lm.handle_log_dir_failure(dirs[0].resolve()) == [TP0]
    assert lost.offline and lm.get_log(TP0) is None and lm.offline_log_dir_count == 1
    assert lm.live_log_dirs == [dirs[1].resolve()]
    # New logs go to the dirs in service only; checkpoints and the clean-shutdown marker skip the failed one.
    assert lm.get_or_create_log(TopicPartition("new", 0), is_new=True).dir.parent == dirs[1].resolve()
    # A replica that is not new has its log in the failed dir: no empty one elsewhere passes for it.
    with pytest.raises(LogDirFailedError, match=r"because log directories .* are offline"):
        lm.get_or_create_log(TopicPartition("old", 0))
    (dirs[0] / REPLICATION_OFFSET_CHECKPOINT).unlink()
    (dirs[0] / RECOVERY_POINT_OFFSET_CHECKPOINT).unlink(missing_ok=True)
    lm.write_high_watermarks([(TP1, 3)])
    lm.checkpoint_log_offsets()
    assert lm.read_high_watermarks() == {TP1: 3}
    lm.shutdown()
    assert not (dirs[0] / REPLICATION_OFFSET_CHECKPOINT).exists()
    assert not (dirs[0] / RECOVERY_POINT_OFFSET_CHECKPOINT).exists()
    assert not (dirs[0] / CLEAN_SHUTDOWN_FILE).exists(), "the failed dir is recovered at the next start"
    assert (dirs[1] / CLEAN_SHUTDOWN_FILE).exists()


def test_a_checkpoint_that_meets_a_full_disk_reports_its_dir_and_spares_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = LogDirFailureChannel()
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = manager(dirs, channel)
    lm.get_or_create_log(TP0)
    lm.get_or_create_log(TP1).append_as_leader(batch(), leader_epoch=0)
    real_write = OffsetCheckpointFile.write

    def write(self: OffsetCheckpointFile, offsets: dict[TopicPartition, int]) -> None:
        if dirs[0].resolve() in Path(self.path).parents:
            no_space()
        real_write(self, offsets)

    monkeypatch.setattr(OffsetCheckpointFile, "write", write)
    lm.write_high_watermarks([(TP0, 0), (TP1, 3)])
    assert channel.take_next_offline_log_dir() == dirs[0].resolve()
    assert OffsetCheckpointFile(dirs[1] / REPLICATION_OFFSET_CHECKPOINT).read() == {TP1: 3}


def test_the_last_dir_to_fail_halts_the_broker(tmp_path: Path) -> None:
    lm = manager([tmp_path / "a", tmp_path / "b"], LogDirFailureChannel())
    lm.handle_log_dir_failure((tmp_path / "a").resolve())
    with pytest.raises(Halted) as halted:
        lm.handle_log_dir_failure((tmp_path / "b").resolve())
    assert halted.value.args == (1,)


def test_creating_a_log_in_a_dir_that_fails_reports_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    channel = LogDirFailureChannel()
    lm = manager([tmp_path / "a"], channel)
    monkeypatch.setattr(index_module.os, "ftruncate", no_space)
    with pytest.raises(LogDirFailedError, match="Error while creating log for orders-0"):
        lm.get_or_create_log(TP0)
    assert channel.take_next_offline_log_dir() == (tmp_path / "a").resolve()


def test_a_dir_that_fails_at_startup_is_offline_and_the_others_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's start-up: the failing dir is reported (the handler tells the controller once the broker runs)."""
    channel = LogDirFailureChannel()
    dirs = [tmp_path / "a", tmp_path / "b"]
    real_check = manager_module._check_or_write_meta_properties

    def check(log_dir: Path, broker_id: int) -> None:
        if log_dir == dirs[0].resolve():
            no_space()
        real_check(log_dir, broker_id)

    monkeypatch.setattr(manager_module, "_check_or_write_meta_properties", check)
    lm = manager(dirs, channel)
    assert lm.live_log_dirs == [dirs[1].resolve()] and lm.offline_log_dir_count == 1
    assert channel.take_next_offline_log_dir() == dirs[0].resolve()


def test_a_broker_whose_every_dir_fails_at_startup_does_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint_module.os, "fsync", no_space)  # meta.properties cannot be written
    lm = LogManager([tmp_path / "a"], LogConfig(), broker_id=1, time_ms=FakeClock(),
                    log_dir_failure_channel=LogDirFailureChannel(), halt=halt)
    with pytest.raises(LogDirFailedError, match="can be created or validated"):
        lm.startup()

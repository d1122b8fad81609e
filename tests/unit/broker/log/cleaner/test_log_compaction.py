"""Compaction's rules at the log: keys required, gaps accepted only in compacted logs, the swap protocol
recovered at every step, an idempotent producer's state kept, retention off for compact-only logs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import broker.log.cleaner.algorithm as cleaner_module
from broker.config.log_config import LogConfig
from broker.log.cleaner.algorithm import Cleaner, LogToClean, Throttler
from broker.log.cleaner.manager import LogCleanerManager
from broker.log.cleaner.offset_map import SkimpyOffsetMap
from broker.log.cleaner.threads import CleanerConfig, LogCleaner
from broker.log.files import CLEANED_FILE_SUFFIX, CLEANER_OFFSET_CHECKPOINT, SWAP_FILE_SUFFIX
from broker.log.index import decode_time_index
from broker.log.log import Log, UnexpectedAppendOffsetError
from broker.log.log_dir_failure import LogDirFailureChannel
from common.record import ProducerRecord, build_batch, iter_batches
from proto.types import TopicPartition
from tests.fakes import FakeClock

COMPACT = LogConfig(segment_bytes=300, cleanup_policy=("compact",))


def keyed(i: int, key: int | None = None, **kwargs: int) -> bytes:
    return build_batch([ProducerRecord(b"v%d" % i, None if key is None else b"k%d" % key)], **kwargs)


def records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for segment in log.segments:
        data = segment.log_file.path.read_bytes()[: segment.size]
        out += [(r.offset, r.key, r.value) for b in iter_batches(data, allow_gaps=True) for r in b.records]
    return out


def cleaned_log(tmp_path: Path, clock: FakeClock) -> tuple[Log, int]:
    log = Log.open(tmp_path / "t-0", COMPACT, time=clock)
    for i in range(30):
        log.append_as_leader(keyed(i, i % 3), 0)
    log.roll()
    cleaner = Cleaner(0, SkimpyOffsetMap(1 << 16), Throttler(float("inf")), clock)
    end, _ = cleaner.clean(LogToClean(log, 0, log.active_segment.base_offset))
    return log, end


def test_cleaned_batches_keep_offsets_and_followers_take_them_only_when_compacted(tmp_path: Path) -> None:
    clock = FakeClock()
    log, _ = cleaned_log(tmp_path, clock)
    assert [r[0] for r in records(log)] == [27, 28, 29]
    data = b"".join(s.log_file.path.read_bytes()[: s.size] for s in log.segments)
    follower = Log.open(tmp_path / "f-0", COMPACT, time=clock)
    follower.append_as_follower(data)
    assert records(follower) == records(log) and follower.log_end_offset == 30
    strict = Log.open(tmp_path / "s-0", LogConfig(), time=clock)
    with pytest.raises(UnexpectedAppendOffsetError):
        strict.append_as_follower(data)
    # Fetch at an offset the cleaner removed: the next batch that holds a later offset.
    assert next(iter_batches(log.read(3, 1 << 20).records.read(), allow_gaps=True)).header.base_offset == 27


def test_recovery_accepts_gaps_only_in_compacted_logs(tmp_path: Path) -> None:
    clock = FakeClock()
    log, _ = cleaned_log(tmp_path, clock)
    before = records(log)
    log.close()
    reopened = Log.open(tmp_path / "t-0", COMPACT, time=clock, clean_shutdown=False)
    assert reopened.recovery_report == [] and records(reopened) == before
    reopened.close()
    as_delete = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300), time=clock, clean_shutdown=False)
    assert as_delete.recovery_report  # a hole in a delete-policy log is damage: cut there


@pytest.mark.parametrize("step", ["recopy", "swap"])
def test_a_crash_at_any_step_of_the_swap_leaves_the_old_or_the_new_segments(
        tmp_path: Path, step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    log = Log.open(tmp_path / "t-0", COMPACT, time=clock)
    for i in range(30):
        log.append_as_leader(keyed(i, i % 3), 0)
    log.roll()
    all_records = records(log)
    snapshot = tmp_path / "crashed"

    def crash_point(at: str) -> None:
        # The process dies here: keep a copy of the directory as the crash leaves it.
        if at == step and not snapshot.exists():
            shutil.copytree(log.dir, snapshot / "t-0")

    monkeypatch.setattr(cleaner_module, "_crash_point", crash_point)
    cleaner = Cleaner(0, SkimpyOffsetMap(1 << 16), Throttler(float("inf")), clock)
    cleaner.clean(LogToClean(log, 0, log.active_segment.base_offset))
    names = os.listdir(snapshot / "t-0")
    suffix = CLEANED_FILE_SUFFIX if step == "recopy" else SWAP_FILE_SUFFIX
    assert any(n.endswith(suffix) for n in names)
    recovered = Log.open(snapshot / "t-0", COMPACT, time=clock, clean_shutdown=False)
    got = records(recovered)
    assert not any(n.endswith((CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)) for n in os.listdir(snapshot / "t-0"))
    offsets = [r[0] for r in got]
    assert offsets == sorted(set(offsets))
    assert set(got) <= set(all_records)
    newest = {key: max(o for o, k, _ in all_records if k == key) for _, key, _ in all_records}
    assert all(any(r[0] == offset for r in got) for offset in newest.values())
    if step == "recopy":
        assert got == all_records  # the commit point was not reached: the old segments, untouched


def test_the_last_batch_of_a_live_idempotent_producer_keeps_its_last_record(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log.open(tmp_path / "t-0", COMPACT, time=clock)
    log.append_as_leader(keyed(0, 1, producer_id=7, producer_epoch=0, base_sequence=0), 0)
    log.append_as_leader(keyed(1, 1), 0)  # a newer value of the same key from someone else
    log.roll()
    Cleaner(0, SkimpyOffsetMap(1 << 16), Throttler(float("inf")), clock).clean(
        LogToClean(log, 0, log.active_segment.base_offset))
    assert [r[0] for r in records(log)] == [0, 1]
    log.close()
    reopened = Log.open(tmp_path / "t-0", COMPACT, time=clock, clean_shutdown=False)
    entry = reopened.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == 0


def test_retention_does_not_apply_to_compact_only_logs(tmp_path: Path) -> None:
    clock = FakeClock(10_000_000)
    for policy, survives in ((("compact",), True), (("compact", "delete"), False)):
        config = LogConfig(segment_bytes=300, cleanup_policy=policy, retention_ms=1)
        log = Log.open(tmp_path / f"{'-'.join(policy)}-0", config, time=clock)
        for i in range(10):
            log.append_as_leader(build_batch([ProducerRecord(b"v", b"k%d" % i)], now_ms=1), 0)
        log.roll()
        deleted = log.delete_old_segments()
        assert (deleted == 0) == survives


def test_list_offsets_by_timestamp_looks_past_segments_the_cleaner_emptied(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log.open(tmp_path / "t-0", COMPACT, time=clock)
    for i in range(30):
        log.append_as_leader(build_batch([ProducerRecord(b"v%d" % i, b"k%d" % (i % 3))], now_ms=1000 + i), 0)
    log.roll()
    Cleaner(0, SkimpyOffsetMap(1 << 16), Throttler(float("inf")), clock).clean(
        LogToClean(log, 0, log.active_segment.base_offset))
    assert any(s.size == 0 for s in log.segments[:-1])  # whole segments emptied, kept at their base offsets
    found = log.fetch_offset_by_timestamp(1000)
    assert found is not None and (found.offset, found.timestamp) == (27, 1027)


def test_a_rewritten_batch_indexes_the_max_timestamp_of_the_records_it_keeps(tmp_path: Path) -> None:
    """Kafka's cleaner builds a cleaned segment's time index from what MemoryRecords.filterTo retained
    (its maxTimestamp): an entry naming a dropped record's timestamp matches no batch of the cleaned log."""
    clock = FakeClock()
    log = Log.open(tmp_path / "t-0", COMPACT, time=clock)
    log.append_as_leader(build_batch([ProducerRecord(b"x", b"b", timestamp=1000),
                                      ProducerRecord(b"y", b"a", timestamp=5000)]), 0)
    log.append_as_leader(build_batch([ProducerRecord(b"z", b"a", timestamp=3000)]), 0)
    log.roll()
    Cleaner(0, SkimpyOffsetMap(1 << 16), Throttler(float("inf")), clock).clean(
        LogToClean(log, 0, log.active_segment.base_offset))
    cleaned = log.segments[0]
    kept = [(b.header.last_offset, b.header.max_timestamp)
            for b in iter_batches(cleaned.log_file.path.read_bytes()[: cleaned.size], allow_gaps=True)]
    assert kept == [(0, 1000), (2, 3000)]  # the record at 5000 (key a) was superseded by offset 2
    entries = decode_time_index(cleaned.time_index.path.read_bytes(), cleaned.base_offset)
    assert [(e.timestamp, e.offset) for e in entries] == [(3000, 2)]


def test_the_log_cleaner_picks_dirty_logs_above_the_ratio_and_checkpoints_in_kafkas_format(tmp_path: Path) -> None:
    clock = FakeClock()
    dirty = Log.open(tmp_path / "dirty-0", COMPACT, time=clock)
    clean = Log.open(tmp_path / "keys-0", LogConfig(segment_bytes=300, cleanup_policy=("compact",),
                                                    min_cleanable_dirty_ratio=0.99), time=clock)
    for i in range(30):
        dirty.append_as_leader(keyed(i, i % 3), 0)
        clean.append_as_leader(keyed(i, i), 0)  # every key once
    for log in (dirty, clean):
        log.roll()
    logs = {dirty.topic_partition: dirty, clean.topic_partition: clean}
    log_cleaner = LogCleaner(CleanerConfig(), [tmp_path], lambda: logs, clock, lambda tp: logs[tp].log_end_offset)
    cleaner = Cleaner(0, SkimpyOffsetMap(1 << 16), Throttler(float("inf")), clock)
    assert log_cleaner.clean_once(cleaner)  # the dirty log
    assert log_cleaner.max_dirty_percent() == 100
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text() == "0\n1\ndirty 0 30\n"
    assert log_cleaner.cleaner_recopy_percent() < 20
    # keys-0 is below its min.cleanable.dirty.ratio? No: all of it is dirty (ratio 1.0), so it is next.
    assert log_cleaner.clean_once(cleaner)
    assert [r[0] for r in records(clean)] == list(range(30))
    assert not log_cleaner.clean_once(cleaner)  # nothing dirty any more
    assert log_cleaner.uncleanable_partitions_count() == 0
    reloaded = LogCleanerManager([tmp_path], lambda: logs, clock)
    assert reloaded.first_dirty_offset(dirty.topic_partition, dirty) == 30


def dirty_logs(tmp_path: Path, clock: FakeClock, *names: str) -> dict[TopicPartition, Log]:
    logs = {}
    for name in names:
        log = Log.open(tmp_path / name, COMPACT, time=clock)
        for i in range(30):
            log.append_as_leader(keyed(i, i % 3), 0)
        log.roll()
        logs[log.topic_partition] = log
    return logs


def test_a_log_the_cleaner_fails_on_is_set_aside_unless_it_was_deleted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    logs = dirty_logs(tmp_path, clock, "broken-0", "deleted-0")
    channel = LogDirFailureChannel()
    log_cleaner = LogCleaner(CleanerConfig(), [tmp_path], lambda: dict(logs), clock,
                             lambda tp: logs[tp].log_end_offset if tp in logs else 0, channel)
    cleaner = Cleaner(0, SkimpyOffsetMap(1 << 16), Throttler(float("inf")), clock)

    def undecodable(*_args: object) -> None:
        raise ValueError("a record the cleaner cannot read")

    monkeypatch.setattr(cleaner_module, "decode_record_tuples", undecodable)
    deleted = next(tp for tp in logs if tp.topic == "deleted")
    original = log_cleaner.manager.grab_filthiest_compacted_log

    def grab_then_delete(high_watermark):  # type: ignore[no-untyped-def]
        chosen = original(high_watermark)
        if chosen is not None and chosen.log.topic_partition == deleted:
            del logs[deleted]  # StopReplica(delete) while the cleaner works on it
        return chosen

    log_cleaner.manager.grab_filthiest_compacted_log = grab_then_delete  # type: ignore[method-assign]
    assert log_cleaner.clean_once(cleaner) and log_cleaner.clean_once(cleaner)
    assert log_cleaner.manager.uncleanable == {next(tp for tp in logs if tp.topic == "broken")}
    assert log_cleaner.uncleanable_partitions_count() == 1
    assert not log_cleaner.clean_once(cleaner)  # an uncleanable log is not chosen again
    assert not channel.has_offline_log_dir(tmp_path)  # neither failure is the disk's


def one_dirty_log_cleaner(tmp_path: Path) -> tuple[LogCleaner, Cleaner, Log, LogDirFailureChannel]:
    clock = FakeClock()
    logs = dirty_logs(tmp_path, clock, "dirty-0")
    channel = LogDirFailureChannel()
    log_cleaner = LogCleaner(CleanerConfig(), [tmp_path], lambda: logs, clock, lambda tp: logs[tp].log_end_offset,
                             channel)
    return log_cleaner, Cleaner(0, SkimpyOffsetMap(1 << 16), Throttler(float("inf")), clock), *logs.values(), channel


def test_a_cleaning_that_fails_on_io_takes_the_log_dir_offline(tmp_path: Path) -> None:
    log_cleaner, cleaner, log, channel = one_dirty_log_cleaner(tmp_path)
    shutil.rmtree(log.dir)  # the cleaned segment cannot be written
    assert log_cleaner.clean_once(cleaner)
    assert channel.has_offline_log_dir(tmp_path)
    assert channel.take_next_offline_log_dir() == tmp_path  # what the broker's failure handler waits for
    assert log_cleaner.uncleanable_partitions_count() == 0  # the dir's fault, not the partition's
    assert not (tmp_path / CLEANER_OFFSET_CHECKPOINT).exists()  # nothing more is written to an offline dir


def test_a_cleaner_checkpoint_that_cannot_be_written_takes_the_log_dir_offline(tmp_path: Path) -> None:
    log_cleaner, cleaner, _, channel = one_dirty_log_cleaner(tmp_path)
    (tmp_path / CLEANER_OFFSET_CHECKPOINT).mkdir()  # the checkpoint's rename into place fails
    assert log_cleaner.clean_once(cleaner)
    assert channel.has_offline_log_dir(tmp_path)


def test_min_and_max_compaction_lag_bound_what_is_cleanable(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000)
    config = LogConfig(segment_bytes=300, cleanup_policy=("compact",), min_compaction_lag_ms=10_000,
                       max_compaction_lag_ms=60_000, min_cleanable_dirty_ratio=0.99)
    log = Log.open(tmp_path / "t-0", config, time=clock)
    for i in range(30):
        log.append_as_leader(build_batch([ProducerRecord(b"v", b"k%d" % (i % 3))], now_ms=clock.now), 0)
    log.roll()
    manager = LogCleanerManager([tmp_path], lambda: {log.topic_partition: log}, clock)
    young = manager.measure(log.topic_partition, log, clock.now, log.log_end_offset)
    assert young.to_clean.first_uncleanable_offset == 0 and young.cleanable_bytes == 0  # min lag not reached
    clock.advance(10_000)
    aged = manager.measure(log.topic_partition, log, clock.now, log.log_end_offset)
    assert aged.to_clean.first_uncleanable_offset == log.active_segment.base_offset
    assert aged.cleanable_ratio == 1.0 and not aged.needs_compaction_now
    # Past max.compaction.lag.ms a log is cleaned whatever its ratio; the high watermark still bounds it.
    clock.advance(60_000)
    overdue = manager.measure(log.topic_partition, log, clock.now, 12)
    assert overdue.needs_compaction_now and overdue.to_clean.first_uncleanable_offset == 12

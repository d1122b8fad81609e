"""Compaction and transactions (Kafka's LogCleaner with CleanedTransactionMetadata): an aborted transaction's
records go and never shadow a committed key, a marker goes once nothing of its transaction is left and its
delete horizon (delete.retention.ms) has passed, the cleaned segment keeps the `.txnindex` entries a kept
aborted batch still needs, and the cleanable range never reaches an open transaction. Real logs, fake clock."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import broker.log.cleaner.algorithm as cleaner_module
from broker.config.log_config import LogConfig
from broker.log.cleaner.algorithm import Cleaner, LogToClean, Throttler
from broker.log.cleaner.manager import LogCleanerManager
from broker.log.cleaner.offset_map import SkimpyOffsetMap
from broker.log.files import SWAP_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX
from broker.log.log import AbortedTxn, AppendOrigin, Log
from common.record import ControlRecordType, ProducerRecord, build_batch, build_end_txn_marker, iter_batches
from tests.fakes import FakeClock

T0 = 1_000_000
RETENTION_MS = 60_000
COMPACT = LogConfig(segment_bytes=100_000, cleanup_policy=("compact",), delete_retention_ms=RETENTION_MS)
A, B = 4000, 4001


class Producer:
    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id
        self.sequence = 0

    def batch(self, *pairs: tuple[bytes, bytes]) -> bytes:
        data = build_batch([ProducerRecord(value, key) for key, value in pairs], producer_id=self.producer_id,
                           producer_epoch=0, base_sequence=self.sequence, is_transactional=True, now_ms=T0)
        self.sequence += len(pairs)
        return data


def marker(log: Log, producer_id: int, control_type: ControlRecordType) -> None:
    log.append_as_leader(build_end_txn_marker(producer_id, 0, control_type, 0, T0), 0,
                         origin=AppendOrigin.COORDINATOR)


def plain(log: Log, key: bytes, value: bytes) -> None:
    log.append_as_leader(build_batch([ProducerRecord(value, key)], now_ms=T0), 0)


def contents(log: Log) -> list[tuple[int, bool, bytes | None, bytes | None]]:
    """(offset, is a marker, key, value) of every record left."""
    out = []
    for segment in log.segments:
        data = segment.log_file.path.read_bytes()[: segment.size]
        out += [(r.offset, b.header.is_control, r.key, r.value)
                for b in iter_batches(data, allow_gaps=True) for r in b.records]
    return out


def clean(log: Log, clock: FakeClock) -> None:
    cleaner = Cleaner(0, SkimpyOffsetMap(1 << 16), Throttler(float("inf")), clock)
    cleaner.clean(LogToClean(log, 0, log.active_segment.base_offset))


def test_aborted_records_go_and_never_shadow_a_key_and_spent_markers_go_after_the_horizon(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    log = Log.open(tmp_path / "t-0", COMPACT, time=clock)
    a, b = Producer(A), Producer(B)
    plain(log, b"k", b"committed-1")  # 0
    log.append_as_leader(a.batch((b"k", b"aborted"), (b"x", b"aborted-x")), 0)  # 1..2
    marker(log, A, ControlRecordType.ABORT)  # 3
    log.append_as_leader(b.batch((b"y", b"in-commit")), 0)  # 4
    marker(log, B, ControlRecordType.COMMIT)  # 5
    log.append_as_leader(a.batch((b"w", b"a-later")), 0)  # 6: A's next transaction, its last batch
    marker(log, A, ControlRecordType.COMMIT)  # 7
    plain(log, b"z", b"later")  # 8
    log.roll()
    assert log.collect_aborted_transactions(0) == [AbortedTxn(A, 1, 3, 4)]
    clean(log, clock)
    # The aborted "k" never entered the map: the committed "k" stays. A's ABORT marker stays through the pass
    # that removed its transaction's batches (Kafka's lastObservedBatchOffset), its .txnindex entry with it; each
    # COMMIT marker stays with its batch.
    assert [(offset, is_marker, key) for offset, is_marker, key, _ in contents(log)] == [
        (0, False, b"k"), (3, True, b"\x00\x00\x00\x00"), (4, False, b"y"), (5, True, b"\x00\x00\x00\x01"),
        (6, False, b"w"), (7, True, b"\x00\x00\x00\x01"), (8, False, b"z")]
    assert log.collect_aborted_transactions(0) == [AbortedTxn(A, 1, 3, 4)]
    # The next pass finds nothing of A's aborted transaction: the marker may go after the delete horizon, and
    # no aborted record is left to skip.
    clean(log, clock)
    assert 3 in [offset for offset, *_ in contents(log)]
    assert log.collect_aborted_transactions(0) == []
    clock.advance(RETENTION_MS - 1)
    clean(log, clock)
    assert 3 in [offset for offset, *_ in contents(log)]
    clock.advance(1)
    clean(log, clock)
    assert [offset for offset, *_ in contents(log)] == [0, 4, 5, 6, 7, 8]


def test_a_kept_aborted_batch_keeps_its_marker_and_txnindex_entry(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    log = Log.open(tmp_path / "t-0", COMPACT, time=clock)
    a = Producer(A)
    log.append_as_leader(a.batch((b"k", b"aborted")), 0)  # 0: A's last batch: its last record stays
    marker(log, A, ControlRecordType.ABORT)  # 1
    plain(log, b"k", b"newer")  # 2
    log.roll()
    clock.advance(2 * RETENTION_MS)
    clean(log, clock)
    clean(log, clock)
    assert [(offset, is_marker) for offset, is_marker, _, _ in contents(log)] == [(0, False), (1, True), (2, False)]
    assert log.collect_aborted_transactions(0) == [AbortedTxn(A, 0, 1, 2)]


def test_the_cleanable_range_stops_at_the_first_unstable_offset(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=100_000, cleanup_policy=("compact",)), time=clock)
    plain(log, b"k", b"v0")  # 0
    plain(log, b"k", b"v1")  # 1
    log.append_as_leader(Producer(A).batch((b"k", b"open")), 0)  # 2
    plain(log, b"k", b"v3")  # 3
    log.roll()
    manager = LogCleanerManager([tmp_path], lambda: {log.topic_partition: log}, clock)
    measured = manager.measure(log.topic_partition, log, clock.now, log.log_end_offset)
    assert measured.to_clean.first_uncleanable_offset == 2
    marker(log, A, ControlRecordType.COMMIT)  # 4
    log.roll()
    assert manager.measure(log.topic_partition, log, clock.now, 4).to_clean.first_uncleanable_offset == 2
    log.on_high_watermark_updated(5)  # the partition's high watermark passes the marker
    assert manager.measure(log.topic_partition, log, clock.now, 5).to_clean.first_uncleanable_offset == 5


def test_a_crash_after_the_swap_commit_keeps_the_cleaned_txnindex(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(T0)
    log = Log.open(tmp_path / "t-0", COMPACT, time=clock)
    a = Producer(A)
    log.append_as_leader(a.batch((b"k", b"aborted")), 0)  # 0: A's last batch, kept
    marker(log, A, ControlRecordType.ABORT)  # 1
    plain(log, b"k", b"newer")  # 2
    log.roll()
    crashed = tmp_path / "crashed"

    def crash_point(step: str) -> None:
        # The process dies between the .swap commit and the renames: the directory as the crash leaves it.
        if step == "swap" and not crashed.exists():
            shutil.copytree(log.dir, crashed / "t-0")

    monkeypatch.setattr(cleaner_module, "_crash_point", crash_point)
    clean(log, clock)
    assert any(p.name.endswith(TXN_INDEX_FILE_SUFFIX + SWAP_FILE_SUFFIX) for p in (crashed / "t-0").iterdir())
    recovered = Log.open(crashed / "t-0", COMPACT, time=clock, clean_shutdown=True, recovery_point=3)
    assert recovered.collect_aborted_transactions(0) == [AbortedTxn(A, 0, 1, 2)]

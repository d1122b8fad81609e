"""ProducerStateManager: Kafka 2.x idempotence checks, snapshots, truncation and expiry."""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest

from broker.log.files import snapshot_file_name
from broker.log.producer_state import (
    INT32_MAX,
    BatchMetadata,
    CorruptSnapshotError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerBatch,
    ProducerStateManager,
    UnknownProducerIdError,
    decrement_sequence,
    read_snapshot,
)
from common import record as rec
from proto.errors import ErrorCode
from proto.types import TopicPartition

TP = TopicPartition("orders", 0)
PID = 1000
T0 = 1_700_000_000_000


def batch(
    base_offset: int, seq: int, count: int = 1, *, pid: int = PID, epoch: int = 0, ts: int = T0
) -> rec.BatchHeader:
    return rec.BatchHeader(
        base_offset=base_offset, batch_length=rec.MIN_BATCH_LENGTH, partition_leader_epoch=0, magic=rec.MAGIC, crc=0,
        attributes=0, last_offset_delta=count - 1, base_timestamp=ts, max_timestamp=ts, producer_id=pid,
        producer_epoch=epoch, base_sequence=seq, record_count=count,
    )


def no_pid_batch(base_offset: int, count: int = 1) -> rec.BatchHeader:
    return batch(base_offset, rec.NO_SEQUENCE, count, pid=rec.NO_PRODUCER_ID, epoch=rec.NO_PRODUCER_EPOCH)


def append(psm: ProducerStateManager, *headers: rec.BatchHeader) -> BatchMetadata | None:
    """The leader's sequence: validate, then (unless a duplicate) apply what was written."""
    duplicate = psm.validate_append(headers)
    if duplicate is None:
        for header in headers:
            psm.update(header)
    return duplicate


@pytest.fixture
def psm(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(TP, tmp_path)


# ---------------------------------------------------------------------------- sequence and epoch checks


def test_new_producer_starts_at_zero_and_continues_in_sequence(psm: ProducerStateManager) -> None:
    assert append(psm, batch(0, 0, 3)) is None
    assert append(psm, batch(3, 3, 2)) is None
    entry = psm.last_entry(PID)
    assert entry is not None
    assert (entry.producer_epoch, entry.last_seq, entry.last_data_offset) == (0, 4, 4)
    assert psm.map_end_offset == 5


def test_unknown_producer_not_at_sequence_zero(psm: ProducerStateManager) -> None:
    with pytest.raises(UnknownProducerIdError) as info:
        psm.validate_append([batch(0, 7)])
    assert info.value.code == ErrorCode.UNKNOWN_PRODUCER_ID == 59
    assert "producerId 1000 in partition orders-0" in str(info.value)


def test_gap_is_out_of_order(psm: ProducerStateManager) -> None:
    append(psm, batch(0, 0, 5))
    with pytest.raises(OutOfOrderSequenceError) as info:
        psm.validate_append([batch(5, 6)])
    assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER == 45
    assert "6 (incoming), 4 (current end)" in str(info.value)


def test_older_epoch_is_invalid(psm: ProducerStateManager) -> None:
    append(psm, batch(0, 0, epoch=3))
    with pytest.raises(InvalidProducerEpochError) as info:
        psm.validate_append([batch(1, 1, epoch=2)])
    assert info.value.code == ErrorCode.INVALID_PRODUCER_EPOCH == 47


def test_epoch_bump_restarts_sequence_at_zero(psm: ProducerStateManager) -> None:
    append(psm, batch(0, 0, 3, epoch=0))
    with pytest.raises(OutOfOrderSequenceError, match="new epoch 1"):
        psm.validate_append([batch(3, 3, epoch=1)])
    assert append(psm, batch(3, 0, 2, epoch=1)) is None
    entry = psm.last_entry(PID)
    assert entry is not None
    assert entry.producer_epoch == 1
    assert [b.first_offset for b in entry.batch_metadata] == [3]  # the old epoch's batches are gone
    # A retry of the old epoch's batch is now fenced, not a duplicate.
    with pytest.raises(InvalidProducerEpochError):
        psm.validate_append([batch(5, 0, 3, epoch=0)])


def test_duplicates_within_the_last_five_batches(psm: ProducerStateManager) -> None:
    for i in range(6):
        append(psm, batch(base_offset=100 + 10 * i, seq=2 * i, count=2, ts=T0 + i))
    for i in range(1, 6):
        duplicate = psm.validate_append([batch(999, 2 * i, 2)])
        assert duplicate == BatchMetadata(
            last_seq=2 * i + 1, last_offset=101 + 10 * i, offset_delta=1, timestamp=T0 + i
        )
        assert (duplicate.first_seq, duplicate.first_offset) == (2 * i, 100 + 10 * i)
    # Kafka 2.x: a retry older than the cached five fails the sequence check.
    with pytest.raises(OutOfOrderSequenceError):
        psm.validate_append([batch(999, 0, 2)])
    # Same first sequence, different last: not the same batch.
    with pytest.raises(OutOfOrderSequenceError):
        psm.validate_append([batch(999, 10, 1)])


def test_duplicate_check_leaves_state_unchanged(psm: ProducerStateManager) -> None:
    append(psm, batch(0, 0, 2))
    assert append(psm, batch(7, 0, 2)) == BatchMetadata(1, 1, 1, T0)
    assert psm.map_end_offset == 2


def test_batches_of_one_request_are_checked_as_a_chain(psm: ProducerStateManager) -> None:
    assert psm.validate_append([batch(0, 0, 5), batch(5, 5, 5), batch(10, 0, pid=7)]) is None
    with pytest.raises(OutOfOrderSequenceError):
        psm.validate_append([batch(0, 0, 5), batch(5, 6, 5)])
    assert psm.active_producers == {}  # validation alone changes nothing


def test_batches_without_producer_id_only_move_the_map_end(psm: ProducerStateManager) -> None:
    assert append(psm, no_pid_batch(0, 4)) is None
    assert psm.active_producers == {}
    assert psm.map_end_offset == 4


def test_sequence_wraps_at_int32_max(psm: ProducerStateManager) -> None:
    psm.update(batch(0, INT32_MAX - 4, 5))  # a follower's copy, no checks: ends at INT32_MAX
    assert append(psm, batch(5, 0, 3)) is None
    # A batch that straddles the wrap.
    psm.truncate_fully_and_start_at(0)
    psm.update(batch(0, INT32_MAX - 10, 9))
    header = batch(9, INT32_MAX - 1, 3)  # sequences INT32_MAX - 1, INT32_MAX, 0
    assert header.last_sequence == 0
    assert append(psm, header) is None
    assert psm.validate_append([batch(99, INT32_MAX - 1, 3)]) == BatchMetadata(0, 11, 2, T0)
    assert append(psm, batch(12, 1)) is None
    assert decrement_sequence(0, 2) == INT32_MAX - 1


def test_update_refuses_batches_below_the_map_end(psm: ProducerStateManager) -> None:
    append(psm, batch(10, 0, 2))
    with pytest.raises(ValueError, match="below the producer state end offset 12"):
        psm.update(batch(0, 2))  # offsets never assigned


def test_follower_update_accepts_anything_and_warns_on_older_epoch(
    psm: ProducerStateManager, caplog: pytest.LogCaptureFixture
) -> None:
    psm.update(batch(0, 40, epoch=5))
    with caplog.at_level(logging.WARNING):
        psm.update(batch(1, 3, epoch=4))
    entry = psm.last_entry(PID)
    assert entry is not None
    assert (entry.producer_epoch, entry.last_seq) == (4, 3)
    assert "older than 5" in caplog.text


# ---------------------------------------------------------------------------- snapshots


def test_snapshot_bytes_follow_kafkas_layout(psm: ProducerStateManager, tmp_path: Path) -> None:
    append(psm, batch(10, 0, 5, ts=T0), batch(15, 5, 5, ts=T0 + 7))
    append(psm, batch(20, 0, 1, pid=42, epoch=3, ts=T0 + 9))
    path = psm.take_snapshot(21)
    assert path == str(tmp_path / "00000000000000000021.snapshot")
    data = Path(path).read_bytes()
    entries = struct.pack(">qhiqiqiq", 42, 3, 0, 20, 0, T0 + 9, -1, -1) + struct.pack(
        ">qhiqiqiq", PID, 0, 9, 19, 4, T0 + 7, -1, -1
    )
    body = struct.pack(">i", 2) + entries
    assert data == struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert len(data) == 10 + 2 * 46


def test_snapshot_round_trip_keeps_only_each_producers_last_batch(tmp_path: Path, psm: ProducerStateManager) -> None:
    for i in range(3):
        append(psm, batch(2 * i, 2 * i, 2))
    psm.take_snapshot(6)
    reloaded = ProducerStateManager(TP, tmp_path)
    assert reloaded.truncate_and_reload(0, 6, T0) == 6
    entry = reloaded.last_entry(PID)
    assert entry is not None
    assert list(entry.batch_metadata) == [BatchMetadata(5, 5, 1, T0)]
    assert entry.last_timestamp == T0
    assert reloaded.validate_append([batch(99, 4, 2)]) == BatchMetadata(5, 5, 1, T0)
    with pytest.raises(OutOfOrderSequenceError):  # the documented (Kafka) gap: older retries are not recognised
        reloaded.validate_append([batch(99, 2, 2)])
    assert append(reloaded, batch(6, 6)) is None


def test_snapshot_at_existing_offset_is_not_rewritten(psm: ProducerStateManager) -> None:
    append(psm, batch(0, 0))
    assert psm.take_snapshot(1) is not None
    assert psm.take_snapshot(1) is None
    with pytest.raises(ValueError, match="below the state's end"):
        psm.take_snapshot(0)


def test_only_the_newest_two_snapshots_are_kept(psm: ProducerStateManager, tmp_path: Path) -> None:
    for offset in range(1, 5):
        append(psm, batch(offset - 1, offset - 1))
        psm.take_snapshot(offset)
    assert sorted(p.name for p in tmp_path.iterdir()) == [snapshot_file_name(3), snapshot_file_name(4)]
    psm.delete_snapshots_before(4)
    assert [p.name for p in tmp_path.iterdir()] == [snapshot_file_name(4)]
    assert psm.latest_snapshot_offset == 4


def test_snapshot_names_are_zero_padded_offsets() -> None:
    assert snapshot_file_name(1234) == "00000000000000001234.snapshot"


def with_crc(after_crc: bytes) -> bytes:
    return struct.pack(">hI", 1, crc32c.crc32c(after_crc)) + after_crc


def snapshot(psm: ProducerStateManager, offset: int) -> Path:
    path = psm.take_snapshot(offset)
    assert path is not None
    return Path(path)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "stored CRC 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}"),
        (lambda d: b"\x00\x02" + d[2:], "unknown version 2"),
        (lambda d: d[:5], "5 bytes, fewer than its header"),
        (lambda d: with_crc(struct.pack(">i", 2) + d[10:]), "declares 2 entries but has 56 bytes"),
        (lambda d: with_crc(struct.pack(">i", -1)), "declares -1 entries"),
    ],
)
def test_corrupt_snapshot_is_reported(
    psm: ProducerStateManager, damage: Callable[[bytes], bytes], message: str
) -> None:
    append(psm, batch(0, 0))
    path = snapshot(psm, 1)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CorruptSnapshotError, match=f"snapshot {path} .*{message}") as info:
        read_snapshot(path)
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR


def test_corrupt_snapshot_is_deleted_and_an_older_one_used(
    tmp_path: Path, psm: ProducerStateManager, caplog: pytest.LogCaptureFixture
) -> None:
    append(psm, batch(0, 0))
    psm.take_snapshot(1)
    append(psm, batch(1, 1))
    newest = snapshot(psm, 2)
    newest.write_bytes(newest.read_bytes()[:-1] + b"\x00")
    reloaded = ProducerStateManager(TP, tmp_path)
    with caplog.at_level(logging.WARNING):
        replay_from = reloaded.truncate_and_reload(0, 2, T0)
    assert replay_from == 1
    assert not newest.exists()
    assert "deleting producer snapshot" in caplog.text
    # The log from its start: offset 0 is skipped.
    reloaded.replay([ProducerBatch(batch(0, 0)), ProducerBatch(batch(1, 1))])
    entry = reloaded.last_entry(PID)
    assert entry is not None
    assert entry.last_seq == 1
    assert reloaded.map_end_offset == 2


def test_no_snapshot_means_replay_from_log_start(tmp_path: Path) -> None:
    psm = ProducerStateManager(TP, tmp_path)
    assert psm.truncate_and_reload(5, 9, T0) == 5
    psm.replay([ProducerBatch(batch(5, 0, 4))])
    assert psm.map_end_offset == 9


# ---------------------------------------------------------------------------- truncation and expiry


def test_truncate_and_reload_after_log_truncation(psm: ProducerStateManager, tmp_path: Path) -> None:
    log = [batch(0, 0, 10), batch(10, 10, 5), batch(15, 15, 5), batch(20, 20, 5), batch(25, 0, pid=7)]
    append(psm, *log[:2])
    psm.take_snapshot(15)
    append(psm, *log[2:4])
    psm.take_snapshot(25)
    append(psm, log[4])
    # A follower truncates its log to 20: the state must forget batches 20..25.
    assert psm.truncate_and_reload(0, 20, T0) == 15
    assert sorted(p.name for p in tmp_path.iterdir()) == [snapshot_file_name(15)]
    assert set(psm.active_producers) == {PID}
    psm.replay(ProducerBatch(header) for header in log[:3])
    entry = psm.last_entry(PID)
    assert entry is not None
    assert (entry.last_seq, entry.last_data_offset) == (19, 19)
    assert append(psm, batch(20, 20)) is None


def test_reload_at_map_end_only_truncates_head(psm: ProducerStateManager, tmp_path: Path) -> None:
    append(psm, batch(0, 0, pid=1), batch(1, 0, pid=2))
    psm.take_snapshot(2)
    append(psm, batch(2, 1, pid=2))
    assert psm.truncate_and_reload(2, 3, T0) == 3
    assert set(psm.active_producers) == {2}  # producer 1's only record is below the log start
    assert list(tmp_path.iterdir()) == []  # the snapshot at the log start holds nothing live


def test_reload_skips_snapshot_producers_below_log_start(psm: ProducerStateManager, tmp_path: Path) -> None:
    append(psm, batch(0, 0, pid=1), batch(1, 0, pid=2), batch(2, 1, pid=2))
    psm.take_snapshot(3)
    reloaded = ProducerStateManager(TP, tmp_path)
    assert reloaded.truncate_and_reload(2, 3, T0) == 3
    assert set(reloaded.active_producers) == {2}


def test_truncate_head_forgets_producers_and_snapshots_below_log_start(
    psm: ProducerStateManager, tmp_path: Path
) -> None:
    append(psm, batch(0, 0, pid=1))
    psm.take_snapshot(1)
    append(psm, batch(1, 0, pid=2), batch(2, 1, pid=2))
    psm.take_snapshot(3)
    psm.truncate_head(2)
    assert set(psm.active_producers) == {2}
    assert [p.name for p in tmp_path.iterdir()] == [snapshot_file_name(3)]
    assert psm.map_end_offset == 3


def test_truncate_fully_and_start_at(psm: ProducerStateManager, tmp_path: Path) -> None:
    append(psm, batch(0, 0))
    psm.take_snapshot(1)
    psm.truncate_fully_and_start_at(50)
    assert psm.active_producers == {}
    assert psm.map_end_offset == 50
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(UnknownProducerIdError):
        psm.validate_append([batch(50, 1)])


def test_expiry_by_last_batch_timestamp(tmp_path: Path) -> None:
    psm = ProducerStateManager(TP, tmp_path, producer_id_expiration_ms=1000)
    append(psm, batch(0, 0, pid=1, ts=T0), batch(1, 0, pid=2, ts=T0 + 500))
    psm.remove_expired_producers(T0 + 999)
    assert set(psm.active_producers) == {1, 2}
    psm.remove_expired_producers(T0 + 1000)
    assert set(psm.active_producers) == {2}
    psm.take_snapshot(2)
    reloaded = ProducerStateManager(TP, tmp_path, producer_id_expiration_ms=1000)
    reloaded.truncate_and_reload(0, 2, T0 + 1500)  # expired producers are not loaded
    assert reloaded.active_producers == {}

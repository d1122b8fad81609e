"""Transactions on the partition log (KIP-98): transactional batches and markers, the producer state's open
transactions, the last stable offset, `.txnindex` (written, truncated, deleted, rebuilt) and the aborted
transactions a READ_COMMITTED fetch gets, on a real Log in a temp dir with a fake clock."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.log.files import TXN_INDEX_FILE_SUFFIX, filename_prefix_from_offset
from broker.log.log import AbortedTxn, AppendOrigin, Log
from broker.log.producer_state import ProducerStateManager, read_snapshot
from broker.log.transaction_index import ABORTED_TXN_SIZE, TransactionIndex, collect_aborted_txns, decode_entries
from common.record import (
    CONTROL_MASK,
    TRANSACTIONAL_MASK,
    ControlRecordType,
    ProducerRecord,
    build_batch,
    build_end_txn_marker,
    decode_records,
    iter_batches,
    parse_header,
    read_end_txn_marker,
)
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from tests.fakes import FakeClock

T0 = 1_000_000
A, B, C = 4000, 4001, 4002


class Producer:
    """A transactional producer's batches for one partition: its sequence, as a client would number them."""

    def __init__(self, producer_id: int, epoch: int = 0) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.sequence = 0

    def batch(self, n: int = 2, *, transactional: bool = True) -> bytes:
        data = build_batch([ProducerRecord(b"%d-%d" % (self.producer_id, self.sequence + i)) for i in range(n)],
                           producer_id=self.producer_id, producer_epoch=self.epoch, base_sequence=self.sequence,
                           is_transactional=transactional, now_ms=T0)
        self.sequence += n
        return data

    def marker(self, control_type: ControlRecordType, coordinator_epoch: int = 0) -> bytes:
        return build_end_txn_marker(self.producer_id, self.epoch, control_type, coordinator_epoch, T0)


def open_log(dir: Path) -> Log:
    return Log.open(dir / "orders-0", LogConfig(segment_bytes=100_000), time=FakeClock(T0))


def write_marker(log: Log, producer: Producer, control_type: ControlRecordType, coordinator_epoch: int = 0) -> int:
    return log.append_as_leader(producer.marker(control_type, coordinator_epoch), 0,
                                origin=AppendOrigin.COORDINATOR).first_offset


def txn_index_path(log: Log, base_offset: int = 0) -> Path:
    return log.dir / f"{filename_prefix_from_offset(base_offset)}{TXN_INDEX_FILE_SUFFIX}"


# ---------------------------------------------------------------------------- the wire format


def test_a_marker_is_kafkas_control_batch_with_its_control_key_and_marker_value() -> None:
    data = build_end_txn_marker(A, 3, ControlRecordType.COMMIT, 7, T0)
    header = parse_header(data)
    assert header.attributes & (TRANSACTIONAL_MASK | CONTROL_MASK) == TRANSACTIONAL_MASK | CONTROL_MASK == 0x30
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.record_count) == (A, 3, -1, 1)
    [record] = decode_records(data)
    assert record.key == b"\x00\x00\x00\x01"  # version 0, type 1 (COMMIT)
    assert record.value == b"\x00\x00\x00\x00\x00\x07"  # version 0, coordinator epoch 7
    assert read_end_txn_marker(data, 0, header) == (ControlRecordType.COMMIT, 7)
    abort = build_end_txn_marker(A, 3, ControlRecordType.ABORT, 7, T0)
    assert decode_records(abort)[0].key == b"\x00\x00\x00\x00"


def test_a_control_record_of_another_type_is_no_marker() -> None:
    other = build_batch([ProducerRecord(b"\x00\x00", b"\x00\x00\x00\x05")], producer_id=A, producer_epoch=0,
                        is_transactional=True, is_control=True)
    assert read_end_txn_marker(other, 0, parse_header(other)) is None


def test_a_txnindex_entry_is_kafkas_34_bytes() -> None:
    entry = AbortedTxn(A, 10, 20, 15)
    assert ABORTED_TXN_SIZE == 34
    assert entry.encode() == struct.pack(">hqqqq", 0, A, 10, 20, 15)
    assert decode_entries(entry.encode() * 2 + b"\x00" * 5) == [entry, entry]  # a torn tail is left out


def test_collecting_aborted_transactions_stops_at_an_entry_whose_lso_passes_the_bound() -> None:
    entries = [AbortedTxn(A, 0, 5, 3), AbortedTxn(B, 3, 9, 12), AbortedTxn(C, 20, 25, 26)]
    assert collect_aborted_txns(entries, 6, 10) == ([AbortedTxn(B, 3, 9, 12)], True)
    assert collect_aborted_txns(entries, 0, 4) == ([AbortedTxn(A, 0, 5, 3), AbortedTxn(B, 3, 9, 12)], True)
    assert collect_aborted_txns(entries, 0, 2) == ([AbortedTxn(A, 0, 5, 3)], True)
    assert collect_aborted_txns(entries, 10, 12) == ([], True)  # B's LSO ends the search though B is before it
    assert collect_aborted_txns(entries, 26, 30) == ([], False)


# ---------------------------------------------------------------------------- the last stable offset


def test_the_lso_stays_at_an_open_transactions_first_offset_until_its_marker_is_below_the_hw(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = Producer(A)
    log.append_as_leader(build_batch([ProducerRecord(b"plain")]), 0)  # offset 0
    log.append_as_leader(a.batch(), 0)  # 1..2, opens A's transaction
    log.append_as_leader(build_batch([ProducerRecord(b"plain")]), 0)  # 3
    assert log.last_stable_offset(high_watermark=4) == 1
    assert log.last_stable_offset(high_watermark=1) == 1
    assert log.last_stable_offset(high_watermark=0) == 0  # capped by the high watermark
    assert log.producer_state.ongoing_transactions == {1: A}
    marker = write_marker(log, a, ControlRecordType.COMMIT)
    assert marker == 4
    assert log.last_stable_offset(high_watermark=4) == 1  # the marker is not replicated yet
    assert log.last_stable_offset(high_watermark=5) == 5
    assert log.producer_state.ongoing_transactions == {}
    assert not txn_index_path(log).exists()  # a commit is not indexed


def test_the_lso_is_never_below_the_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(Producer(A).batch(), 0)  # 0..1, open
    log.append_as_leader(build_batch([ProducerRecord(b"plain")]), 0)  # 2
    assert log.last_stable_offset(high_watermark=3) == 0
    log.maybe_increment_log_start_offset(1)  # DeleteRecords inside the open transaction
    assert log.last_stable_offset(high_watermark=3) == 1


def test_the_oldest_of_several_open_transactions_bounds_the_lso(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a, b = Producer(A), Producer(B)
    log.append_as_leader(a.batch(), 0)  # 0..1
    log.append_as_leader(b.batch(), 0)  # 2..3
    log.append_as_leader(a.batch(), 0)  # 4..5: still A's one transaction
    assert log.producer_state.ongoing_transactions == {0: A, 2: B}
    write_marker(log, a, ControlRecordType.ABORT)  # 6
    assert log.last_stable_offset(high_watermark=7) == 2
    write_marker(log, b, ControlRecordType.COMMIT)  # 7
    assert log.last_stable_offset(high_watermark=8) == 8


# ---------------------------------------------------------------------------- .txnindex


def test_an_abort_marker_writes_the_transaction_to_its_segments_txnindex(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a, b = Producer(A), Producer(B)
    log.append_as_leader(a.batch(), 0)  # 0..1
    log.append_as_leader(b.batch(), 0)  # 2..3
    write_marker(log, a, ControlRecordType.ABORT)  # 4: B's transaction from 2 is still open
    write_marker(log, b, ControlRecordType.ABORT)  # 5
    expected = [AbortedTxn(A, 0, 4, 2), AbortedTxn(B, 2, 5, 6)]
    assert txn_index_path(log).read_bytes() == b"".join(entry.encode() for entry in expected)
    assert log.collect_aborted_transactions(0) == expected
    assert log.collect_aborted_transactions(5) == [AbortedTxn(B, 2, 5, 6)]
    assert log.collect_aborted_transactions(0, upper_bound_offset=2) == [AbortedTxn(A, 0, 4, 2)]


def test_a_marker_without_data_in_the_partition_completes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write_marker(log, Producer(A), ControlRecordType.ABORT)
    assert not txn_index_path(log).exists()
    assert log.last_stable_offset(high_watermark=1) == 1


def test_truncation_cuts_the_txnindex_and_reopens_the_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = Producer(A)
    log.append_as_leader(a.batch(), 0)  # 0..1
    write_marker(log, a, ControlRecordType.ABORT)  # 2
    assert TransactionIndex(txn_index_path(log), 0).entries == (AbortedTxn(A, 0, 2, 3),)
    log.truncate_to(2)
    assert log.collect_aborted_transactions(0) == []
    assert not txn_index_path(log).exists()
    assert log.producer_state.ongoing_transactions == {0: A}
    assert log.last_stable_offset(high_watermark=2) == 0


def test_a_deleted_segment_takes_its_txnindex_with_it(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = Producer(A)
    log.append_as_leader(a.batch(), 0)
    write_marker(log, a, ControlRecordType.ABORT)
    log.roll()
    log.append_as_leader(build_batch([ProducerRecord(b"later")]), 0)  # 3
    assert txn_index_path(log).exists()
    log.maybe_increment_log_start_offset(3)
    assert not txn_index_path(log).exists()
    assert not list(log.dir.glob(f"*{TXN_INDEX_FILE_SUFFIX}*"))


def test_recovery_rebuilds_a_lost_txnindex_from_the_markers(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a, b = Producer(A), Producer(B)
    log.append_as_leader(a.batch(), 0)  # 0..1
    log.roll()  # snapshot at 2: A's transaction is open there
    log.append_as_leader(b.batch(), 0)  # 2..3
    write_marker(log, a, ControlRecordType.ABORT)  # 4
    write_marker(log, b, ControlRecordType.COMMIT)  # 5
    expected = txn_index_path(log, 2).read_bytes()
    assert decode_entries(expected) == [AbortedTxn(A, 0, 4, 2)]
    log.flush()
    for segment in log.segments:
        segment.close()
    txn_index_path(log, 2).unlink()  # as if the crash came before the index reached the disk
    reopened = Log.open(log.dir, log.config, time=FakeClock(T0), recovery_point=2)
    assert txn_index_path(reopened, 2).read_bytes() == expected
    assert reopened.collect_aborted_transactions(0) == [AbortedTxn(A, 0, 4, 2)]
    assert reopened.last_stable_offset(high_watermark=6) == 6


def test_a_segment_deleted_before_its_flush_takes_no_log_dir_offline(tmp_path: Path) -> None:
    """Log.flush fsyncs outside the log's lock: a segment truncation, retention or a cleaner deleted meanwhile
    has nothing left to fsync, its `.txnindex` included."""
    log = open_log(tmp_path)
    a = Producer(A)
    log.append_as_leader(a.batch(), 0)
    write_marker(log, a, ControlRecordType.ABORT)
    segment = log.segments[0]
    segment.delete()
    segment.flush()
    assert not list(log.dir.glob(f"*{TXN_INDEX_FILE_SUFFIX}*"))


def test_a_txnindex_of_an_unknown_version_is_rebuilt_on_any_start(tmp_path: Path) -> None:
    """Kafka's TransactionIndex.sanityCheck: an unreadable `.txnindex` is rebuilt from the markers, even on a clean
    start, where nothing else would be recovered; the broker does not refuse to open the log."""
    log = open_log(tmp_path)
    a = Producer(A)
    log.append_as_leader(a.batch(), 0)  # 0..1
    write_marker(log, a, ControlRecordType.ABORT)  # 2
    log.roll()
    log.append_as_leader(build_batch([ProducerRecord(b"later")]), 0)  # 3
    expected = txn_index_path(log).read_bytes()
    log.close()
    txn_index_path(log).write_bytes(struct.pack(">h", 7) + expected[2:])
    reopened = Log.open(log.dir, log.config, time=FakeClock(T0), recovery_point=4, clean_shutdown=True)
    assert txn_index_path(reopened).read_bytes() == expected
    assert reopened.collect_aborted_transactions(0) == [AbortedTxn(A, 0, 2, 3)]
    assert reopened.log_end_offset == 4


def test_recovery_fsyncs_the_txnindex_it_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recovery point moves past what recovery rebuilt, so the rebuilt `.txnindex` reaches the disk first."""
    log = open_log(tmp_path)
    a = Producer(A)
    log.append_as_leader(a.batch(), 0)
    write_marker(log, a, ControlRecordType.ABORT)
    log.flush()
    log.close()
    txn_index_path(log).unlink()
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    Log.open(log.dir, log.config, time=FakeClock(T0), recovery_point=0)
    assert str(txn_index_path(log)) in synced


def test_recovery_that_cuts_a_flushed_segment_cuts_its_txnindex(tmp_path: Path) -> None:
    """A segment below the recovery point whose index fails its check is recovered and, torn, cut: it loses the
    aborts whose markers were in the bytes it lost (else a later abort at a reused offset could not be indexed)."""
    log = open_log(tmp_path)
    a = Producer(A)
    log.append_as_leader(a.batch(), 0)  # 0..1
    marker_at = log.segments[0].size
    write_marker(log, a, ControlRecordType.ABORT)  # 2
    log.roll()
    log.append_as_leader(build_batch([ProducerRecord(b"later")]), 0)  # 3
    log.flush()
    log.close()
    prefix = log.dir / filename_prefix_from_offset(0)
    prefix.with_suffix(".index").unlink()  # the index fails its check: the segment is recovered
    with prefix.with_suffix(".log").open("r+b") as f:
        f.truncate(marker_at + 10)  # and its marker is torn
    reopened = Log.open(log.dir, log.config, time=FakeClock(T0), recovery_point=4)
    assert reopened.log_end_offset == 2
    assert not txn_index_path(reopened).exists()
    assert reopened.collect_aborted_transactions(0) == []
    assert reopened.producer_state.ongoing_transactions == {0: A}


def test_truncating_the_txnindex_keeps_the_files_prefix(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    entries = [AbortedTxn(A, 0, 4, 2), AbortedTxn(B, 2, 5, 6), AbortedTxn(C, 6, 9, 10)]
    for entry in entries:
        index.append(entry)
    index.truncate_to(6)
    assert index.path.read_bytes() == b"".join(e.encode() for e in entries[:2])
    assert TransactionIndex(index.path, 0).entries == tuple(entries[:2])


# ---------------------------------------------------------------------------- snapshots and restarts


def test_a_snapshot_keeps_each_open_transaction_for_a_restarted_leader(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a, b = Producer(A), Producer(B)
    log.append_as_leader(a.batch(), 0)  # 0..1
    log.append_as_leader(b.batch(), 0)  # 2..3
    write_marker(log, b, ControlRecordType.COMMIT)  # 4
    log.close()
    [snapshot] = log.dir.glob("*.snapshot")
    assert {e.producer_id: e.current_txn_first_offset for e in read_snapshot(snapshot)} == {A: 0, B: -1}
    # Kafka's layout: currentTxnFirstOffset is each entry's last int64.
    raw = snapshot.read_bytes()
    assert struct.unpack_from(">q", raw, 10 + 46 - 8)[0] == 0
    reopened = Log.open(log.dir, log.config, time=FakeClock(T0), clean_shutdown=True, recovery_point=5)
    assert reopened.producer_state.ongoing_transactions == {0: A}
    assert reopened.last_stable_offset(high_watermark=5) == 0
    write_marker(reopened, a, ControlRecordType.ABORT)  # 5
    assert reopened.collect_aborted_transactions(0) == [AbortedTxn(A, 0, 5, 6)]
    assert reopened.last_stable_offset(high_watermark=6) == 6


def test_a_producer_with_an_open_transaction_never_expires(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    log = Log.open(tmp_path / "orders-0", LogConfig(), time=clock, producer_id_expiration_ms=1_000)
    a, c = Producer(A), Producer(C)
    log.append_as_leader(a.batch(), 0)
    log.append_as_leader(c.batch(transactional=False), 0)
    log.remove_expired_producers(T0 + 5_000)
    assert set(log.producer_state.active_producers) == {A}


# ---------------------------------------------------------------------------- what is refused


def test_a_plain_batch_from_a_producer_with_an_open_transaction_is_invalid_txn_state(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = Producer(A)
    log.append_as_leader(a.batch(), 0)
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(a.batch(transactional=False), 0)
    assert err.value.code is ErrorCode.INVALID_TXN_STATE
    assert log.log_end_offset == 2


def test_a_marker_from_an_older_coordinator_or_producer_epoch_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = Producer(A, epoch=1)
    log.append_as_leader(a.batch(), 0)
    write_marker(log, a, ControlRecordType.COMMIT, coordinator_epoch=5)
    log.append_as_leader(a.batch(), 0)
    with pytest.raises(KafkaError) as err:
        write_marker(log, a, ControlRecordType.COMMIT, coordinator_epoch=4)
    assert err.value.code is ErrorCode.TRANSACTION_COORDINATOR_FENCED
    stale = Producer(A, epoch=0)
    with pytest.raises(KafkaError) as err:
        write_marker(log, stale, ControlRecordType.ABORT, coordinator_epoch=5)
    assert err.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.producer_state.ongoing_transactions == {3: A}


def test_a_coordinators_transactional_batches_are_checked_for_their_epoch_not_their_sequence(tmp_path: Path) -> None:
    """The group coordinator writes each TxnOffsetCommit as a transactional batch of sequence 0 (as Kafka's
    storeOffsets): the second is no duplicate of the first, the transaction is open from the first, and a batch
    of an older producer epoch is INVALID_PRODUCER_EPOCH."""
    log = open_log(tmp_path)

    def offsets_batch(epoch: int) -> bytes:
        return build_batch([ProducerRecord(b"offset", b"key")], producer_id=A, producer_epoch=epoch,
                           base_sequence=0, is_transactional=True, now_ms=T0)

    assert log.append_as_leader(offsets_batch(1), 0, origin=AppendOrigin.COORDINATOR).first_offset == 0
    second = log.append_as_leader(offsets_batch(1), 0, origin=AppendOrigin.COORDINATOR)
    assert (second.first_offset, second.duplicate) == (1, False)
    assert log.producer_state.ongoing_transactions == {0: A}
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(offsets_batch(0), 0, origin=AppendOrigin.COORDINATOR)
    assert err.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
    write_marker(log, Producer(A, epoch=1), ControlRecordType.COMMIT)
    assert log.producer_state.ongoing_transactions == {}
    assert log.log_end_offset == 3


def test_a_follower_applies_the_leaders_markers_and_indexes_its_aborts(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    a = Producer(A)
    leader.append_as_leader(a.batch(), 0)
    write_marker(leader, a, ControlRecordType.ABORT)
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(leader.read(0, 1 << 20).records.read())
    assert follower.collect_aborted_transactions(0) == [AbortedTxn(A, 0, 2, 3)]
    assert follower.last_stable_offset(high_watermark=3) == 3
    assert [b.header.is_control for b in iter_batches(follower.read(0, 1 << 20).records.read())] == [False, True]


def test_a_standalone_producer_state_replays_markers(tmp_path: Path) -> None:
    psm = ProducerStateManager(TopicPartition("orders", 0), tmp_path)
    a = Producer(A)
    data = a.batch()
    header = parse_header(data)
    assert psm.update(header) is None
    marker_bytes = a.marker(ControlRecordType.ABORT)
    marker_header = parse_header(marker_bytes)._replace(base_offset=2)
    aborted = psm.update(marker_header, read_end_txn_marker(marker_bytes, 0, marker_header))
    assert aborted == AbortedTxn(A, 0, 2, 3)


def test_a_marker_stays_uncompressed_on_a_topic_with_a_compression_type(tmp_path: Path) -> None:
    """Kafka's LogValidator: "Do not compress control records unless they are written compressed"; a client's
    transactional batch is recompressed as any other."""
    log = Log.open(tmp_path / "orders-0", LogConfig(compression_type="gzip"), time=FakeClock(T0))
    a = Producer(A)
    log.append_as_leader(a.batch(), 0)
    write_marker(log, a, ControlRecordType.ABORT)
    batches = list(iter_batches(log.read(0, 1 << 20).records.read()))
    assert [(b.header.is_control, b.header.compression.name) for b in batches] == [(False, "GZIP"), (True, "NONE")]
    assert log.collect_aborted_transactions(0) == [AbortedTxn(A, 0, 2, 3)]

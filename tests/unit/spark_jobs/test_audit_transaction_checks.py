"""The audit's transaction checks on rows built in memory (`.txnindex` against ABORT markers, transactions left
without a marker, open transactions reported, replicas' aborted ranges, aborted records in compacted
partitions), and what the data source reads of transactions from a real log dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.config.log_config import LogConfig
from broker.log.log import AppendOrigin
from broker.log.manager import LogManager
from common.record import ControlRecordType, ProducerRecord, build_batch, build_end_txn_marker
from proto.types import TopicPartition
from spark_jobs import checks
from spark_jobs.checks import replicas_of
from spark_jobs.log_source import ReplicaDir, batch_rows, read_replica
from spark_jobs.report import format_table, report_json, summarize
from tests.unit.spark_jobs.test_audit_checks import batch, compacted, evidence, keyed, replica_row

SEGMENT = "00000000000000000000.log"
TXN_INDEX = "00000000000000000000.txnindex"


def txn(base: int, count: int = 1, *, pid: int = 7, epoch: int = 0, broker: int = 1,
        transactional: bool = True) -> dict[str, Any]:
    row = batch(base, count, broker=broker, pid=pid, seq=base)
    row.update(is_transactional=transactional, producer_epoch=epoch)
    return row


def marker(offset: int, pid: int = 7, control_type: str = "ABORT", *, epoch: int = 0,
           broker: int = 1) -> dict[str, Any]:
    row = batch(offset, 1, broker=broker, pid=pid)
    row.update(is_transactional=True, is_control=True, control_type=control_type, producer_epoch=epoch)
    return row


def entry(pid: int, first: int, last: int, slot: int = 0, file: str = TXN_INDEX) -> dict[str, Any]:
    return {"file": file, "slot": slot, "producer_id": pid, "first_offset": first, "last_offset": last,
            "last_stable_offset": last + 1}


def log_of(broker: int = 1) -> list[dict[str, Any]]:
    """Offsets 0-7: producer 7 aborts 1-2 (marker 4) around producer 8's committed 3 (marker 5); plain 6-7."""
    return [batch(0, 1, broker=broker), txn(1, 2, broker=broker), txn(3, pid=8, broker=broker),
            marker(4, broker=broker), marker(5, 8, "COMMIT", broker=broker), batch(6, 2, broker=broker)]


def one(rows: list[dict[str, Any]], txn_index: list[dict[str, Any]], **extra: Any) -> checks.Replica:
    (found,) = replicas_of(rows, [replica_row(hw=8, txn_index=txn_index, **extra)])
    return found


def test_a_txnindex_matching_its_abort_markers_is_clean_on_every_replica() -> None:
    rows = [r for b in (1, 2, 3) for r in log_of(b)]
    replicas = replicas_of(rows, [replica_row(b, hw=8, txn_index=[entry(7, 1, 4)]) for b in (1, 2, 3)])
    assert checks.audit_partition(replicas) == []
    assert summarize(replicas, []).open_transactions == []


def test_an_abort_marker_without_its_entry_and_an_entry_without_its_marker() -> None:
    assert evidence(list(checks.txn_index(one(log_of(), [])))) == [("txn_index_mismatch", 1, SEGMENT, 200, 4, 4)]
    # A flipped producer id: the marker lacks its entry and the entry names no marker.
    findings = list(checks.txn_index(one(log_of(), [entry(9, 1, 4)])))
    assert evidence(findings) == [("txn_index_mismatch", 1, SEGMENT, 200, 4, 4),
                                  ("txn_index_mismatch", 1, TXN_INDEX, None, 1, 4)]
    assert "ABORT marker of producerId 7 at offset 4 has no entry in" in findings[0].detail
    assert "entry 0 (producerId 9, firstOffset 1, lastOffset 4) names no ABORT marker" in findings[1].detail


def test_an_entry_with_another_first_offset_than_the_logs_transaction() -> None:
    findings = list(checks.txn_index(one(log_of(), [entry(7, 2, 4)])))
    assert evidence(findings) == [("txn_index_mismatch", 1, SEGMENT, 200, 4, 4)]
    assert "says its transaction starts at offset 2, the log at 1" in findings[0].detail


def test_below_the_log_start_the_first_offset_may_be_earlier_but_not_later() -> None:
    # The log starts at 2 (retention): producer 7's transaction may have begun below it.
    rows = log_of()[2:]
    assert list(checks.txn_index(one(rows, [entry(7, 0, 4)], log_start_offset=2))) == []
    assert list(checks.txn_index(one(rows, [], log_start_offset=2))) == []  # no batch of it left: no entry needed
    assert evidence(list(checks.txn_index(one(rows, [entry(7, 5, 4)], log_start_offset=2)))) == [
        ("txn_index_mismatch", 1, SEGMENT, 200, 4, 4)]


def test_a_transaction_whose_producer_moves_on_without_a_marker() -> None:
    rows = [txn(0), txn(1, epoch=1), marker(2, epoch=1, control_type="COMMIT"), txn(3, pid=8),
            txn(4, pid=8, transactional=False)]
    findings = list(checks.txn_markers(one(rows, [])))
    assert evidence(findings) == [("txn_without_marker", 1, SEGMENT, 50, 1, 1),
                                  ("txn_without_marker", 1, SEGMENT, 200, 4, 4)]
    assert ("producerId 7's transaction from offset 0 (producerEpoch 0) has no marker before its transactional"
            " batch at offset 1 (producerEpoch 1)") in findings[0].detail


def test_transactions_open_at_the_end_are_reported_not_found() -> None:
    rows = [*log_of(), txn(8, pid=9), batch(9, 1), txn(10, pid=7)]
    replicas = replicas_of(rows, [replica_row(hw=11, txn_index=[entry(7, 1, 4)])])
    assert checks.audit_partition(replicas) == []
    summary = summarize(replicas, [])
    assert summary.open_transactions == [{"producer_id": 9, "first_offset": 8}, {"producer_id": 7, "first_offset": 10}]
    assert "  t-0: producerId 9 from offset 8" in format_table([summary])
    report = report_json([summary], ["/d1"], [1], 1.0)
    assert report["status"] == "clean"
    assert report["partitions"][0]["open_transactions"] == summary.open_transactions


def test_a_replica_whose_txnindex_lacks_an_aborted_range_the_others_have() -> None:
    # From offset 2 on (the log start): producer 7's data is below it, so no replica's own check needs the entry;
    # broker 3 is the odd one out.
    rows = [r for b in (1, 2, 3) for r in log_of(b)[2:]]
    replicas = replicas_of(rows, [replica_row(b, hw=8, log_start_offset=2, txn_index=[] if b == 3 else [
        entry(7, 0, 4)]) for b in (1, 2, 3)])
    findings = checks.audit_partition(replicas)
    assert [(f.check, f.broker, f.base_offset, f.last_offset) for f in findings] == [
        ("aborted_txn_divergence", 3, 0, 4)]
    assert "broker 3 lacks producerId 7's from offset 0 to its ABORT marker at 4" in findings[0].detail


def test_aborted_records_are_no_keys_latest_value_in_a_compacted_partition() -> None:
    """Broker 1's cleaner dropped the aborted a=99 (and the marker's transaction is gone); brokers 2 and 3 still
    hold it. Key a's latest value is 1 on all three."""
    def uncleaned(broker: int) -> list[dict[str, Any]]:
        aborted = keyed(1, (b"a", 99), broker=broker, crc=31)
        aborted.update(producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
        return [keyed(0, (b"a", 1), broker=broker, crc=30), aborted, marker(2, broker=broker),
                keyed(3, (b"c", 5), broker=broker, crc=33)]

    cleaned = [keyed(0, (b"a", 1), broker=1, crc=30), keyed(3, (b"c", 5), broker=1, crc=33)]
    rows = cleaned + uncleaned(2) + uncleaned(3)
    replicas = compacted(rows, {1: 4, 2: 4, 3: 4}, {1: 4, 2: None, 3: None})
    for replica in replicas[1:]:
        replica.txn_index = [entry(7, 1, 2)]
    assert checks.audit_partition(replicas) == []


# --------------------------------------------------------------------------- the data source


def test_the_data_source_reads_txnindex_entries_and_marker_types(tmp_path: Path) -> None:
    root = tmp_path / "b7"
    manager = LogManager([root], LogConfig(), broker_id=7)
    manager.startup()
    tp = TopicPartition("orders", 0)
    log = manager.get_or_create_log(tp)
    records = [ProducerRecord(b"v", key=b"k")]
    log.append_as_leader(bytearray(build_batch(records, producer_id=7, producer_epoch=0, base_sequence=0,
                                               is_transactional=True)), 0)
    log.append_as_leader(bytearray(build_batch(records, producer_id=8, producer_epoch=0, base_sequence=0,
                                               is_transactional=True)), 0)
    for pid, control_type in ((7, ControlRecordType.ABORT), (8, ControlRecordType.COMMIT)):
        log.append_as_leader(bytearray(build_end_txn_marker(pid, 0, control_type, 3, 1_000)), 0,
                             origin=AppendOrigin.COORDINATOR)
    manager.write_high_watermarks([(tp, 4)])
    manager.shutdown()
    part = ReplicaDir(7, str(root), "orders", 0)
    row = read_replica(part)
    assert row["problems"] == []  # the .txnindex is a segment file, not an unknown one
    assert row["txn_index"] == [{"file": TXN_INDEX, "slot": 0, "producer_id": 7, "first_offset": 0,
                                 "last_offset": 2, "last_stable_offset": 1}]
    rows = [dict(zip(checks.Batch._fields, r, strict=True)) for r in batch_rows(part, 1 << 20)]
    assert [(r["base_offset"], r["is_control"], r["control_type"]) for r in rows] == [
        (0, False, None), (1, False, None), (2, True, "ABORT"), (3, True, "COMMIT")]
    assert checks.audit_partition(replicas_of(rows, [row])) == []

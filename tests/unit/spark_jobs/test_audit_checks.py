"""The audit's checks on rows built in memory: no Spark, no files."""

from __future__ import annotations

from typing import Any

from spark_jobs import checks
from spark_jobs.checks import Batch, Replica, replicas_of
from spark_jobs.report import format_table, report_json, summarize

SEGMENT = "00000000000000000000.log"
INDEX = "00000000000000000000.index"
TIME_INDEX = "00000000000000000000.timeindex"


def batch(base: int, count: int = 2, *, position: int | None = None, broker: int = 1, epoch: int = 0,
          crc: int | None = None, size: int = 100, max_ts: int | None = None, pid: int = -1, seq: int = -1,
          segment: str = SEGMENT, error: str | None = None, problem: str | None = None) -> dict[str, Any]:
    """A `batches` row; by default batches of 100 bytes back to back, one offset per 50 bytes."""
    return {
        "broker": broker, "log_dir": f"/d{broker}", "topic": "t", "partition": 0, "segment": segment,
        "position": base * 50 if position is None else position, "base_offset": base,
        "last_offset": base + count - 1, "record_count": count, "size": size, "magic": 2,
        "crc": base * 7 if crc is None else crc, "computed_crc": base * 7 if crc is None else crc,
        "partition_leader_epoch": epoch, "codec": "NONE", "timestamp_type": "CreateTime",
        "base_timestamp": 1000 + base, "max_timestamp": 1000 + base + count - 1 if max_ts is None else max_ts,
        "producer_id": pid, "producer_epoch": 0 if pid >= 0 else -1, "base_sequence": seq,
        "is_transactional": False, "is_control": False, "error": error, "problem": problem,
    }


def replica_row(broker: int = 1, hw: int | None = 6, epochs: list[tuple[int, int]] | None = None,
                **extra: Any) -> dict[str, Any]:
    row = {"broker": broker, "log_dir": f"/d{broker}", "topic": "t", "partition": 0, "high_watermark": hw,
           "log_start_offset": 0, "leader_epochs": [{"epoch": e, "start_offset": s} for e, s in epochs or [(0, 0)]],
           "segments": [{"file": SEGMENT, "base_offset": 0, "size": 300}], "offset_index": [], "time_index": [],
           "problems": []}
    row.update(extra)
    return row


def replica(rows: list[dict[str, Any]], **extra: Any) -> Replica:
    (found,) = replicas_of(rows, [replica_row(**extra)])
    return found


def evidence(findings: list[checks.Finding]) -> list[tuple[Any, ...]]:
    return [(f.check, f.broker, f.file, f.position, f.base_offset, f.last_offset) for f in findings]


def clean_log(broker: int = 1) -> list[dict[str, Any]]:
    return [batch(0, broker=broker), batch(2, broker=broker), batch(4, broker=broker)]


def test_a_clean_partition_has_no_findings() -> None:
    rows = [b for broker in (1, 2, 3) for b in clean_log(broker)]
    replicas = replicas_of(rows, [replica_row(b) for b in (1, 2, 3)])
    assert checks.audit_partition(replicas) == []
    summary = summarize(replicas, [])
    assert (summary.replicas, summary.log_start_offset, summary.log_end_offset, summary.records, summary.bytes,
            summary.high_watermark) == ([1, 2, 3], 0, 6, 6, 300, 6)
    assert "t-0              1,2,3     0..6     6        300    6   ok" in format_table([summary])
    report = report_json([summary], ["/d1", "/d2", "/d3"], [1, 2, 3], 1.5)
    assert report["status"] == "clean" and report["totals"]["records"] == 6


def test_invalid_batch_and_invalid_bytes() -> None:
    rows = [batch(0), batch(2, error="batch at position 100 (baseOffset 2) has CRC 0x1, computed 0x2"),
            batch(4, problem="batch at position 200 declares 100 bytes but only 40 remain")]
    findings = list(checks.batch_integrity(replica(rows, segments=[{"file": SEGMENT, "base_offset": 0,
                                                                    "size": 240}])))
    assert evidence(findings) == [("invalid_batch", 1, SEGMENT, 100, 2, 3),
                                  ("invalid_bytes", 1, SEGMENT, 200, None, None)]
    assert findings[1].detail.startswith(f"Found 40 invalid bytes at the end of {SEGMENT}")


def test_non_consecutive_offsets_across_segments() -> None:
    second = "00000000000000000004.log"
    rows = [batch(0), batch(2), batch(5, position=0, segment=second)]
    findings = list(checks.consecutive_offsets(replica(rows)))
    assert evidence(findings) == [("non_consecutive_offsets", 1, second, 0, 5, 6)]
    assert findings[0].detail == f"Non-consecutive offsets in {second}: 3 is followed by 5"


def test_offset_index_entries_must_name_a_batch_start_and_its_last_offset() -> None:
    index = [{"file": INDEX, "slot": 0, "offset": 3, "position": 100},  # right
             {"file": INDEX, "slot": 1, "offset": 4, "position": 200},  # the batch there ends at 5
             {"file": INDEX, "slot": 2, "offset": 9, "position": 250},  # no batch starts there
             {"file": INDEX, "slot": 3, "offset": 8, "position": 260}]  # goes backwards
    findings = list(checks.offset_index(replica(clean_log(), offset_index=index)))
    assert evidence(findings) == [("index_mismatch", 1, INDEX, 200, 4, 4), ("index_mismatch", 1, INDEX, 250, 9, 9),
                                  ("index_not_monotonic", 1, INDEX, 260, 8, 8)]
    assert findings[0].detail.endswith("Index offset: 4, log offset: 5")


def test_time_index_entries_are_the_running_max_where_first_reached() -> None:
    rows = [batch(0, max_ts=50), batch(2, max_ts=40), batch(4, max_ts=60)]
    good = [{"file": TIME_INDEX, "slot": 0, "timestamp": 50, "offset": 1},
            {"file": TIME_INDEX, "slot": 1, "timestamp": 60, "offset": 5}]
    assert list(checks.time_index(replica(rows, time_index=good))) == []
    bad = [{"file": TIME_INDEX, "slot": 0, "timestamp": 50, "offset": 3},  # 50 was reached at offset 1
           {"file": TIME_INDEX, "slot": 1, "timestamp": 45, "offset": 5}]  # not increasing
    findings = list(checks.time_index(replica(rows, time_index=bad)))
    assert evidence(findings) == [("time_index_mismatch", 1, TIME_INDEX, 100, 3, 3),
                                  ("time_index_out_of_order", 1, TIME_INDEX, None, 5, 5)]


def test_leader_epochs_along_offsets_and_in_the_checkpoint() -> None:
    rows = [batch(0, epoch=0), batch(2, epoch=2), batch(4, epoch=1)]
    findings = list(checks.leader_epochs(replica(rows, epochs=[(0, 0), (2, 2)])))
    assert evidence(findings) == [("leader_epoch_decrease", 1, SEGMENT, 200, 4, 5),
                                  ("leader_epoch_checkpoint_mismatch", 1, SEGMENT, 200, 4, 5)]
    # An epoch elected at the log end with nothing written yet is not a mismatch.
    assert list(checks.leader_epochs(replica(clean_log(), epochs=[(0, 0), (3, 6)]))) == []


def test_high_watermark_above_the_log_end() -> None:
    findings = list(checks.high_watermark(replica(clean_log(), hw=9)))
    assert evidence(findings) == [("high_watermark_above_log_end", 1, "replication-offset-checkpoint", None, 6, 9)]


def test_duplicate_idempotent_batch() -> None:
    rows = [batch(0, pid=7, seq=0), batch(2, pid=7, seq=2), batch(4, pid=7, seq=0), batch(6, pid=8, seq=0)]
    findings = list(checks.producer_duplicates(replica(rows)))
    assert evidence(findings) == [("duplicate_producer_batch", 1, SEGMENT, 200, 4, 5)]
    assert "already written at offsets 0-1" in findings[0].detail


def test_the_group_coordinators_transactional_offset_commits_are_not_sequenced() -> None:
    """Each TxnOffsetCommit of a producer is a transactional batch with base sequence 0 (Kafka's
    GroupMetadataManager): in __consumer_offsets that is no duplicate; anywhere else it would be."""
    rows = [{**batch(0, pid=7, seq=0), "is_transactional": True}, {**batch(2, pid=7, seq=0), "is_transactional": True}]
    offsets_topic = [{**row, "topic": "__consumer_offsets"} for row in rows]
    assert list(checks.producer_duplicates(replica(offsets_topic, topic="__consumer_offsets"))) == []
    assert [f.check for f in checks.producer_duplicates(replica(rows))] == ["duplicate_producer_batch"]


def test_first_divergence_below_the_lowest_high_watermark_names_the_odd_replica() -> None:
    rows = [*clean_log(1), batch(0, broker=2), batch(2, broker=2, crc=99), batch(4, broker=2, crc=98)]
    rows += [batch(0, broker=3), batch(2, broker=3)]  # broker 3 lags: its HW is 4
    replicas = replicas_of(rows, [replica_row(1), replica_row(2), replica_row(3, hw=4)])
    findings = list(checks.replica_agreement(replicas))
    assert evidence(findings) == [("replica_divergence", 2, SEGMENT, 100, 2, 3)]
    assert findings[0].detail.startswith("replicas diverge at offset 2 below the high watermark 4: broker 1 has")
    # Above the lowest HW nothing is compared: broker 3 lacking offsets 4-5 is fine.
    replicas = replicas_of(clean_log(1) + clean_log(2) + rows[-2:], [replica_row(1), replica_row(2),
                                                                     replica_row(3, hw=4)])
    assert list(checks.replica_agreement(replicas)) == []


def test_a_missing_batch_below_the_high_watermark() -> None:
    rows = clean_log(1) + clean_log(2) + [batch(0, broker=3), batch(4, broker=3)]
    replicas = replicas_of(rows, [replica_row(b) for b in (1, 2, 3)])
    assert evidence(list(checks.replica_agreement(replicas))) == [("replica_divergence", 3, None, None, 2, 2)]


def test_file_problems_pass_through() -> None:
    problems = [{"check": "unknown_file", "file": "notes.txt", "detail": "unknown file /d1/t-0/notes.txt"}]
    assert evidence(list(checks.file_problems(replica(clean_log(), problems=problems)))) == [
        ("unknown_file", 1, "notes.txt", None, None, None)]


def test_rows_become_replicas_in_log_order() -> None:
    second = "00000000000000000004.log"
    rows = [batch(4, position=0, segment=second), batch(2), batch(0)]
    (found,) = replicas_of(rows, [replica_row()])
    assert [b.base_offset for b in found.batches] == [0, 2, 4]
    assert isinstance(found.batches[0], Batch) and found.log_end == 6


# --------------------------------------------------------------------------- compacted partitions


def keyed(base: int, *values: tuple[bytes, int | None], broker: int = 1, offsets: list[int] | None = None,
          crc: int | None = None) -> dict[str, Any]:
    """A compacted batch row: its records' (key, value CRC or None for a tombstone), at base.. or `offsets`."""
    at = offsets or list(range(base, base + len(values)))
    row = batch(base, at[-1] - base + 1, broker=broker, crc=crc)
    row["records"] = [{"offset": o, "key": k, "value_crc": v} for o, (k, v) in zip(at, values, strict=True)]
    return row


def compacted(rows: list[dict[str, Any]], hws: dict[int, int], cleaner: dict[int, int | None]) -> list[Replica]:
    return replicas_of(rows, [replica_row(b, hw, compacted=True, cleaner_offset=cleaner[b]) for b, hw in hws.items()])


def test_gaps_are_allowed_in_a_compacted_log_but_offsets_still_increase() -> None:
    rows = [keyed(0, (b"a", 1)), keyed(3, (b"b", 2)), keyed(3, (b"c", 3))]
    assert list(checks.consecutive_offsets(replica(rows[:2], compacted=True))) == []
    assert evidence(list(checks.consecutive_offsets(replica(rows[:2])))) == [
        ("non_consecutive_offsets", 1, SEGMENT, 150, 3, 3)]
    overlap = list(checks.consecutive_offsets(replica(rows, compacted=True)))
    assert [(f.check, f.base_offset) for f in overlap] == [("non_consecutive_offsets", 3)]
    assert "3 is followed by 3" in overlap[0].detail


def uncleaned(broker: int) -> list[dict[str, Any]]:
    """Offsets 0-5: a=1, b=2, a=3 (a's newest), b tombstone, c=5, then the uncleaned tail d=6 at offset 5."""
    return [keyed(0, (b"a", 1), (b"b", 2), broker=broker, crc=11), keyed(2, (b"a", 3), (b"b", None), broker=broker,
                                                                       crc=12),
            keyed(4, (b"c", 5), broker=broker, crc=13), keyed(5, (b"d", 6), broker=broker, crc=14)]


def cleaned(broker: int) -> list[dict[str, Any]]:
    """The same log after a cleaning up to offset 5 that dropped a=1, b=2 and (retention passed) b's tombstone."""
    return [keyed(2, (b"a", 3), broker=broker, crc=21), keyed(4, (b"c", 5), broker=broker, crc=22),
            keyed(5, (b"d", 6), broker=broker, crc=14)]


def test_compacted_replicas_cleaned_to_different_points_agree() -> None:
    rows = cleaned(1) + uncleaned(2) + uncleaned(3)
    replicas = compacted(rows, {1: 6, 2: 6, 3: 6}, {1: 5, 2: None, 3: 3})
    assert checks.audit_partition(replicas) == []
    # Without knowing the partition is compacted, the same rows are divergence and gaps.
    plain = replicas_of(rows, [replica_row(b) for b in (1, 2, 3)])
    assert {f.check for f in checks.audit_partition(plain)} == {"replica_divergence", "non_consecutive_offsets"}


def test_a_replica_with_another_latest_value_for_a_key_is_named() -> None:
    odd = cleaned(1)
    odd[0] = keyed(2, (b"a", 99), broker=1, crc=21)
    replicas = compacted(odd + uncleaned(2) + uncleaned(3), {1: 6, 2: 6, 3: 6}, {1: 5, 2: None, 3: None})
    findings = list(checks.replica_agreement(replicas))
    assert [(f.check, f.broker, f.base_offset) for f in findings] == [("replica_divergence", 1, 2)]
    assert "latest value of key b'a' below the cleaned offset 5" in findings[0].detail
    assert "broker 1 has offset 2 value crc 99; broker 2 has offset 2 value crc 3" in findings[0].detail


def test_a_key_missing_from_one_compacted_replica_is_named() -> None:
    lost = [r for r in cleaned(1) if r["base_offset"] != 4]
    replicas = compacted(lost + uncleaned(2) + uncleaned(3), {1: 6, 2: 6, 3: 6}, {1: 5, 2: None, 3: None})
    findings = list(checks.replica_agreement(replicas))
    assert [(f.broker, f.base_offset) for f in findings] == [(1, None)]
    assert "key b'c'" in findings[0].detail and "broker 1 has no live value" in findings[0].detail


def test_the_uncleaned_tail_of_a_compacted_partition_is_compared_byte_for_byte() -> None:
    tail = cleaned(1)
    tail[-1] = keyed(5, (b"d", 6), broker=1, crc=77)
    replicas = compacted(tail + uncleaned(2) + uncleaned(3), {1: 6, 2: 6, 3: 6}, {1: 5, 2: None, 3: None})
    findings = list(checks.replica_agreement(replicas))
    assert [(f.broker, f.base_offset) for f in findings] == [(1, 5)]
    assert "diverge at offset 5" in findings[0].detail


def test_a_replica_behind_the_cleaned_point_is_left_out_of_the_key_comparison() -> None:
    # Broker 3's high watermark (4) is below broker 1's cleaned offset: its keys below 5 may be superseded.
    rows = cleaned(1) + uncleaned(2) + uncleaned(3)[:2]
    replicas = compacted(rows, {1: 6, 2: 6, 3: 4}, {1: 5, 2: None, 3: None})
    assert list(checks.replica_agreement(replicas)) == []

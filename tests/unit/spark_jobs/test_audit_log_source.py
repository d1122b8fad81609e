"""What the data source's executors read from a log dir, without Spark: the plan and the replica rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker.config.log_config import LogConfig
from broker.log.cleaner.algorithm import Cleaner, LogToClean, Throttler
from broker.log.cleaner.offset_map import SkimpyOffsetMap
from broker.log.log import Log
from broker.log.manager import LogManager
from common.record import ProducerRecord, build_batch
from proto.types import TopicPartition
from spark_jobs import checks
from spark_jobs.checks import Batch, Finding, replicas_of
from spark_jobs.log_source import ReplicaDir, batch_rows, plan, read_log_dir, read_replica
from tests.fakes import FakeClock


def _log_dir(root: Path) -> Path:
    manager = LogManager([root], LogConfig(segment_bytes=2000, index_interval_bytes=300), broker_id=7)
    manager.startup()
    log = manager.get_or_create_log(TopicPartition("orders", 1))
    for i in range(20):
        log.append_as_leader(bytearray(build_batch([ProducerRecord(b"v" * 100, key=str(i).encode())] * 2,
                                                   now_ms=1000 + i)), 4)
    manager.write_high_watermarks([(TopicPartition("orders", 1), 30)])
    manager.shutdown()
    return root


def test_plan_lists_partition_dirs_and_the_log_dir(tmp_path: Path) -> None:
    root = _log_dir(tmp_path / "b7")
    (root / "not-a-partition").mkdir()
    (root / "orders-9.abc-delete").mkdir()
    assert plan([str(root)]) == [ReplicaDir(7, str(root)), ReplicaDir(7, str(root), "orders", 1)]


def test_replica_row_has_checkpoints_segments_and_index_entries(tmp_path: Path) -> None:
    root = _log_dir(tmp_path / "b7")
    (root / "orders-1" / "stray.bin").write_bytes(b"?")
    row = read_replica(ReplicaDir(7, str(root), "orders", 1))
    assert (row["broker"], row["topic"], row["partition"], row["high_watermark"]) == (7, "orders", 1, 30)
    assert row["leader_epochs"] == [{"epoch": 4, "start_offset": 0}]
    assert len(row["segments"]) > 1 and row["segments"][0]["base_offset"] == 0
    assert sum(s["size"] for s in row["segments"]) == sum(p.stat().st_size for p in (root / "orders-1").glob("*.log"))
    assert row["offset_index"] and all(e["offset"] > 0 and e["position"] > 0 for e in row["offset_index"])
    assert row["time_index"]
    assert row["problems"] == [{"check": "unknown_file", "file": "stray.bin",
                                "detail": f"unknown file {root / 'orders-1' / 'stray.bin'}"}]


def test_log_dir_row_reports_its_own_files(tmp_path: Path) -> None:
    root = _log_dir(tmp_path / "b7")
    (root / "replication-offset-checkpoint").write_text("0\n1\n")
    (root / "core.dump").write_bytes(b"")
    (root / "meta.properties").unlink()
    problems = read_log_dir(ReplicaDir(None, str(root)))["problems"]
    assert [(p["check"], p["file"]) for p in problems] == [
        ("missing_broker_id", "meta.properties"), ("corrupt_checkpoint", "replication-offset-checkpoint"),
        ("unknown_file", "core.dump")]
    missing = read_log_dir(ReplicaDir(None, str(tmp_path / "nowhere")))["problems"]
    assert [p["check"] for p in missing] == ["unreadable_file"]


def test_compacted_partitions_are_named_or_found_in_a_cleaner_checkpoint(tmp_path: Path) -> None:
    b7, b8 = _log_dir(tmp_path / "b7"), _log_dir(tmp_path / "b8")
    assert [p.compacted for p in plan([str(b7)], ["orders"]) if p.topic] == [True]
    assert [p.compacted for p in plan([str(b7)], ["other"]) if p.topic] == [False]
    # Broker 8's cleaner cleaned orders-1 up to 12: broker 7's replica of it is compacted too.
    (b8 / "cleaner-offset-checkpoint").write_text("0\n1\norders 1 12\n")
    assert [(p.log_dir, p.compacted) for p in plan([str(b7), str(b8)]) if p.topic] == [(str(b7), True), (str(b8), True)]
    assert read_replica(ReplicaDir(8, str(b8), "orders", 1, True))["cleaner_offset"] == 12
    assert read_replica(ReplicaDir(7, str(b7), "orders", 1, True))["cleaner_offset"] is None
    assert read_log_dir(ReplicaDir(8, str(b8)))["problems"] == []


def _compacted_log(root: Path) -> tuple[Log, ReplicaDir]:
    """Nine one-record segments of three keys, the active one empty: the cleaner empties the first group."""
    log = Log.open(root / "table-0", LogConfig(segment_bytes=300, cleanup_policy=("compact",)), time=FakeClock())
    for i in range(9):
        log.append_as_leader(bytearray(build_batch([ProducerRecord(b"v%d" % i, b"k%d" % (i % 3))],
                                                   now_ms=1000 + i)), 0)
        log.roll()
    return log, ReplicaDir(1, str(root), "table", 0, compacted=True)


def _clean(log: Log) -> None:
    Cleaner(0, SkimpyOffsetMap(1 << 16), Throttler(float("inf")), FakeClock()).clean(
        LogToClean(log, 0, log.active_segment.base_offset))


def _index_findings(batch_rows_read: list[tuple[Any, ...]], replica_row: dict[str, Any]) -> list[Finding]:
    (replica,) = replicas_of([Batch(*row)._asdict() for row in batch_rows_read], [replica_row])
    return [f for check in (checks.segment_replaced, checks.offset_index, checks.time_index) for f in check(replica)]


@pytest.mark.parametrize("first", ["indexes", "batches"])
def test_a_segment_the_cleaner_swaps_between_the_audits_two_reads_is_not_a_time_index_mismatch(
        tmp_path: Path, first: str) -> None:
    """The audit reads a partition's batches and its indexes in two Spark tasks: a live broker's cleaner swap
    (Kafka's replaceSegments) between them gave "timestamp mismatch in ...timeindex ... log timestamp: -1, no
    batch ends at offset N" (the old segment's index against the emptied cleaned one). The two generations
    are told apart and the index is reported unchecked, not corrupt."""
    log, part = _compacted_log(tmp_path)
    if first == "indexes":
        replica_row = read_replica(part)
        _clean(log)
        rows = list(batch_rows(part, 1 << 20))
    else:
        rows = list(batch_rows(part, 1 << 20))
        _clean(log)
        replica_row = read_replica(part)
    findings = _index_findings(rows, replica_row)
    assert findings and {f.check for f in findings} == {checks.SEGMENT_REPLACED}, findings
    assert all(f.detail.endswith(" not checked (audit a stopped cluster or a snapshot)") for f in findings)
    if first == "indexes":  # the old first segment's entry at offset 0 against its emptied cleaned self
        assert f"{0:020d}.timeindex" in {f.file for f in findings}
    # Read again, both sides of one generation: the cleaned segments' indexes match their batches.
    assert _index_findings(list(batch_rows(part, 1 << 20)), read_replica(part)) == []
    log.close()

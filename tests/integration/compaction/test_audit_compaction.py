"""The Spark audit on a real RF=3 compacted topic that each broker's log cleaner has cleaned on its own schedule:
clean as written (gaps and replicas no longer byte-identical below the high watermark are what compaction does),
and a replica holding another latest value for a key is named."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from broker.log.checkpoint import OffsetCheckpointFile
from broker.log.dump import scan_log
from broker.log.files import CLEANER_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from client.admin import Admin, NewTopic
from client.producer import Producer
from common.record import ATTRIBUTES_POS, CRC_POS, crc32c, decode_records
from local_cluster.cluster import LocalCluster
from local_cluster.cluster_file import ClusterInfo
from minibroker.cli import main as cli_main
from proto.types import TopicPartition
from spark_jobs.audit import run_audit
from spark_jobs.checks import Finding
from tests.integration.chaos_and_audit import test_audit

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
TOPIC = "table"
TP = TopicPartition(TOPIC, 0)
KEYS = 20
RECORDS = 1500
spark = test_audit.spark  # the audit tests' SparkSession fixture (local[2]), one per module


def minibroker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minibroker.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)


def _checkpoint(log_dir: Path, name: str) -> dict[TopicPartition, int]:
    path = log_dir / name
    return OffsetCheckpointFile(path).read() if path.exists() else {}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[int, Path]]]:
    """(data dir, broker id -> log dir) of a cluster whose three replicas of TP were cleaned, stopped cleanly."""
    data_dir = tmp_path_factory.mktemp("audit-compaction") / "cluster"
    try:
        up = minibroker("cluster", "up", "--data-dir", str(data_dir), "--brokers", "3", "--controllers", "1",
                        "--override", "log.cleaner.backoff.ms=100",
                        "--override", "replica.high.watermark.checkpoint.interval.ms=100")
        assert up.returncode == 0, up.stderr
        info = ClusterInfo.load(data_dir)
        admin = Admin(bootstrap_servers=info.bootstrap_servers)
        admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs={
            "cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"})])
        admin.close()
        # Not idempotent: the cleaner would keep the producer's last batch whole, old values included.
        producer = Producer(bootstrap_servers=info.bootstrap_servers, acks="all", linger_ms=2, batch_size=512,
                            enable_idempotence=False)
        futures = [producer.send(TOPIC, b"v%d" % i, key=b"k%d" % (i % KEYS), partition=0) for i in range(RECORDS)]
        producer.flush(60)
        for future in futures:
            future.get(30)
        producer.close(30)
        log_dirs = {b.id: Path(b.log_dir) for b in info.brokers}
        # Every replica's cleaner has cleaned some of it, and every replica checkpointed the final high watermark.
        deadline = time.monotonic() + 90
        while not all(_checkpoint(d, CLEANER_OFFSET_CHECKPOINT).get(TP, 0) > 0
                      and _checkpoint(d, REPLICATION_OFFSET_CHECKPOINT).get(TP) == RECORDS
                      for d in log_dirs.values()):
            assert time.monotonic() < deadline, {b: (_checkpoint(d, CLEANER_OFFSET_CHECKPOINT),
                                                     _checkpoint(d, REPLICATION_OFFSET_CHECKPOINT))
                                                 for b, d in log_dirs.items()}
            time.sleep(0.2)
        down = minibroker("cluster", "down", "--data-dir", str(data_dir))
        assert down.returncode == 0, down.stderr
        yield data_dir, log_dirs
    finally:
        if ClusterInfo.exists(data_dir):
            LocalCluster(data_dir).down(kill=True)


def audit(spark: SparkSession, log_dirs: dict[int, Path], compacted: tuple[str, ...] = ()) -> list[Finding]:
    summaries = run_audit(spark, [str(d) for d in log_dirs.values()], compacted_topics=compacted)
    return [f for s in summaries for f in s.findings]


def test_a_cleaned_compacted_topic_audits_clean(spark: SparkSession, cluster: tuple[Path, dict[int, Path]],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    data_dir, log_dirs = cluster
    # The cleaners really made gaps: fewer records on disk than offsets.
    on_disk = sum(h.record_count for segment in (log_dirs[1] / f"{TOPIC}-0").glob("*.log")
                  for _, h, data, _ in scan_log(segment) if data is not None)
    assert on_disk < RECORDS
    # Found from the cleaner checkpoints alone, and with the topic named.
    assert audit(spark, log_dirs) == []
    assert cli_main(["audit", "--data-dir", str(data_dir), "--compacted-topics", TOPIC, "--master", "local[2]"]) == 0
    assert "No anomalies." in capsys.readouterr().out


def test_a_replica_with_another_latest_value_is_named(spark: SparkSession, cluster: tuple[Path, dict[int, Path]],
                                                      tmp_path: Path) -> None:
    _, originals = cluster
    log_dirs = {b: tmp_path / f"broker-{b}" for b in originals}
    for broker, log_dir in originals.items():
        shutil.copytree(log_dir, log_dirs[broker])
    # The replica cleaned furthest: in its cleaned section every record is its key's newest below that point.
    broker = max(log_dirs, key=lambda b: _checkpoint(log_dirs[b], CLEANER_OFFSET_CHECKPOINT)[TP])
    cleaned = _checkpoint(log_dirs[broker], CLEANER_OFFSET_CHECKPOINT)[TP]
    segment, position, data, record = next(
        (segment, position, data, records[-1])
        for segment in sorted((log_dirs[broker] / f"{TOPIC}-0").glob("*.log"))
        for position, header, data, _ in scan_log(segment) if data is not None
        for records in [decode_records(data, header)]
        if records and records[-1].offset < cleaned and records[-1].value is not None)
    assert record.value is not None
    # Another value of the same length, and a CRC that matches it: only the value differs.
    batch = bytearray(data)
    at = bytes(batch).rindex(record.value)
    batch[at] = ord("w")
    struct.pack_into(">I", batch, CRC_POS, crc32c(batch[ATTRIBUTES_POS:]))
    with open(segment, "r+b") as f:
        f.seek(position)
        f.write(batch)

    findings = audit(spark, log_dirs)
    assert [(f.check, f.broker, f.topic, f.partition, f.base_offset) for f in findings] == [
        ("replica_divergence", broker, TOPIC, 0, record.offset)]
    assert f"latest value of key {record.key!r}" in findings[0].detail

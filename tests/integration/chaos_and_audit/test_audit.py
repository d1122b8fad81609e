"""The Spark log audit on log dirs written by a real cluster: clean as written, and each kind of damage found.

One `minibroker cluster up` cluster (3 brokers, RF=3, producers with every
codec and an idempotent one) is run once for the module and stopped cleanly;
each test damages its own copy of the log dirs in one way and checks that the
audit reports exactly that damage, at its place, and nothing else. One
SparkSession (local[2]) serves the whole module, the command line's included.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from broker.log.checkpoint import LeaderEpochCheckpointFile, OffsetCheckpointFile
from broker.log.dump import scan_log
from broker.log.index import decode_offset_index, decode_time_index
from client.admin import Admin, NewTopic
from client.producer import Producer
from common.record import BatchHeader, CompressionType, crc32c, patch_base_offset_and_epoch
from local_cluster.cluster import LocalCluster
from local_cluster.cluster_file import ClusterInfo
from minibroker.cli import main as cli_main
from proto.types import TopicPartition
from spark_jobs.audit import main, run_audit, spark_session
from spark_jobs.checks import Finding
from spark_jobs.log_source import FORMAT

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
TOPIC = "audited"
PARTITIONS = 3
CODECS = (None, "gzip", "snappy", "lz4", "zstd")
RECORDS_PER_PRODUCER = 150


def minibroker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minibroker.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO_ROOT)


def _high_watermarks(log_dir: Path) -> dict[TopicPartition, int]:
    return OffsetCheckpointFile(log_dir / "replication-offset-checkpoint").read()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[int, Path], dict[int, int]]]:
    """(data dir, broker id -> log dir, partition -> records) of a cluster that wrote and stopped cleanly."""
    data_dir = tmp_path_factory.mktemp("audit") / "cluster"
    try:
        up = minibroker("cluster", "up", "--data-dir", str(data_dir), "--brokers", "3", "--controllers", "1",
                        "--override", "log.segment.bytes=20000", "--override", "log.index.interval.bytes=1024",
                        "--override", "replica.high.watermark.checkpoint.interval.ms=100")
        assert up.returncode == 0, up.stderr
        info = ClusterInfo.load(data_dir)
        admin = Admin(bootstrap_servers=info.bootstrap_servers)
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
        admin.close()
        counts = dict.fromkeys(range(PARTITIONS), 0)
        # Idempotence off (Kafka 3's default is on) but for the last producer: one producer id on disk.
        settings: list[dict[str, object]] = [{"compression_type": codec, "acks": "all", "enable_idempotence": False}
                                             for codec in CODECS]
        settings.append({"acks": "all", "enable_idempotence": True})
        for n, options in enumerate(settings):
            producer = Producer(bootstrap_servers=info.bootstrap_servers, linger_ms=5, **options)
            futures = [producer.send(TOPIC, value=f"{n}-{i}-".encode().ljust(120, b"v"), key=str(i).encode(),
                                     partition=i % PARTITIONS) for i in range(RECORDS_PER_PRODUCER)]
            producer.flush(60)
            for future in futures:
                counts[future.get(30).partition] += 1
            producer.close(30)
        log_dirs = {b.id: Path(b.log_dir) for b in info.brokers}
        # Followers learn the final high watermark on their next fetch; wait until every replica checkpointed it,
        # so that each damage below is the only difference between replicas.
        expected = {TopicPartition(TOPIC, p): count for p, count in counts.items()}
        deadline = time.monotonic() + 60
        while not all(_high_watermarks(d) == expected for d in log_dirs.values()):
            assert time.monotonic() < deadline, {b: _high_watermarks(d) for b, d in log_dirs.items()}
            time.sleep(0.1)
        down = minibroker("cluster", "down", "--data-dir", str(data_dir))
        assert down.returncode == 0, down.stderr
        yield data_dir, log_dirs, counts
    finally:
        if ClusterInfo.exists(data_dir):
            LocalCluster(data_dir).down(kill=True)


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    session, _ = spark_session("local[2]", tmp_path_factory.mktemp("spark"))
    yield session
    session.stop()


@pytest.fixture
def damaged(cluster: tuple[Path, dict[int, Path], dict[int, int]], tmp_path: Path) -> dict[int, Path]:
    """A copy of the cluster's log dirs, broker id -> log dir, for a test to damage."""
    _, log_dirs, _ = cluster
    copies = {}
    for broker, log_dir in log_dirs.items():
        copies[broker] = tmp_path / f"broker-{broker}"
        shutil.copytree(log_dir, copies[broker])
    return copies


def audit(spark: SparkSession, log_dirs: dict[int, Path]) -> list[Finding]:
    summaries = run_audit(spark, [str(d) for d in log_dirs.values()])
    return [f for s in summaries for f in s.findings]


def where(findings: list[Finding]) -> list[tuple[object, ...]]:
    """The evidence of each finding, without the prose."""
    return sorted((f.check, f.broker, f.topic, f.partition, f.file, f.position, f.base_offset, f.last_offset)
                  for f in findings)


def partition_dir(log_dirs: dict[int, Path], broker: int, partition: int) -> Path:
    return log_dirs[broker] / f"{TOPIC}-{partition}"


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def batches(segment: Path) -> list[tuple[int, BatchHeader]]:
    return [(position, header) for position, header, data, _ in scan_log(segment) if data is not None]


# --------------------------------------------------------------------------- clean


def test_command_line_on_the_clean_cluster(spark: SparkSession, cluster: tuple[Path, dict[int, Path], dict[int, int]],
                                           tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`minibroker audit --data-dir D --output OUT`, as the chaos tooling runs it (in this process: it finds
    the module's SparkSession running and uses it instead of starting a second JVM)."""
    data_dir, _, counts = cluster
    out = tmp_path / "out"
    assert cli_main(["audit", "--data-dir", str(data_dir), "--output", str(out), "--master", "local[2]"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["TOPIC-PARTITION", "REPLICAS", "OFFSETS", "RECORDS", "BYTES", "HW", "STATUS"]
    for p, count in counts.items():
        row = next(line.split() for line in lines if line.startswith(f"{TOPIC}-{p} "))
        assert row[1:4] == ["1,2,3", f"0..{count}", str(count)] and row[5:] == [str(count), "ok"]
    assert "No anomalies." in lines
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "clean" and report["brokers"] == [1, 2, 3] and report["anomalies"] == []
    assert report["totals"]["records"] == sum(counts.values()) and report["totals"]["partitions"] == PARTITIONS
    assert {(p["topic"], p["partition"], p["high_watermark"]) for p in report["partitions"]} == {
        (TOPIC, p, count) for p, count in counts.items()}
    assert pq.read_table(out / "anomalies.parquet").num_rows == 0

    assert cli_main(["audit", "--log-dirs", str(tmp_path / "nowhere")]) == 2
    assert f"no such log dir: {tmp_path / 'nowhere'}" in capsys.readouterr().err
    assert cli_main(["audit", "--data-dir", str(tmp_path)]) == 2
    assert "cluster.json does not exist" in capsys.readouterr().err


def test_batch_and_record_rows_for_sql(spark: SparkSession,
                                       cluster: tuple[Path, dict[int, Path], dict[int, int]]) -> None:
    _, log_dirs, counts = cluster
    paths = ",".join(str(d) for d in log_dirs.values())
    for rows in ("batches", "records"):
        spark.read.format(FORMAT).option("paths", paths).option("rows", rows).load().createOrReplaceTempView(rows)
    sql = spark.sql
    codecs = {r.codec for r in sql("SELECT DISTINCT codec FROM batches").collect()}
    assert codecs == {"NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD"}
    assert sql("SELECT count(*) FROM batches WHERE crc != computed_crc OR problem IS NOT NULL").first()[0] == 0
    assert sql("SELECT count(DISTINCT producer_id) FROM batches WHERE producer_id >= 0").first()[0] == 1
    per_replica = sql("SELECT broker, partition, count(*) AS n, min(offset) AS lo, max(offset) AS hi,"
                      " min(value_size) AS v FROM records GROUP BY broker, partition").collect()
    assert {(r.broker, r.partition, r.n, r.lo, r.hi, r.v) for r in per_replica} == {
        (b, p, count, 0, count - 1, 120) for b in (1, 2, 3) for p, count in counts.items()}


# --------------------------------------------------------------------------- damage


def test_flipped_byte_in_a_batch(spark: SparkSession, damaged: dict[int, Path]) -> None:
    segment = segments(partition_dir(damaged, 2, 0))[0]
    position, header = batches(segment)[2]
    with segment.open("r+b") as f:
        f.seek(position + 70)
        byte = f.read(1)
        f.seek(position + 70)
        f.write(bytes([byte[0] ^ 0xFF]))
    findings = audit(spark, damaged)
    assert where(findings) == [("invalid_batch", 2, TOPIC, 0, segment.name, position, header.base_offset,
                                header.last_offset)]
    assert "has CRC" in findings[0].detail and f"at position {position}" in findings[0].detail


def test_cut_segment(spark: SparkSession, damaged: dict[int, Path],
                     cluster: tuple[Path, dict[int, Path], dict[int, int]]) -> None:
    _, _, counts = cluster
    directory = partition_dir(damaged, 3, 1)
    segment = segments(directory)[-1]
    position, header = batches(segment)[-1]
    os.truncate(segment, position + 30)
    base = int(segment.stem)
    index = decode_offset_index(segment.with_suffix(".index").read_bytes(), base)
    time_index = decode_time_index(segment.with_suffix(".timeindex").read_bytes(), base)
    # Index entries for the lost batch now point at nothing: reported too, and only those.
    expected = [("invalid_bytes", 3, TOPIC, 1, segment.name, position, None, None),
                ("high_watermark_above_log_end", 3, TOPIC, 1, "replication-offset-checkpoint", None,
                 header.base_offset, counts[1]),
                ("replica_divergence", 3, TOPIC, 1, None, None, header.base_offset, header.base_offset)]
    expected += [("index_mismatch", 3, TOPIC, 1, segment.with_suffix(".index").name, e.position, e.offset, e.offset)
                 for e in index if e.position >= position]
    expected += [("time_index_mismatch", 3, TOPIC, 1, segment.with_suffix(".timeindex").name, None, e.offset,
                  e.offset) for e in time_index if e.offset >= header.base_offset]
    findings = audit(spark, damaged)
    assert where(findings) == sorted(expected)
    cut = next(f for f in findings if f.check == "invalid_bytes")
    assert cut.detail.startswith(f"Found 30 invalid bytes at the end of {segment.name}")


def test_shifted_index_entry(spark: SparkSession, damaged: dict[int, Path]) -> None:
    segment = segments(partition_dir(damaged, 1, 2))[0]
    index_file = segment.with_suffix(".index")
    entries = decode_offset_index(index_file.read_bytes(), int(segment.stem))
    assert len(entries) >= 2
    with index_file.open("r+b") as f:
        f.seek(8 + 4)
        f.write(struct.pack(">i", entries[1].position + 1))
    findings = audit(spark, damaged)
    assert where(findings) == [("index_mismatch", 1, TOPIC, 2, index_file.name, entries[1].position + 1,
                                entries[1].offset, entries[1].offset)]
    assert findings[0].detail.endswith(f"no batch starts at position {entries[1].position + 1}")


def test_replica_diverging_below_the_high_watermark(spark: SparkSession, damaged: dict[int, Path]) -> None:
    segment = segments(partition_dir(damaged, 1, 1))[0]
    position, header = next((p, h) for p, h in batches(segment)[1:] if h.compression == CompressionType.NONE)
    data = bytearray(segment.read_bytes()[position : position + header.size])
    data[-2] ^= 0x01  # the last value byte: another value, and a CRC to match: a valid batch that is not the leader's
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    with segment.open("r+b") as f:
        f.seek(position)
        f.write(data)
    findings = audit(spark, damaged)
    assert where(findings) == [("replica_divergence", 1, TOPIC, 1, segment.name, position, header.base_offset,
                                header.last_offset)]
    assert f"replicas diverge at offset {header.base_offset} below the high watermark" in findings[0].detail


def test_duplicated_producer_batch(spark: SparkSession, damaged: dict[int, Path]) -> None:
    directory = partition_dir(damaged, 2, 0)
    segment, position, header = next((s, p, h) for s in segments(directory) for p, h in batches(s)
                                     if h.producer_id >= 0)
    duplicate = bytearray(segment.read_bytes()[position : position + header.size])
    last = segments(directory)[-1]
    log_end = batches(last)[-1][1].next_offset
    # Written as the latest leader would have: at the log end, stamped with its epoch.
    epoch = LeaderEpochCheckpointFile(directory / "leader-epoch-checkpoint").read()[-1].epoch
    patch_base_offset_and_epoch(duplicate, 0, log_end, epoch)
    at = last.stat().st_size
    with last.open("ab") as f:
        f.write(duplicate)
    findings = audit(spark, damaged)
    assert where(findings) == [("duplicate_producer_batch", 2, TOPIC, 0, last.name, at, log_end,
                                log_end + header.record_count - 1)]
    assert f"already written at offsets {header.base_offset}-{header.last_offset}" in findings[0].detail


def test_bad_input_is_reported_not_fatal(spark: SparkSession, damaged: dict[int, Path], tmp_path: Path) -> None:
    (partition_dir(damaged, 1, 0) / "notes.txt").write_text("not a log file")
    (partition_dir(damaged, 3, 2) / "leader-epoch-checkpoint").unlink()
    (damaged[2] / "replication-offset-checkpoint").write_text("0\n5\nnonsense\n")
    out = tmp_path / "out"
    code = main(["--log-dirs", ",".join(str(d) for d in damaged.values()), "--output", str(out)])
    assert code == 1
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "anomalies"
    assert sorted((a["check"], a["broker"], a["topic"], a["partition"], a["file"]) for a in report["anomalies"]) == [
        ("corrupt_checkpoint", 2, None, None, "replication-offset-checkpoint"),
        ("missing_checkpoint", 3, TOPIC, 2, "leader-epoch-checkpoint"),
        ("unknown_file", 1, TOPIC, 0, "notes.txt"),
    ]
    assert pq.read_table(out / "anomalies.parquet").num_rows == 3

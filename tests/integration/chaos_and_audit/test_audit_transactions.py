"""The Spark audit on a real cluster's log dirs holding transactions (issue 25): committed, aborted and one still
open at the end are clean, the open one reported as open; a corrupted `.txnindex` entry is found, on its broker.

A `minibroker cluster up` cluster (3 brokers, RF=3) gets its transactions over the Kafka door
(tests/integration/transaction_wire.py: transactional batches, then WriteTxnMarkers, as a coordinator would),
then stops cleanly; the damage is done to a copy of its log dirs."""

from __future__ import annotations

import json
import shutil
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from broker.log.checkpoint import OffsetCheckpointFile
from broker.log.transaction_index import decode_entries
from local_cluster.cluster import LocalCluster
from local_cluster.cluster_file import ClusterInfo
from minibroker.cli import main as cli_main
from proto.types import TopicPartition
from spark_jobs.audit import run_audit, spark_session
from tests.integration.chaos_and_audit.test_audit import minibroker
from tests.integration.transaction_wire import TransactionWire

pytestmark = pytest.mark.integration

TOPIC = "audited-txns"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[int, Path], int, int]]:
    """(data dir, broker id -> log dir, the aborting producer id, the open transaction's producer id) of a cluster
    that wrote transactions and stopped cleanly."""
    data_dir = tmp_path_factory.mktemp("audit-txns") / "cluster"
    try:
        up = minibroker("cluster", "up", "--data-dir", str(data_dir), "--brokers", "3", "--controllers", "1",
                        "--override", "replica.high.watermark.checkpoint.interval.ms=100")
        assert up.returncode == 0, up.stderr
        info = ClusterInfo.load(data_dir)
        admin = AdminClient({"bootstrap.servers": info.kafka_bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, 3)], operation_timeout=30)[TOPIC].result(timeout=60)
        leader = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].leader
        kafka_address = info.broker(leader).kafka_address
        assert kafka_address is not None
        wire = TransactionWire(kafka_address, TOPIC)
        try:
            aborting, committing, still_open = (wire.init_producer_id() for _ in range(3))
            assert wire.produce([b"plain-0"]) == 0
            assert wire.produce([b"a-0", b"a-1"], aborting) == 1
            assert wire.produce([b"c-0"], committing) == 3
            assert wire.produce([b"a-2"], aborting) == 4
            wire.write_marker(aborting, commit=False)  # 5
            wire.write_marker(committing, commit=True)  # 6
            assert wire.produce([b"a-3"], aborting) == 7  # the same producer's next transaction, aborted too
            wire.write_marker(aborting, commit=False)  # 8
            assert wire.produce([b"o-0"], still_open) == 9
            assert wire.produce([b"plain-1"]) == 10
        finally:
            wire.close()
        log_dirs = {b.id: Path(b.log_dir) for b in info.brokers}
        expected = {TopicPartition(TOPIC, 0): 11}
        deadline = time.monotonic() + 60
        while not all(OffsetCheckpointFile(d / "replication-offset-checkpoint").read() == expected
                      for d in log_dirs.values()):
            assert time.monotonic() < deadline, "every replica's high watermark checkpointed at 11"
            time.sleep(0.1)
        down = minibroker("cluster", "down", "--data-dir", str(data_dir))
        assert down.returncode == 0, down.stderr
        yield data_dir, log_dirs, aborting, still_open
    finally:
        if ClusterInfo.exists(data_dir):
            LocalCluster(data_dir).down(kill=True)


def txn_index(log_dir: Path) -> Path:
    """The partition's one `.txnindex` (the segment holding both ABORT markers: the first marker's timestamp,
    far past the records' own, rolled a segment there)."""
    [index] = (log_dir / f"{TOPIC}-0").glob("*.txnindex")
    return index


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    session, _ = spark_session("local[2]", tmp_path_factory.mktemp("spark"))
    yield session
    session.stop()


def test_committed_aborted_and_open_transactions_are_clean(
        spark: SparkSession, cluster: tuple[Path, dict[int, Path], int, int], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    data_dir, log_dirs, aborting, still_open = cluster
    for log_dir in log_dirs.values():  # both aborts are in their segment's .txnindex, on every replica
        entries = decode_entries(txn_index(log_dir).read_bytes())
        assert [(e.producer_id, e.first_offset, e.last_offset) for e in entries] == [(aborting, 1, 5),
                                                                                     (aborting, 7, 8)]
    out = tmp_path / "out"
    assert cli_main(["audit", "--data-dir", str(data_dir), "--output", str(out), "--master", "local[2]"]) == 0
    printed = capsys.readouterr().out
    assert "No anomalies." in printed
    assert f"  {TOPIC}-0: producerId {still_open} from offset 9" in printed
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "clean"
    assert report["partitions"][0]["open_transactions"] == [{"producer_id": still_open, "first_offset": 9}]


def test_a_corrupted_txnindex_entry_is_found(spark: SparkSession, cluster: tuple[Path, dict[int, Path], int, int],
                                            tmp_path: Path) -> None:
    _, log_dirs, aborting, _ = cluster
    damaged = {}
    for broker, log_dir in log_dirs.items():
        damaged[broker] = tmp_path / f"broker-{broker}"
        shutil.copytree(log_dir, damaged[broker])
    # Broker 2's first entry now says the aborted transaction began at offset 3 (producer 8's committed batch).
    index = txn_index(damaged[2])
    data = bytearray(index.read_bytes())
    struct.pack_into(">q", data, 10, 3)  # version int16, producerId int64, then firstOffset
    index.write_bytes(bytes(data))
    summaries = run_audit(spark, [str(d) for d in damaged.values()])
    findings = sorted((f.check, f.broker, f.file, f.base_offset, f.last_offset)
                      for s in summaries for f in s.findings)
    marker_segment = index.name.replace(".txnindex", ".log")
    # Broker 2 lacks the range the others hold (1 to 5), and its entry contradicts its own log.
    assert findings == [("aborted_txn_divergence", 2, None, 1, 5), ("txn_index_mismatch", 2, marker_segment, 5, 5)]
    mismatch = next(f for s in summaries for f in s.findings if f.check == "txn_index_mismatch")
    assert (f"ABORT marker of producerId {aborting} at offset 5: {index.name} entry 0 says its transaction starts"
            f" at offset 3, the log at 1") in mismatch.detail

"""Log compaction with real processes: a compacted topic created from the command line, cleaned by the
broker's cleaner threads (Kafka's log lines, cleaner-offset-checkpoint, metrics), read back by the consumer
across the gaps; and a broker SIGKILLed at each step of a cleaning that, restarted, has lost nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.admin import NewTopic as KpNewTopic
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from broker.log.cleaner.algorithm import CRASH_AT_ENV
from broker.log.files import CLEANED_FILE_SUFFIX, CLEANER_OFFSET_CHECKPOINT, SWAP_FILE_SUFFIX
from client import Admin, Consumer, NewTopic, Producer, TopicPartition
from common.record import iter_batches
from proto.errors import ErrorCode, KafkaError
from spark_jobs.audit import run_audit
from spark_jobs.checks import Finding
from tests.integration.chaos_and_audit import test_audit
from tests.integration.conftest import REPO_ROOT
from tests.integration.kafka_cluster import start_kafka_cluster
from zk.server import free_port

if TYPE_CHECKING:
    from conftest import BrokerProcess, StartBroker, StartBrokers, StartController, WaitUntil

    from zk.client import KafkaZkClient

pytestmark = pytest.mark.integration
spark = test_audit.spark  # the audit tests' SparkSession fixture (local[2]), one per module

TOPIC = "table"
KEYS = 20
CLEANER_OVERRIDES = {"log.cleaner.backoff.ms": "100"}


def minibroker(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "minibroker.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def dump_segments(partition_dir: Path, dumps: list[str]) -> bool:
    """dump-log of every segment of a live partition, appended to `dumps`; False when the broker's cleaner swapped
    a listed segment away before dump-log read it (seen in a loaded run: the restarted broker cleans meanwhile)."""
    segments = sorted(partition_dir.glob("*.log"))
    done = subprocess.run([sys.executable, "-m", "minibroker.cli", "dump-log", "--files",
                           ",".join(str(p) for p in segments)], capture_output=True, text=True, timeout=60,
                          cwd=REPO_ROOT)
    if done.returncode != 0 and not all(p.exists() for p in segments):
        return False
    assert done.returncode == 0, done.stdout + done.stderr
    dumps.append(done.stdout)
    return True


def create_compacted_topic(broker: BrokerProcess, *configs: str) -> None:
    extra = [arg for config in configs for arg in ("--config", config)]
    minibroker("topics", "--bootstrap-server", broker.address, "--create", "--topic", TOPIC, "--partitions", "1",
               "--replication-factor", "1", "--config", "cleanup.policy=compact", "--config", "segment.bytes=2048",
               "--config", "min.cleanable.dirty.ratio=0.01", *extra)


def produce(bootstrap: str, count: int) -> dict[bytes, bytes]:
    """`count` keyed records over KEYS keys, acks=all; the newest acknowledged value of each key."""
    # Batches well under segment.bytes, so the topic has many segments for the cleaner.
    producer = Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=2, batch_size=512)
    futures = [(b"k%d" % (i % KEYS), b"v%d" % i, producer.send(TOPIC, b"v%d" % i, key=b"k%d" % (i % KEYS)))
               for i in range(count)]
    producer.flush(timeout=30)
    newest = {}
    for key, value, future in futures:
        future.get(timeout=30)
        newest[key] = value
    producer.close()
    return newest


def consume_latest(bootstrap: str, end_offset: int) -> tuple[dict[bytes, bytes], list[int]]:
    """The last value of every key read from the beginning up to `end_offset`, and the offsets read."""
    consumer = Consumer(TOPIC, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    latest: dict[bytes, bytes] = {}
    offsets: list[int] = []
    deadline = time.monotonic() + 30
    try:
        while (not offsets or offsets[-1] < end_offset - 1) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    offsets.append(record.offset)
                    latest[record.key] = record.value
    finally:
        consumer.close()
    return latest, offsets


def test_a_compacted_topic_is_cleaned_and_read_across_its_gaps(
        start_broker: StartBroker, start_controller: StartController, wait_until: WaitUntil) -> None:
    metrics_port = free_port()
    broker = start_broker(1, {**CLEANER_OVERRIDES, "metrics.port": str(metrics_port)})
    start_controller()
    create_compacted_topic(broker)
    newest = produce(broker.address, 600)
    with pytest.raises(KafkaError) as refused:
        keyless = Producer(bootstrap_servers=broker.address, acks="all", retries=0)
        try:
            keyless.send(TOPIC, b"no key").get(timeout=30)
        finally:
            keyless.close()
    assert refused.value.code is ErrorCode.INVALID_RECORD
    wait_until(lambda: "Cleaner 0: Beginning cleaning of log table-0" in broker.process.log()
               and "size reduction" in broker.process.log(), timeout=60, message="the cleaner cleaned table-0")
    checkpoint = broker.log_dir / CLEANER_OFFSET_CHECKPOINT
    wait_until(checkpoint.exists, message="cleaner-offset-checkpoint written")
    lines = checkpoint.read_text().splitlines()
    assert lines[:2] == ["0", "1"] and lines[2].startswith(f"{TOPIC} 0 ")
    latest, offsets = consume_latest(broker.address, 600)
    assert latest == newest
    assert offsets == sorted(set(offsets)) and len(offsets) < 600, "offsets increase, with gaps"
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as response:
        names = {family.name for family in text_string_to_metric_families(response.read().decode())}
    assert {"kafka_log_LogCleanerManager_max_dirty_percent", "kafka_log_LogCleaner_cleaner_recopy_percent",
            "kafka_log_LogCleaner_max_clean_time_secs",
            "kafka_log_LogCleanerManager_uncleanable_partitions_count"} <= names


@pytest.mark.parametrize(("step", "leftover"), [("recopy", CLEANED_FILE_SUFFIX), ("swap", SWAP_FILE_SUFFIX)])
def test_a_broker_killed_at_a_cleaning_step_restarts_with_nothing_lost(
        start_broker: StartBroker, start_controller: StartController, wait_until: WaitUntil,
        monkeypatch: pytest.MonkeyPatch, step: str, leftover: str) -> None:
    monkeypatch.setenv(CRASH_AT_ENV, step)  # test-only: the broker SIGKILLs itself at that step
    broker = start_broker(1, CLEANER_OVERRIDES)
    start_controller()
    # Segments stay uncleanable for min.compaction.lag.ms, so the broker dies after the load was acknowledged.
    create_compacted_topic(broker, "min.compaction.lag.ms=8000")
    newest = produce(broker.address, 600)
    assert broker.process.wait(timeout=60) == -signal.SIGKILL
    partition_dir = broker.log_dir / f"{TOPIC}-0"
    assert any(path.name.endswith(leftover) for path in partition_dir.iterdir())
    monkeypatch.delenv(CRASH_AT_ENV)
    restarted = start_broker(1, CLEANER_OVERRIDES)
    latest, offsets = consume_latest(restarted.address, 600)
    assert latest == newest
    assert offsets == sorted(set(offsets))
    assert not any(path.name.endswith((CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)) for path in partition_dir.iterdir())
    dumps: list[str] = []
    wait_until(lambda: dump_segments(partition_dir, dumps), message="a dump-log of every segment")
    dump = dumps[-1]
    assert "isvalid: false" not in dump and "corrupt" not in dump.lower() and "invalid bytes" not in dump
    wait_until(lambda: "size reduction" in restarted.process.log(), timeout=60,
               message="the restarted broker cleans the log")


REPLICATION_OVERRIDES = {
    **CLEANER_OVERRIDES,
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "replica.socket.timeout.ms": "3000",
}


def latest_on_disk(partition_dir: Path) -> dict[bytes, int] | None:
    """Each key's newest value index (`v<i>`) in a replica's segment files; None while they are being swapped."""
    latest: dict[bytes, int] = {}
    try:
        for segment in sorted(partition_dir.glob("*.log")):
            for batch in iter_batches(segment.read_bytes(), allow_gaps=True):
                for record in batch.records:
                    assert record.key is not None and record.value is not None
                    latest[record.key] = int(record.value[1:])
    except (OSError, KafkaError):
        return None
    return latest


def spark_audit_findings(spark: SparkSession, log_dirs: list[Path]) -> list[Finding]:
    summaries = run_audit(spark, [str(d) for d in log_dirs])
    audited = [s for s in summaries if s.topic == TOPIC]
    assert [(s.partition, len(s.replicas)) for s in audited] == [(0, len(log_dirs))], "the partition was not audited"
    return [f for s in summaries for f in s.findings]


def test_every_replica_of_a_compacted_topic_keeps_each_keys_newest_acknowledged_value(
        spark: SparkSession, start_brokers: StartBrokers, start_broker: StartBroker, start_controller: StartController,
        zk_client: KafkaZkClient, wait_until: WaitUntil) -> None:
    brokers = start_brokers((1, 2, 3), REPLICATION_OVERRIDES)
    start_controller()
    admin = Admin(bootstrap_servers=",".join(b.address for b in brokers.values()))
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs={
            "cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01",
            "min.insync.replicas": "2"})], timeout_ms=30_000)
    finally:
        admin.close()
    tp = TopicPartition(TOPIC, 0)
    wait_until(lambda: (s := zk_client.get_partition_state(tp)) is not None and len(s.isr) == 3)
    acked: dict[bytes, int] = {}
    producer = Producer(bootstrap_servers=",".join(b.address for b in brokers.values()), acks="all",
                        linger_ms=2, batch_size=512, retries=10, request_timeout_ms=5000)
    stop = threading.Event()

    def on_ack(key: bytes, index: int) -> Callable[[object], None]:
        def record(_: object) -> None:
            acked[key] = max(acked.get(key, -1), index)
        return record

    def load() -> None:
        i = 0
        while not stop.is_set():
            key = b"k%d" % (i % KEYS)
            producer.send(TOPIC, b"v%d" % i, key=key).add_callback(on_ack(key, i))
            i += 1
            if i % 50 == 0:
                producer.flush(timeout=30)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    wait_until(lambda: len(acked) == KEYS and min(acked.values()) > 400, timeout=60, message="load acknowledged")
    state = zk_client.get_partition_state(tp)
    assert state is not None
    leader = brokers[state.leader]
    leader.process.signal(signal.SIGKILL)
    leader.process.wait()
    before = dict(acked)
    wait_until(lambda: any(acked.get(k, -1) > v for k, v in before.items()), timeout=60,
               message="acks resume under a new leader")
    wait_until(lambda: min(acked.values()) > max(before.values()) + 200, timeout=60, message="load goes on")
    brokers[leader.broker_id] = start_broker(leader.broker_id, REPLICATION_OVERRIDES)
    stop.set()
    thread.join(timeout=60)
    producer.flush(timeout=30)
    producer.close()
    dirs = [b.log_dir / f"{TOPIC}-0" for b in brokers.values()]

    def replicas_agree() -> bool:
        views = [latest_on_disk(d) for d in dirs]
        return all(v is not None and v == views[0] for v in views) and all(
            views[0] is not None and views[0].get(k, -1) >= index for k, index in acked.items())

    wait_until(replicas_agree, timeout=90, message="every replica holds each key's newest acknowledged value")
    wait_until(lambda: all("size reduction" in b.process.log() for b in brokers.values()), timeout=60,
               message="every replica cleaned its log")

    # And the Spark audit, over the stopped brokers' log dirs, finds each replica consistent: compacted replicas
    # compared by latest value per key below the cleaned point, byte for byte above it.
    for b in brokers.values():
        b.process.signal(signal.SIGTERM)
    for b in brokers.values():
        assert b.process.wait(timeout=60) == 0
    assert spark_audit_findings(spark, [b.log_dir for b in brokers.values()]) == []


def test_kafka_python_creates_describes_and_reads_a_compacted_topic(
        start_brokers: StartBrokers, start_controller: StartController, wait_until: WaitUntil) -> None:
    cluster = start_kafka_cluster(start_brokers, start_controller, CLEANER_OVERRIDES, broker_ids=(1,))
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([KpNewTopic(TOPIC, 1, 1, topic_configs={
            "cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"})],
            timeout_ms=30_000)
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
        assert described["topic"][TOPIC]["cleanup.policy"]["value"] == "compact"
    finally:
        admin.close()
    newest = produce(cluster.grpc_bootstrap, 600)
    broker = next(iter(cluster.brokers.values()))
    wait_until(lambda: "size reduction" in broker.process.log(), timeout=60, message="the cleaner cleaned")
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    try:
        records = list(consumer)
    finally:
        consumer.close()
    assert {r.key: r.value for r in records} == newest
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)) and offsets[-1] == 599 and len(offsets) < 600

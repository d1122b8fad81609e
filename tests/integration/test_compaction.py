"""Log compaction with real processes: a compacted topic created from the command line, cleaned by the
broker's cleaner threads (Kafka's log lines, cleaner-offset-checkpoint, metrics), read back by the consumer
across the gaps; and a broker SIGKILLed at each step of a cleaning that, restarted, has lost nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from typing import TYPE_CHECKING

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.log.cleaner import CRASH_AT_ENV
from broker.log.files import CLEANED_FILE_SUFFIX, CLEANER_OFFSET_CHECKPOINT, SWAP_FILE_SUFFIX
from client import Consumer, Producer
from proto.errors import ErrorCode, KafkaError
from tests.integration.conftest import REPO_ROOT
from zk.server import free_port

if TYPE_CHECKING:
    from conftest import BrokerProcess, StartBroker, StartController, WaitUntil

pytestmark = pytest.mark.integration

TOPIC = "table"
KEYS = 20
CLEANER_OVERRIDES = {"log.cleaner.backoff.ms": "100"}


def minibroker(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "minibroker.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def create_compacted_topic(broker: BrokerProcess) -> None:
    minibroker("topics", "--bootstrap-server", broker.address, "--create", "--topic", TOPIC, "--partitions", "1",
               "--replication-factor", "1", "--config", "cleanup.policy=compact", "--config", "segment.bytes=2048",
               "--config", "min.cleanable.dirty.ratio=0.01")


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
    create_compacted_topic(broker)
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
    segments = ",".join(str(p) for p in sorted(partition_dir.glob("*.log")))
    dump = minibroker("dump-log", "--files", segments)
    assert "isvalid: false" not in dump and "corrupt" not in dump.lower() and "invalid bytes" not in dump
    wait_until(lambda: "size reduction" in restarted.process.log(), timeout=60,
               message="the restarted broker cleans the log")

"""`minibroker pipeline --exactly-once` under faults (issue 29): each window's count reaches read_committed readers
exactly once although a partition leader is SIGKILLed and the Spark driver is SIGKILLed mid-micro-batch and
started again on its checkpoint.

Real parts: three brokers and a controller (every topic replicated three times, min.insync.replicas 2), the
pipeline as a user runs it (`python -m minibroker.cli pipeline`, its own Spark driver in local mode), clicks
produced and results read with confluent-kafka. The driver runs in a process group of its own and is killed
as a whole (the Python driver and its JVM), as a machine would lose it; PySpark's worker daemons, in groups
of their own, end their workers when the JVM's pipe to them closes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from local_cluster.cluster import LocalCluster
from tests.integration.conftest import REPO_ROOT
from tests.integration.spark.test_spark_source import read_to_end

pytestmark = pytest.mark.integration

INPUT, OUTPUT = "clicks", "clicks-per-window"
PARTITIONS = 2
KEYS = ("a", "b", "c")
BASE_S = 1_700_000_000  # a multiple of the 10 s window
OVERRIDES = [
    "transaction.state.log.num.partitions=3",
    "offsets.topic.num.partitions=3",
    # The ledger topic the sink's driver creates (replication factor -1) is replicated as the data is.
    "default.replication.factor=3",
    "min.insync.replicas=2",
    # The killed leader's partitions move once its ZooKeeper session expires: seconds, not Kafka's 18.
    "zookeeper.session.timeout.ms=6000",
]
STARTUP_TIMEOUT_S = 180.0  # a loaded 2-core machine starts three brokers slowly
Result = tuple[bytes | None, bytes | None]  # the record key, the window's JSON


class Driver:
    """`minibroker pipeline` in a process group of its own: SIGKILLing the group kills the Python driver and
    its JVM at once."""

    def __init__(self, argv: list[str], log: IO[bytes]) -> None:
        self.popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
                                      env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, start_new_session=True)

    def kill(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.popen.wait(30)


@pytest.fixture
def drivers(tmp_path: Path) -> Iterator[Callable[[list[str]], Driver]]:
    started: list[Driver] = []
    with (tmp_path / "pipeline.log").open("ab") as log:
        def start(args: list[str]) -> Driver:
            driver = Driver([sys.executable, "-m", "minibroker.cli", "pipeline", *args], log)
            started.append(driver)
            return driver

        try:
            yield start
        finally:
            for driver in started:
                driver.kill()


def clicks(first_window: int, last_window: int) -> list[tuple[str, int]]:
    """Each key clicked 1 to 3 times in each window (how often depends on the window): (key, time in ms)."""
    return [(key, (BASE_S + window * 10 + 1 + n) * 1000)
            for window in range(first_window, last_window + 1) for i, key in enumerate(KEYS)
            for n in range(1 + (window + i) % 3)]


def counted(events: list[tuple[str, int]]) -> set[Result]:
    """What the pipeline writes for these clicks: one record per (window, key), the count in its JSON."""
    counts = Counter((key, time_ms // 10_000 * 10) for key, time_ms in events)
    results: set[Result] = set()
    for (key, start_s), count in counts.items():
        start = datetime.fromtimestamp(start_s, UTC)
        window = (f'{{"window_start":"{start:%Y-%m-%dT%H:%M:%S.000Z}",'
                  f'"window_end":"{start + timedelta(seconds=10):%Y-%m-%dT%H:%M:%S.000Z}",'
                  f'"key":"{key}","count":{count}}}')
        results.add((key.encode(), window.encode()))
    return results


def produce(bootstrap: str, events: list[tuple[str, int]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, (key, time_ms) in enumerate(events):
        producer.produce(INPUT, b"click", key.encode(), partition=i % PARTITIONS, timestamp=time_ms)
    assert producer.flush(60) == 0


def ends(bootstrap: str, isolation: str) -> list[int]:
    """ListOffsets(latest) of each output partition: the last stable offset for read_committed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": isolation})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(OUTPUT, p), timeout=30)[1] for p in range(PARTITIONS)]
    finally:
        consumer.close()


def read_committed(bootstrap: str) -> list[Result]:
    """Every output record a read_committed consumer reads, up to each partition's last stable offset."""
    return [(m.key(), m.value()) for m in read_to_end(bootstrap, OUTPUT, PARTITIONS)]


def wait_for(condition: Callable[[], bool], what: str, driver: Driver | None = None, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert driver is None or driver.popen.poll() is None, f"the pipeline exited ({driver.popen.returncode})"
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(0.05)  # a condition polled under a deadline


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return int(metadata.topics[topic].partitions[partition].leader)


def batches(checkpoint: Path, log: str) -> set[int]:
    """The micro-batch ids in the checkpoint's offset log (planned) or commit log (done)."""
    folder = checkpoint / log
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()


def planned_end(checkpoint: Path, batch: int) -> int:
    """How many input records a micro-batch's plan reaches: its offset log entry's last line is the source's
    offsets, {"clicks": {"0": n, "1": m}} (Spark writes the file whole, by a rename)."""
    offsets = json.loads((checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1])
    return sum(offsets[INPUT].values())


# Two Spark drivers' start-ups and a few micro-batches, each with a transaction per task: 105 s on a 2-core
# machine at load average 7 to 11; at load average 20 to 30 a run went past the suite's 300 s default.
@pytest.mark.timeout(900)
def test_each_window_is_read_once_through_a_killed_leader_and_a_killed_driver(
        data_dir: Path, drivers: Callable[[list[str]], Driver], tmp_path: Path) -> None:
    cluster = LocalCluster(data_dir)
    bootstrap = cluster.up(brokers=3, controllers=1, overrides=OVERRIDES,
                           timeout=STARTUP_TIMEOUT_S).kafka_bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 3) for topic in (INPUT, OUTPUT)]).values():
        future.result(60)
    checkpoint = tmp_path / "checkpoint"
    args = ["--bootstrap-server", bootstrap, "--input", INPUT, "--output", OUTPUT,
            "--checkpoint", str(checkpoint), "--window", "10 seconds", "--watermark-delay", "0 seconds",
            "--trigger-interval", "1 second", "--master", "local[2]", "--exactly-once"]

    def committed_results() -> set[Result]:
        return set(read_committed(bootstrap))

    # Windows 0 to 3: the watermark (the latest click, in window 3) passes the end of windows 0 to 2.
    first = drivers(args)
    produce(bootstrap, clicks(0, 3))
    wait_for(lambda: counted(clicks(0, 2)) <= committed_results(), "windows 0 to 2", first)

    # The leader of an output partition dies; the pipeline goes on with the other two replicas.
    victim = leader_of(bootstrap, OUTPUT, 0)
    cluster.send_signal(f"broker-{victim}", signal.SIGKILL)
    produce(bootstrap, clicks(4, 7))

    # The driver dies in the middle of the micro-batch that writes windows 3 to 6: the one after the batch
    # that read the new clicks (the watermark those moved applies from the next batch on, a batch without new
    # data). Its offsets are logged, its commit is not: the driver started again runs it again.
    read = len(clicks(0, 7))

    def mid_batch() -> bool:
        planned, done = batches(checkpoint, "offsets"), batches(checkpoint, "commits")
        return any(n not in done and n - 1 in planned and planned_end(checkpoint, n - 1) == read
                   for n in planned)

    wait_for(mid_batch, "a micro-batch under way", first)
    first.kill()
    replayed = max(batches(checkpoint, "offsets"))
    assert replayed not in batches(checkpoint, "commits")

    # Started again on the same checkpoint, the driver runs that micro-batch again; the broker comes back
    # while it starts. A click in window 11 moves the watermark past window 9's end: every window with
    # clicks is final.
    second = drivers(args)
    cluster.restart_broker(victim, timeout=STARTUP_TIMEOUT_S)
    produce(bootstrap, [*clicks(8, 9), ("z", (BASE_S + 111) * 1000)])
    expected = counted(clicks(0, 9))
    wait_for(lambda: expected <= committed_results(), "windows 0 to 9", second)
    second.kill()
    wait_for(lambda: ends(bootstrap, "read_committed") == ends(bootstrap, "read_uncommitted"),
             "the output's transactions settled (the killed driver's ones abort on transaction.timeout.ms)")

    results = read_committed(bootstrap)
    duplicated = {result: n for result, n in Counter(results).items() if n > 1}
    assert not duplicated, f"results written more than once: {duplicated}"
    assert set(results) == expected

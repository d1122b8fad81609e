"""The console producer and consumer as a user runs them, real processes against real brokers: what they say
when something goes wrong, Ctrl-C, Kafka 3's producer defaults with a frozen follower, headers and snappy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

import pytest

from client import Admin, Consumer, NewTopic, TopicPartition
from common.record import CompressionType, iter_batches
from tests.integration.admin_and_cli.test_cli import REPO_ROOT, minibroker
from tests.integration.replication.test_replication import paused
from zk.client import KafkaZkClient
from zk.server import free_port

if TYPE_CHECKING:
    from conftest import BrokerProcess, StartBrokers, StartController, WaitUntil

pytestmark = pytest.mark.integration

BROKER_OVERRIDES = {
    # Long enough that a frozen follower stays in the ISR (neither lagging nor its ZooKeeper session expired)
    # while a console producer retries and gives up on its records.
    "replica.lag.time.max.ms": "15000",
    "zookeeper.session.timeout.ms": "15000",
    "replica.fetch.wait.max.ms": "200",
    "replica.socket.timeout.ms": "3000",
}


@dataclass
class Cluster:
    brokers: dict[int, BrokerProcess]
    zk: KafkaZkClient

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    def create(self, topic: str, replicas: list[int], configs: dict[str, str] | None = None) -> None:
        admin = Admin(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(topic, replica_assignments={0: replicas}, topic_configs=configs or {})],
                                timeout_ms=30_000)
        finally:
            admin.close()

    def segment(self, broker_id: int, topic: str) -> Path:
        return self.brokers[broker_id].log_dir / f"{topic}-0" / f"{0:020d}.log"

    def isr(self, topic: str) -> list[int]:
        state = self.zk.get_partition_state(TopicPartition(topic, 0))
        return sorted(state.isr) if state is not None else []


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController, zk_client: KafkaZkClient) -> Cluster:
    brokers = start_brokers((1, 2), BROKER_OVERRIDES)
    start_controller()
    return Cluster(brokers, zk_client)


@contextmanager
def console_producer(*args: str, stderr: IO[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """A console producer whose standard input the test writes; SIGKILLed if the test leaves it running.
    Its faulthandler is on, so `exit_code` can have it print every thread's stack when it hangs. It starts with
    SIGINT's default action, as from a terminal: a suite run as a background job (`make test &` from a script)
    ignores SIGINT, every child would inherit that, and the Ctrl-C tests would wait for nothing."""
    process = subprocess.Popen([sys.executable, "-m", "minibroker.cli", "console-producer", *args],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr, cwd=REPO_ROOT,
                               env={**os.environ, "PYTHONFAULTHANDLER": "1"},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)


def exit_code(process: subprocess.Popen[bytes], timeout_s: float, stderr_path: Path) -> int:
    """The process's exit code; if it has not exited within `timeout_s`, a failure showing where each of its
    threads stood (SIGABRT makes faulthandler print them to its stderr)."""
    try:
        return process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        process.wait(30)
        pytest.fail(f"still running {timeout_s:.0f} s later; its stderr and stacks:\n{stderr_path.read_text()}")


def values_in(cluster: Cluster, topic: str, count: int) -> list[bytes]:
    """Every value of partition 0 up to the high watermark, from the beginning."""
    consumer = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (len(got) < count or consumer.poll(timeout_ms=1000)):
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        return got
    finally:
        consumer.close()


def warm_up(cluster: Cluster, topic: str, wait_until: WaitUntil) -> None:
    """Both replicas in the ISR and the follower fetching: an acks=all write completes."""
    wait_until(lambda: cluster.isr(topic) == [1, 2], message=f"{topic}'s full ISR")
    produced = minibroker("console-producer", "--bootstrap-server", cluster.bootstrap, "--topic", topic,
                          stdin="warm-up\n")
    assert produced.returncode == 0, produced.stderr


@pytest.mark.parametrize("when", ["while reading", "after end of input"])
def test_ctrl_c_flushes_in_bounded_time_and_counts_what_was_not_acknowledged(
        cluster: Cluster, wait_until: WaitUntil, tmp_path: Path, when: str) -> None:
    # min.insync.replicas=2 with the follower frozen: no acks=all write can be acknowledged.
    cluster.create("stuck", [1, 2], {"min.insync.replicas": "2"})
    warm_up(cluster, "stuck", wait_until)
    stderr_path = tmp_path / "producer.stderr"
    with paused(cluster.brokers[2]), stderr_path.open("wb") as stderr, console_producer(
            "--bootstrap-server", cluster.bootstrap, "--topic", "stuck",
            "--message-send-max-retries", "2147483647", stderr=stderr) as producer:
        assert producer.stdin is not None
        producer.stdin.write(b"never acknowledged\n")
        producer.stdin.flush()
        if when == "after end of input":
            producer.stdin.close()  # the producer now waits in close() for an answer that cannot come
        wait_until(lambda: b"never acknowledged" in cluster.segment(1, "stuck").read_bytes(),
                   message="the record in the leader's log")
        assert producer.poll() is None
        interrupted = time.monotonic()
        producer.send_signal(signal.SIGINT)
        code = exit_code(producer, 30, stderr_path)
        took = time.monotonic() - interrupted
    err = stderr_path.read_text()
    assert code == 130, err
    assert took < 10, f"Ctrl-C took {took:.1f} s: the close must be bounded by request.timeout.ms (1.5 s)"
    assert "ERROR 1 of 2 records sent were not acknowledged" not in err
    assert "ERROR 1 of 1 records sent were not acknowledged: interrupted" in err, err
    assert "ERROR Error when sending message to topic stuck with key: null, value: 18 bytes with error:" in err


def test_a_record_too_large_is_logged_with_its_key_and_value_sizes() -> None:
    """Kafka's ErrorLoggingCallback names the failed record's key and value lengths; a record refused before
    it is batched (larger than max.request.size, checked before any metadata) said `value: 0 bytes`."""
    produced = minibroker("console-producer", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--topic", "big",
                          "--producer-property", "max.request.size=200", "--property", "parse.key=true",
                          stdin="k" * 5 + "\t" + "v" * 300 + "\n", timeout=60)
    assert produced.returncode == 1
    assert ("ERROR Error when sending message to topic big with key: 5 bytes, value: 300 bytes with error:"
            " MESSAGE_TOO_LARGE") in produced.stderr, produced.stderr


def test_default_console_producer_writes_no_duplicates_while_a_follower_is_frozen(
        cluster: Cluster, wait_until: WaitUntil) -> None:
    cluster.create("once", [1, 2])
    warm_up(cluster, "once", wait_until)
    lines = [f"record-{i}" for i in range(200)]
    with paused(cluster.brokers[2]):
        # acks=all asked for explicitly, as in the issue: each attempt times out in the leader's purgatory
        # (request.timeout.ms 1.5 s) and is retried; idempotence (on by default) makes the retries harmless.
        produced = minibroker("console-producer", "--bootstrap-server", cluster.bootstrap, "--topic", "once",
                              "--request-required-acks", "all", stdin="\n".join(lines) + "\n", timeout=90)
    # Given up after --message-send-max-retries (3) retries, or acknowledged: either way, each record once.
    assert produced.returncode in (0, 1), produced.stderr
    wait_until(lambda: cluster.isr("once") == [1, 2], timeout=60, message="the follower back in the ISR")
    stored = values_in(cluster, "once", 201)
    assert stored == [b"warm-up", *(line.encode() for line in lines)], \
        f"{len(stored)} records stored for 201 sent"


def test_headers_keys_snappy_and_kafka_habits(cluster: Cluster, wait_until: WaitUntil) -> None:
    cluster.create("lines", [1])
    wait_until(lambda: cluster.isr("lines") == [1], message="lines' leader")
    produced = minibroker(
        "console-producer", "--broker-list", cluster.brokers[1].address, "--topic", "lines",
        "--compression-codec", "snappy", "--property", "parse.headers=true", "--property", "parse.key=true",
        "--property", "key.separator=:", "--producer-property", "foo=bar",
        stdin="trace:t1,app:web\tk1:first\nempty:\tk2:second\n")
    assert produced.returncode == 0, produced.stderr
    assert "WARN The configuration 'foo' was supplied but isn't a known config." in produced.stderr
    batches = list(iter_batches(cluster.segment(1, "lines").read_bytes()))
    assert {b.header.compression for b in batches} == {CompressionType.SNAPPY}

    consumed = minibroker(
        "console-consumer", "--bootstrap-server", cluster.bootstrap, "--include", "l.n.s", "--from-beginning",
        "--max-messages", "-1", "--timeout-ms", "3000", "--formatter", "kafka.tools.DefaultMessageFormatter",
        "--property", "print.headers=true", "--property", "print.key=true", "--property", "print.offset=true",
        "--property", "print.partition=true", "--property", "key.separator=|")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [
        "Partition:0|Offset:0|trace:t1,app:web|k1|first",
        "Partition:0|Offset:1|empty:|k2|second",
    ]
    assert "Processed a total of 2 messages" in consumed.stderr


def test_console_consumer_timeout_ms_bounds_the_wait_for_an_unreachable_cluster() -> None:
    """Kafka's console consumer ends after --timeout-ms with no message whether or not a broker answers (its
    poll(timeout) includes the metadata wait): the TimeoutException line, exit 0. It waited
    default.api.timeout.ms (60 s) for the topic's metadata first; the deadline here is half of that."""
    ended = minibroker("console-consumer", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--topic", "t",
                       "--timeout-ms", "2000", timeout=30)
    assert ended.returncode == 0, ended.stderr
    assert ended.stderr.splitlines()[-2:] == [
        "ERROR Error processing message, terminating consumer process: TimeoutException: no message for 2000 ms"
        " (--timeout-ms)", "Processed a total of 0 messages"], ended.stderr


def test_console_consumer_says_what_went_wrong(cluster: Cluster, wait_until: WaitUntil) -> None:
    cluster.create("short", [1])
    wait_until(lambda: cluster.isr("short") == [1], message="short's leader")
    produced = minibroker("console-producer", "--bootstrap-server", cluster.bootstrap, "--topic", "short",
                          stdin="a\nb\n")
    assert produced.returncode == 0, produced.stderr

    def consume(*args: str, bootstrap: str = cluster.bootstrap) -> subprocess.CompletedProcess[str]:
        return minibroker("console-consumer", "--bootstrap-server", bootstrap, *args, timeout=60)

    # Nobody listens there: no --timeout-ms, yet it ends, bounded by default.api.timeout.ms.
    started = time.monotonic()
    unreachable = consume("--topic", "short", "--consumer-property", "default.api.timeout.ms=3000",
                          bootstrap=f"127.0.0.1:{free_port()}")
    assert unreachable.returncode == 1
    assert "Timeout expired while fetching topic metadata after 3000 ms" in unreachable.stderr
    assert time.monotonic() - started < 30

    invalid = consume("--topic", "bad/name", "--timeout-ms", "2000")
    assert invalid.returncode == 1
    assert "ERROR Error processing message, terminating consumer process: INVALID_TOPIC_EXCEPTION" in invalid.stderr

    missing = consume("--topic", "short", "--partition", "5", "--timeout-ms", "2000")
    assert missing.returncode == 1
    assert "partition 5 of topic 'short' does not exist (it has 1 partitions)" in missing.stderr

    past = consume("--topic", "short", "--partition", "0", "--offset", "100", "--timeout-ms", "2000")
    assert "WARN Fetch position offset=100 is out of range for partition short-0 (log start offset 0, log end" \
           " offset 2), resetting offset per auto.offset.reset=latest" in past.stderr
    assert (past.returncode, past.stdout) == (0, "")  # then it waits at the end, as Kafka's does
    strict = consume("--topic", "short", "--partition", "0", "--offset", "100", "--timeout-ms", "2000",
                     "--consumer-property", "auto.offset.reset=none")
    assert strict.returncode == 1 and "OFFSET_OUT_OF_RANGE" in strict.stderr, strict.stderr

    unlimited = consume("--topic", "short", "--from-beginning", "--max-messages", "-1", "--timeout-ms", "2000")
    assert (unlimited.returncode, unlimited.stdout) == (0, "a\nb\n")


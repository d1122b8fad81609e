"""The `minibroker` Spark source and sink in PySpark's local mode against a real cluster, checked with confluent-kafka.

One `minibroker cluster up` cluster (ZooKeeper, a controller, a broker: real processes) and one SparkSession
(local[2]) serve the module; each test has topics of its own. Streaming queries run with Trigger.AvailableNow
(read what is there, stop) unless the test needs a query running while the topic changes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from local_cluster.cluster import LocalCluster
from local_cluster.cluster_file import ClusterInfo
from minibroker.cli import main as cli_main
from spark_jobs.audit import spark_session
from spark_jobs.kafka_ledger import (
    LEDGER_PARTITIONS,
    already_committed,
    ensure_ledger,
    ledger_key,
    ledger_partition,
    read_ledger,
)
from spark_jobs.kafka_source import FORMAT
from tests.integration.transaction_wire import TransactionWire

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
TXN_TOPIC = "spark-txn"
Record = tuple[str, int, int, bytes | None, bytes | None]  # topic, partition, offset, key, value


def minibroker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minibroker.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Kafka listener of a one-broker cluster."""
    data_dir = tmp_path_factory.mktemp("spark-source") / "cluster"
    try:
        up = minibroker("cluster", "up", "--data-dir", str(data_dir), "--brokers", "1", "--controllers", "1")
        assert up.returncode == 0, up.stderr
        yield ClusterInfo.load(data_dir).kafka_bootstrap_servers
    finally:
        if ClusterInfo.exists(data_dir):
            LocalCluster(data_dir).down(kill=True)


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    session, _ = spark_session("local[2]", tmp_path_factory.mktemp("spark"), app_name="minibroker-source-tests")
    yield session
    session.stop()


def admin_call(bootstrap: str, call: str, *args: Any) -> None:
    """An AdminClient call, waited for (the client must outlive its futures)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in getattr(admin, call)(*args).values():
        future.result(30)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin_call(bootstrap, "create_topics", [NewTopic(topic, partitions, 1)])


def produce(bootstrap: str, topic: str, count: int, partitions: int, first: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(first, first + count):
        producer.produce(topic, value=f"value-{i}".encode(), key=f"key-{i % 7}".encode(), partition=i % partitions,
                         headers=[("n", str(i).encode())], timestamp=1_700_000_000_000 + i)
    assert producer.flush(30) == 0


def read_to_end(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed") -> list[Any]:
    """Every message of the topic as confluent-kafka reads it with `isolation`, up to each partition's end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False,
                         "enable.partition.eof": True, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages, at_end = [], set()
    deadline = time.monotonic() + 60
    while len(at_end) < partitions:
        assert time.monotonic() < deadline, f"{topic} not read to its end: {len(messages)} records"
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error() is not None:
            assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
            at_end.add(message.partition())
            continue
        messages.append(message)
    consumer.close()
    return messages


def consume_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[Any, ...]]:
    """Every record of the topic as confluent-kafka reads it (read_committed), with timestamps and headers."""
    return sorted((m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1],
                   [(k, v) for k, v in m.headers() or []] or None) for m in read_to_end(bootstrap, topic, partitions))


def as_records(rows: list[Any], with_extras: bool = False) -> list[tuple[Any, ...]]:
    out = []
    for row in rows:
        record: tuple[Any, ...] = (row.topic, row.partition, row.offset, row.key, row.value)
        if with_extras:
            headers = None if row.headers is None else [(h.key, h.value) for h in row.headers]
            record += (int(row.timestamp.timestamp() * 1000), headers)
        out.append(record)
    return sorted(out)


def stream(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> DataFrame:
    reader = spark.readStream.format(FORMAT).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


class Collected:
    """What a streaming query's foreachBatch saw: each micro-batch's rows, in order."""

    def __init__(self) -> None:
        self.batches: list[list[Any]] = []
        self._lock = threading.Lock()

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        rows = df.collect()
        with self._lock:
            self.batches.append(rows)

    @property
    def rows(self) -> list[Any]:
        with self._lock:
            return [row for batch in self.batches for row in batch]


def run_available_now(df: DataFrame, checkpoint: Path) -> tuple[Collected, list[int]]:
    """Run the query until it has read what was there at its start; the rows and each batch's input rows."""
    collected = Collected()
    query = df.writeStream.foreachBatch(collected).option("checkpointLocation", str(checkpoint)) \
        .trigger(availableNow=True).start()
    query.awaitTermination(180)
    assert not query.isActive, "the query did not stop"
    if query.exception() is not None:
        raise query.exception()  # type: ignore[misc]
    return collected, [p["numInputRows"] for p in query.recentProgress]


def test_batch_read_matches_confluent_kafka(spark: SparkSession, bootstrap: str) -> None:
    create_topic(bootstrap, "batch-read", 3)
    produce(bootstrap, "batch-read", 300, 3)
    expected = consume_all(bootstrap, "batch-read", 3)
    df = spark.read.format(FORMAT).option("kafka.bootstrap.servers", bootstrap).option("subscribe", "batch-read") \
        .option("includeHeaders", "true").load()
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    rows = df.collect()
    assert as_records(rows, with_extras=True) == expected
    assert {row.timestampType for row in rows} == {0}  # CreateTime
    assert len(expected) == 300

    # minPartitions splits the three ranges into six tasks that read the same records; endingOffsets bounds them.
    split = spark.read.format(FORMAT).option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribePattern", "batch-r.*").option("minPartitions", "6").load()
    assert split.rdd.getNumPartitions() == 6
    assert as_records(split.collect()) == [r[:5] for r in expected]
    bounded = spark.read.format(FORMAT).option("kafka.bootstrap.servers", bootstrap) \
        .option("assign", '{"batch-read":[0,2]}').option("startingOffsets", '{"batch-read":{"0":10,"2":-2}}') \
        .option("endingOffsets", '{"batch-read":{"0":20,"2":-1}}').load()
    assert as_records(bounded.collect()) == [r[:5] for r in expected
                                             if (r[1] == 0 and 10 <= r[2] < 20) or r[1] == 2]
    # startingTimestamp: each partition from its first record at or after it (record i has timestamp base + i).
    recent = spark.read.format(FORMAT).option("kafka.bootstrap.servers", bootstrap).option("subscribe", "batch-read") \
        .option("startingTimestamp", str(1_700_000_000_000 + 150)).load()
    assert as_records(recent.collect()) == [r[:5] for r in expected if r[5] >= 1_700_000_000_000 + 150]
    assert len(recent.collect()) == 150


def test_streaming_read_matches_confluent_and_resumes_from_its_checkpoint(spark: SparkSession, bootstrap: str,
                                                                          tmp_path: Path) -> None:
    create_topic(bootstrap, "resumed", 2)
    produce(bootstrap, "resumed", 100, 2)
    checkpoint = tmp_path / "checkpoint"
    first, _ = run_available_now(stream(spark, bootstrap, "resumed", startingOffsets="earliest"), checkpoint)
    assert as_records(first.rows) == [r[:5] for r in consume_all(bootstrap, "resumed", 2)]

    # The offsets Spark checkpointed are the connector's JSON: topic, then partition, then the next offset.
    offsets_dir = checkpoint / "offsets"
    last = max((p for p in offsets_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    assert json.loads(last.read_text().splitlines()[-1]) == {"resumed": {"0": 50, "1": 50}}

    produce(bootstrap, "resumed", 60, 2, first=100)
    second, _ = run_available_now(stream(spark, bootstrap, "resumed", startingOffsets="earliest"), checkpoint)
    assert as_records(second.rows) == [r[:5] for r in consume_all(bootstrap, "resumed", 2) if r[2] >= 50]
    assert len(second.rows) == 60


def test_max_offsets_per_trigger_bounds_each_micro_batch(spark: SparkSession, bootstrap: str,
                                                         tmp_path: Path) -> None:
    create_topic(bootstrap, "throttled", 3)
    produce(bootstrap, "throttled", 200, 3)
    collected, sizes = run_available_now(
        stream(spark, bootstrap, "throttled", startingOffsets="earliest", maxOffsetsPerTrigger="30"),
        tmp_path / "checkpoint")
    batch_sizes = [len(batch) for batch in collected.batches if batch]
    assert sum(batch_sizes) == 200 and len(batch_sizes) >= 7, batch_sizes
    assert max(batch_sizes) <= 30 and max(sizes) <= 30, (batch_sizes, sizes)
    assert len({(row.partition, row.offset) for row in collected.rows}) == 200


def test_a_partition_added_mid_stream_is_read(spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    create_topic(bootstrap, "growing", 2)
    produce(bootstrap, "growing", 20, 2)
    collected = Collected()
    query = stream(spark, bootstrap, "growing", startingOffsets="earliest").writeStream.foreachBatch(collected) \
        .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(processingTime="200 milliseconds").start()
    try:
        _wait(lambda: len(collected.rows) == 20, query)
        admin_call(bootstrap, "create_partitions", [NewPartitions("growing", 3)])
        produce(bootstrap, "growing", 30, 3, first=20)
        _wait(lambda: len(collected.rows) == 50, query)
    finally:
        query.stop()
    assert as_records(collected.rows) == [r[:5] for r in consume_all(bootstrap, "growing", 3)]
    assert {row.partition for row in collected.rows} == {0, 1, 2}


def test_deleted_records_fail_the_query_or_are_skipped_as_fail_on_data_loss_says(
        spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    create_topic(bootstrap, "pruned", 1)
    produce(bootstrap, "pruned", 10, 1)
    checkpoint = tmp_path / "checkpoint"
    run_available_now(stream(spark, bootstrap, "pruned", startingOffsets="earliest"), checkpoint)
    produce(bootstrap, "pruned", 20, 1, first=10)
    # The log start moves past the checkpointed offset (10): records 10 to 19 are gone before the query reads them.
    admin_call(bootstrap, "delete_records", [TopicPartition("pruned", 0, 20)])
    with pytest.raises(StreamingQueryException, match="Cannot fetch offset 10 of pruned-0: the log starts at 20"):
        run_available_now(stream(spark, bootstrap, "pruned"), checkpoint)
    skipped, _ = run_available_now(stream(spark, bootstrap, "pruned", failOnDataLoss="false"), checkpoint)
    assert [row.offset for row in sorted(skipped.rows, key=lambda r: r.offset)] == list(range(20, 30))


def test_read_committed_never_yields_aborted_records(spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    """Transactions played on the wire as the partition-side test does (no coordinator yet): a producer's
    transactional batches and the coordinator's markers, to the one broker, which leads the partition."""
    create_topic(bootstrap, TXN_TOPIC, 1)
    wire = TransactionWire(bootstrap, TXN_TOPIC)
    wire.produce([b"plain-1", b"plain-2"])
    aborted = wire.init_producer_id()
    wire.produce([b"aborted-1", b"aborted-2"], aborted)
    wire.write_marker(aborted, commit=False)
    committed = wire.init_producer_id()
    wire.produce([b"committed-1"], committed)
    wire.write_marker(committed, commit=True)
    wire.produce([b"plain-3"])
    still_open = wire.init_producer_id()
    wire.produce([b"open-1"], still_open)  # no marker: the last stable offset stays before it
    wire.produce([b"plain-4"])

    def values(df: DataFrame) -> list[bytes]:
        return [row.value for row in sorted(df.collect(), key=lambda r: r.offset)]

    def batch(**options: str) -> DataFrame:
        reader = spark.read.format(FORMAT).option("kafka.bootstrap.servers", bootstrap).option("subscribe", TXN_TOPIC)
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    assert values(batch()) == [b"plain-1", b"plain-2", b"committed-1", b"plain-3"]
    streamed, _ = run_available_now(stream(spark, bootstrap, TXN_TOPIC, startingOffsets="earliest"),
                                    tmp_path / "checkpoint")
    assert sorted(row.value for row in streamed.rows) == sorted([b"plain-1", b"plain-2", b"committed-1", b"plain-3"])
    assert values(batch(**{"kafka.isolation.level": "read_uncommitted"})) == [
        b"plain-1", b"plain-2", b"aborted-1", b"aborted-2", b"committed-1", b"plain-3", b"open-1", b"plain-4"]

    # Once the open transaction is aborted, the stream goes on past it: plain-4, never open-1.
    wire.write_marker(still_open, commit=False)
    resumed, _ = run_available_now(stream(spark, bootstrap, TXN_TOPIC), tmp_path / "checkpoint")
    assert [row.value for row in resumed.rows] == [b"plain-4"]


def test_sink_output_read_back_equals_its_input(spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    create_topic(bootstrap, "sink-batch", 3)
    rows = [(f"k{i % 5}", f"v{i}".encode(), i % 3, [(f"h{i}", b"x")] if i % 2 else None) for i in range(120)]
    df = spark.createDataFrame(rows, "key string, value binary, partition int,"
                                     " headers array<struct<key: string, value: binary>>")
    df.write.format(FORMAT).option("kafka.bootstrap.servers", bootstrap).option("topic", "sink-batch") \
        .mode("append").save()
    written = consume_all(bootstrap, "sink-batch", 3)
    assert sorted((r[3], r[4], r[1], r[6]) for r in written) == \
        sorted((k.encode(), v, p, h) for k, v, p, h in rows)

    # A streaming copy: every record of sink-batch into sink-stream, the topic named by a column.
    create_topic(bootstrap, "sink-stream", 3)
    copy = stream(spark, bootstrap, "sink-batch", startingOffsets="earliest", includeHeaders="true") \
        .selectExpr("key", "value", "partition", "headers", "'sink-stream' AS topic")
    query = copy.writeStream.format(FORMAT).option("kafka.bootstrap.servers", bootstrap) \
        .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
    query.awaitTermination(180)
    assert query.exception() is None and not query.isActive
    copied = consume_all(bootstrap, "sink-stream", 3)
    assert sorted((r[1], r[2], r[3], r[4], r[6]) for r in copied) == \
        sorted((r[1], r[2], r[3], r[4], r[6]) for r in written)


def _wait(condition: Any, query: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, "the streaming query never got there"
        time.sleep(0.2)  # a condition polled under a deadline: the query's next micro-batches


def test_pipeline_counts_each_key_per_window_once_and_goes_on_from_its_checkpoint(
        spark: SparkSession, bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    create_topic(bootstrap, "clicks", 2)
    create_topic(bootstrap, "clicks-per-window", 1)
    base = 1_700_000_000_000  # a multiple of the 10 s window

    def clicks(*events: tuple[str, float]) -> None:
        producer = Producer({"bootstrap.servers": bootstrap})
        for i, (key, seconds) in enumerate(events):
            producer.produce("clicks", key=key.encode(), value=b"click", partition=i % 2,
                             timestamp=base + int(seconds * 1000))
        assert producer.flush(30) == 0

    def pipeline() -> None:
        code = cli_main(["pipeline", "--bootstrap-server", bootstrap, "--input", "clicks",
                         "--output", "clicks-per-window", "--checkpoint", str(tmp_path / "checkpoint"),
                         "--window", "10 seconds", "--watermark-delay", "5 seconds", "--available-now",
                         "--exactly-once"])
        assert code == 0, capsys.readouterr().err

    def results() -> list[tuple[bytes, dict[str, Any]]]:
        return sorted(((r[3], json.loads(r[4])) for r in consume_all(bootstrap, "clicks-per-window", 1)), key=repr)

    def window(key: str, start_s: int, count: int) -> tuple[bytes, dict[str, Any]]:
        start = datetime.fromtimestamp((base // 1000) + start_s, UTC)
        return key.encode(), {"window_start": start.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                              "window_end": (start + timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                              "key": key, "count": count}

    # The last click moves the watermark to 55 s: the windows ending at 10 s and 20 s are final, 60 s is not.
    clicks(("a", 1), ("b", 2), ("a", 3), ("a", 9.5), ("b", 4), ("a", 12), ("c", 61))
    pipeline()
    assert results() == sorted([window("a", 0, 3), window("b", 0, 2), window("a", 10, 1)], key=repr)
    assert "exactly-once (transactional sink)" in capsys.readouterr().out

    # Run again on the same checkpoint: only what came since is read, and the state kept the open window.
    clicks(("c", 65), ("a", 90))
    pipeline()
    assert results() == sorted([window("a", 0, 3), window("b", 0, 2), window("a", 10, 1), window("c", 60, 2)],
                               key=repr)


def test_a_task_reads_its_ledger_entry_committed_after_a_transaction_left_open(bootstrap: str) -> None:
    """A driver killed in a micro-batch can leave one task's transaction open on a ledger partition, below the
    entry another task sharing the partition committed (task partitions 0 and LEDGER_PARTITIONS share one). A
    read_committed read stops at the open one (the last stable offset): the second task, run again, would
    miss its entry and write its rows twice. The ledger's read waits until the open transaction is decided,
    here fenced by its own task's next attempt, as a replay does."""
    client = {"bootstrap.servers": bootstrap}
    ensure_ledger(client, "ledger-past-open")
    ledger = ledger_partition(client, "ledger-past-open", 0)
    assert ledger_partition(client, "ledger-past-open", LEDGER_PARTITIONS) == ledger

    def transaction(transactional_id: str, task_partition: int) -> Producer:
        producer = Producer({**client, "transactional.id": transactional_id})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(ledger.topic, b"7", ledger_key("query", task_partition), ledger.partition)
        assert producer.flush(30) == 0
        return producer

    left_open = transaction("ledger-task-0", 0)
    transaction("ledger-task-16", LEDGER_PARTITIONS).commit_transaction(30)
    read: list[dict[bytes, bytes]] = []
    reader = threading.Thread(target=lambda: read.append(read_ledger(client, ledger)))
    reader.start()
    reader.join(2.0)  # a read that does not wait for the open transaction is back well before
    waited = reader.is_alive()
    Producer({**client, "transactional.id": "ledger-task-0"}).init_transactions(30)  # fences and aborts it
    reader.join(60)
    assert waited, f"the ledger was read past a transaction still open: {read}"
    assert read and already_committed(read[0], ledger_key("query", LEDGER_PARTITIONS), 7), read
    assert not already_committed(read[0], ledger_key("query", 0), 7), read
    with pytest.raises(KafkaException):  # the first attempt was fenced: its commit is refused
        left_open.commit_transaction(30)


def fail_once_when_ready(marker: Path, bootstrap: str, topic: str) -> Any:
    """A UDF passing `value` through that raises once, in the task of input partition 1 at offset 150, but only
    when the sink's task of partition 0 has committed its 200 records to `topic`'s partition 0 and partition 1's
    own task has produced its first 100 (its open transaction's records are in the log): conditions waited for
    under a deadline, so the failure always finds both."""
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    def ready() -> bool:
        # Imported on the executor: cloudpickle would carry the test module's names by value.
        from confluent_kafka import Consumer, TopicPartition

        committed = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-probe",
                              "isolation.level": "read_committed"})
        uncommitted = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-probe",
                                "isolation.level": "read_uncommitted"})
        try:
            # ListOffsets' latest: the last stable offset for read_committed, the high watermark otherwise.
            return committed.get_watermark_offsets(TopicPartition(topic, 0), 10)[1] > 200 and \
                uncommitted.get_watermark_offsets(TopicPartition(topic, 1), 10)[1] >= 100
        finally:
            committed.close()
            uncommitted.close()

    def value_or_fail(value: bytes, row_offset: int) -> bytes:
        context = TaskContext.get()
        if context is None or context.partitionId() != 1 or row_offset != 150 or marker.exists():
            return value
        marker.touch()
        deadline = time.monotonic() + 120
        while not ready():
            if time.monotonic() > deadline:
                raise TimeoutError("the sink never got there")
            time.sleep(0.1)  # a condition polled under a deadline: the other task's commit
        raise RuntimeError("injected failure at offset 150 of partition 1")

    return F.udf(value_or_fail, "binary", useArrow=True)


def consume_values(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[tuple[bytes, bytes]]:
    return sorted((m.key(), m.value()) for m in read_to_end(bootstrap, topic, partitions, isolation))


def test_exactly_once_sink_writes_each_row_once_through_a_failed_task_and_a_restart(
        spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    """Partition 1's task fails mid-write (its transaction open with 100 records in the log) once partition 0's
    has committed, so the micro-batch and the query fail; the query restarted from its checkpoint runs the
    micro-batch again: partition 1's new attempt fences and aborts the old transaction, partition 0's finds its
    ledger entry and writes nothing. The at-least-once sink writes partition 0's rows twice here."""
    create_topic(bootstrap, "eos-in", 2)
    create_topic(bootstrap, "eos-out", 2)
    # Values of 4 KiB: the UDF's Python worker flushes its results to the sink's task every 64 KiB or so, so
    # the sink has produced partition 1's first rows when the UDF raises at offset 150.
    expected = sorted((f"key-{i % 7}".encode(), f"value-{i}".encode().ljust(4096, b".")) for i in range(400))
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, (key, value) in enumerate(expected):
        producer.produce("eos-in", value=value, key=key, partition=i % 2)
    assert producer.flush(30) == 0
    checkpoint = tmp_path / "checkpoint"
    fail = fail_once_when_ready(tmp_path / "failed-once", bootstrap, "eos-out")

    def run() -> None:
        copy = stream(spark, bootstrap, "eos-in", startingOffsets="earliest") \
            .select("key", fail("value", "offset").alias("value"), "partition")
        query = copy.writeStream.format(FORMAT).option("kafka.bootstrap.servers", bootstrap) \
            .option("topic", "eos-out").option("exactlyOnce", "true") \
            .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
        query.awaitTermination(180)  # raises the query's exception
        assert not query.isActive, "the query did not stop"

    # Small Arrow batches: the sink's task has produced records of its transaction before the UDF raises.
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
    try:
        with pytest.raises(StreamingQueryException, match="injected failure at offset 150 of partition 1"):
            run()
        run()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert consume_values(bootstrap, "eos-out", 2, "read_committed") == expected
    # The failed attempt's records are in the log, aborted: a read_uncommitted reader sees them too.
    assert len(consume_values(bootstrap, "eos-out", 2, "read_uncommitted")) >= len(expected) + 100

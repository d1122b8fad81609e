"""The `minibroker` sink: each Spark task produces its rows with an idempotent producer, or in one transaction.

The connector's columns: `value` (string or binary, required), `key` (string or binary), `topic` (string; the
`topic` option, when given, wins over it, as the connector's), `partition` (int; else the partitioner's
choice, murmur2 on the key as Java's default) and `headers` (array<struct<key: string, value: binary>>).
A task returns only once every record it produced is acknowledged (acks=all), so when Spark commits a
batch or a micro-batch every row is in the topic; a failed task is retried by Spark and its rows may be
written twice (at least once). The idempotent producer keeps its own retries from duplicating.

`exactlyOnce` (streaming writes): each task writes its rows in one Kafka transaction whose transactional id
is derived from the query id, the micro-batch id and the task's partition (`transactional_id`). A task that
fails before committing leaves its transaction open; Spark's next attempt at the same partition of the same
micro-batch, in this run or in a query restarted from its checkpoint, takes the same id, and its
InitProducerId fences the predecessor and aborts its open transaction, so read_committed readers never see
the failed attempt's records. The task commits its transaction at the end of write(): Kafka gives a client
no way to resume another producer's open transaction (Flink's two-phase sink does it with the producer id
and epoch by reflection into the Java client; confluent-kafka has no such call, and a producer initialised
again with the same transactional id aborts what is open), so the driver's commit cannot be the one that
commits. A task whose transaction committed may still be run again by Spark (the micro-batch failed in
another task, or the driver stopped before Spark's commit log recorded it): the same transaction writes
the task's entry in the ledger topic (kafka_ledger.py), and a task that finds its entry there writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from spark_jobs.kafka_ledger import already_committed, ledger_key, ledger_partition, read_ledger
from spark_jobs.kafka_options import OptionError, SinkOptions
from spark_jobs.task_input import input_complete

_FLUSH_TIMEOUT_S = 120.0
_TRANSACTION_CALL_TIMEOUT_S = 60.0
# The local properties Spark's MicroBatchExecution sets for each micro-batch's jobs (StreamExecution.QUERY_ID_KEY,
# MicroBatchExecution.BATCH_ID_KEY): the query id survives restarts from the same checkpoint.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


def check_sink_schema(schema: StructType, topic_option: str | None) -> None:
    """The connector's KafkaWriter.validateQuery: which columns the sink takes, and their types."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError("Required attribute 'value' not found")
    if topic_option is None and "topic" not in fields:
        raise OptionError("topic option required when no 'topic' attribute is present. Use the topic option"
                          " for setting a topic.")
    expected = {"key": (StringType, BinaryType), "value": (StringType, BinaryType), "topic": (StringType,),
                "partition": (IntegerType,)}
    for name, types in expected.items():
        if name in fields and not isinstance(fields[name], types):
            raise OptionError(f"{name} attribute type must be a " + " or a ".join(t.typeName() for t in types))
    headers = fields.get("headers")
    if headers is not None and not (
            isinstance(headers, ArrayType) and isinstance(headers.elementType, StructType)
            and [(f.name, type(f.dataType)) for f in headers.elementType.fields]
            == [("key", StringType), ("value", BinaryType)]):
        raise OptionError("headers attribute type must be an array<struct<key: string, value: binary>>")


@dataclass
class ProducedMessage(WriterCommitMessage):
    """What a task reports to the driver: how many records it wrote."""

    records: int


def producer_config(options: SinkOptions, on_failure: Callable[[KafkaError | None, Message], None]) -> dict[str, Any]:
    # Java's DefaultPartitioner hashes keys with murmur2: the same key lands where a JVM producer puts it.
    # Only failed deliveries are reported: a callback per acknowledged record would cost more than its produce.
    return {"partitioner": "murmur2_random", **options.client, "enable.idempotence": True, "acks": "all",
            "delivery.report.only.error": True, "on_delivery": on_failure}


@dataclass(frozen=True)
class TaskIdentity:
    """Which rows a task writes: the same for every attempt at them, in this run or after a restart."""

    query_id: str
    batch_id: int
    partition: int

    @property
    def transactional_id(self) -> str:
        """One per (query, micro-batch, partition): each attempt at the same rows fences the one before."""
        return f"minibroker-sink-{self.query_id}-{self.batch_id}-{self.partition}"


def produce_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> ProducedMessage:
    """Produce every row and wait until each is acknowledged; the first delivery error fails the task."""
    failures: list[KafkaError] = []
    producer = Producer(producer_config(options, _collect_into(failures)))
    written = _produce_all(producer, options, batches, failures)
    if producer.flush(_FLUSH_TIMEOUT_S) > 0:
        raise TimeoutError(f"records still unacknowledged after {_FLUSH_TIMEOUT_S:.0f} s")
    if failures:
        raise KafkaException(failures[0])
    return ProducedMessage(written)


def produce_transaction(options: SinkOptions, batches: Iterator[pa.RecordBatch], task: TaskIdentity) -> ProducedMessage:
    """Every row and the task's ledger entry in one transaction, committed once all are produced; aborted if
    anything fails. Nothing is written if the ledger says an earlier attempt committed these rows.

    init_transactions fences an earlier producer with the same id and aborts the transaction it left open, so
    the ledger read after it shows whether that attempt committed.
    """
    failures: list[KafkaError] = []
    producer = Producer({**producer_config(options, _collect_into(failures)),
                         "transactional.id": task.transactional_id})
    producer.init_transactions(_TRANSACTION_CALL_TIMEOUT_S)
    key = ledger_key(task.query_id, task.partition)
    ledger = ledger_partition(options.client, options.ledger_topic, task.partition)
    if already_committed(read_ledger(options.client, ledger), key, task.batch_id):
        return ProducedMessage(0)
    producer.begin_transaction()
    try:
        written = _produce_all(producer, options, batches, failures)
        if not input_complete():
            raise RuntimeError(f"the input of partition {task.partition} of micro-batch {task.batch_id} ended early:"
                               " its task failed upstream, its transaction is aborted")
        producer.produce(ledger.topic, str(task.batch_id).encode(), key, ledger.partition)
        producer.commit_transaction(_TRANSACTION_CALL_TIMEOUT_S)  # flushes first; fails on any failed delivery
    except BaseException:
        _abort_quietly(producer)
        raise
    return ProducedMessage(written)


def _abort_quietly(producer: Producer) -> None:
    # The task fails with the first error; an abort that cannot reach the coordinator is finished by the next
    # attempt's fencing or by transaction.timeout.ms.
    try:
        producer.abort_transaction(_TRANSACTION_CALL_TIMEOUT_S)
    except KafkaException:
        pass


def _collect_into(failures: list[KafkaError]) -> Callable[[KafkaError | None, Message], None]:
    def failed(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error)
    return failed


def _produce_all(producer: Producer, options: SinkOptions, batches: Iterator[pa.RecordBatch],
                 failures: list[KafkaError]) -> int:
    written = 0
    for batch in batches:
        for topic, key, value, partition, headers in _rows(batch, options.topic):
            if topic is None:
                raise OptionError("Null topic present in the data. Use the topic option for setting a topic.")
            _produce(producer, topic, key, value, partition, headers)
            written += 1
        producer.poll(0)
        if failures:
            raise KafkaException(failures[0])
    return written


def _produce(producer: Producer, topic: str, key: bytes | None, value: bytes | None, partition: int | None,
             headers: list[tuple[str, str | bytes | None]] | None) -> None:
    # confluent-kafka's -1 is RD_KAFKA_PARTITION_UA: the partitioner chooses.
    where = -1 if partition is None else partition
    while True:
        try:
            if headers:
                producer.produce(topic, value, key, where, headers=headers)
            else:
                producer.produce(topic, value, key, where)
            return
        except BufferError:  # queue.buffering.max.messages reached: let deliveries drain it
            producer.poll(0.1)


def _rows(batch: pa.RecordBatch, topic_option: str | None) -> Iterator[tuple[Any, ...]]:
    names = {name.lower(): i for i, name in enumerate(batch.schema.names)}

    def column(name: str) -> Sequence[Any]:
        return batch.column(names[name]).to_pylist() if name in names else [None] * batch.num_rows

    topics = [topic_option] * batch.num_rows if topic_option is not None else column("topic")
    headers = [None if h is None else [(e["key"], e["value"]) for e in h] for h in column("headers")]
    yield from zip(topics, map(_bytes, column("key")), map(_bytes, column("value")), column("partition"), headers,
                   strict=True)


def _bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


class MinibrokerWriter(DataSourceArrowWriter):
    """`df.write.format("minibroker")`: every task's rows acknowledged before Spark commits the job."""

    def __init__(self, options: SinkOptions) -> None:
        if options.exactly_once:
            # A batch job has no query id or micro-batch id that a later run would share, so nothing to fence by.
            raise OptionError("exactlyOnce is for streaming writes (df.writeStream)")
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_batches(self._options, iterator)


class MinibrokerStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("minibroker")`: a micro-batch commits once its rows are acknowledged, or once each
    task's transaction has committed (exactlyOnce)."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if not self._options.exactly_once:
            return produce_batches(self._options, iterator)
        context = TaskContext.get()
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context is not None else None
        batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
        if context is None or query_id is None or batch_id is None:
            raise RuntimeError("exactlyOnce: the task has no streaming query id or micro-batch id")
        task = TaskIdentity(query_id, int(batch_id), context.partitionId())
        return produce_transaction(self._options, iterator, task)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing left to do: the tasks waited for their acknowledgements, or committed their transactions."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records of tasks that finished stay in the topic, committed: Spark runs the batch again (at least once).

        In exactlyOnce mode a failed task's open transaction is aborted by the task, or fenced and aborted by
        the next attempt at its partition, or aborted by the coordinator after transaction.timeout.ms.
        """

"""The `minibroker` sink: each Spark task produces its rows with an idempotent producer (at least once).

The connector's columns: `value` (string or binary, required), `key` (string or binary), `topic` (string; the
`topic` option, when given, wins over it, as the connector's), `partition` (int; else the partitioner's
choice, murmur2 on the key as Java's default) and `headers` (array<struct<key: string, value: binary>>).
A task returns only once every record it produced is acknowledged (acks=all), so when Spark commits a
batch or a micro-batch every row is in the topic; a failed task is retried by Spark and its rows may be
written twice (at least once). The idempotent producer keeps its own retries from duplicating.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from spark_jobs.kafka_options import OptionError, SinkOptions

_FLUSH_TIMEOUT_S = 120.0


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


def produce_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> ProducedMessage:
    """Produce every row and wait until each is acknowledged; the first delivery error fails the task."""
    failures: list[KafkaError] = []

    def failed(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer(producer_config(options, failed))
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
    if producer.flush(_FLUSH_TIMEOUT_S) > 0:
        raise TimeoutError(f"records still unacknowledged after {_FLUSH_TIMEOUT_S:.0f} s")
    if failures:
        raise KafkaException(failures[0])
    return ProducedMessage(written)


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
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_batches(self._options, iterator)


class MinibrokerStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("minibroker")`: at least once; a micro-batch commits once its rows are acknowledged."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_batches(self._options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing left to do: the tasks waited for their acknowledgements."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records of the tasks that finished stay in the topic (at least once): Spark retries the batch."""

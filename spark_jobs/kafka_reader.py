"""The `minibroker` source's reads: the driver's offset lookups and the executors' bounded reads.

The driver (KafkaOffsetReader, as the connector's) asks the cluster, through confluent-kafka's AdminClient,
which partitions the subscription has and their earliest, latest (the last stable offset under
read_committed) and by-timestamp offsets. It plans; it never reads records. Each Spark task reads one
OffsetRange with a consumer of its own that is assigned the partition (no group, nothing committed),
stops at the range's end, and yields Arrow record batches: the task holds no state between reads, so a
retried task or a restarted query reads the same records again.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from spark_jobs.kafka_options import SourceOptions
from spark_jobs.kafka_planning import DataLossError, OffsetRange, PartitionOffsets, TopicPartition

log = logging.getLogger(__name__)

VALUE_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp," \
               " timestampType int"
HEADERS_FIELD = "headers array<struct<key: string, value: binary>>"
# Records per consume() call and per Arrow batch handed to Spark.
CHUNK = 10_000
_TIMEOUT_S = 30.0


def schema(include_headers: bool) -> str:
    """The connector's row schema; `headers` only with includeHeaders=true, as the connector."""
    return f"{VALUE_SCHEMA}, {HEADERS_FIELD}" if include_headers else VALUE_SCHEMA


def report_data_loss(losses: Sequence[str], fail_on_data_loss: bool) -> None:
    """Raise on a data loss, or log it and go on, as failOnDataLoss says (the connector's reportDataLoss)."""
    for message in losses:
        if fail_on_data_loss:
            raise DataLossError(f"{message}. If you want your streaming query to continue, set the source"
                                " option 'failOnDataLoss' to 'false'.")
        log.warning("%s. Some data may have been lost because they are not available in Kafka any more;"
                    " either the data was aged out by Kafka or the topic may have been deleted before all the"
                    " data in the topic was processed.", message)


class KafkaOffsetReader:
    """The driver's questions to the cluster: partitions of the subscription and their offsets."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._admin = AdminClient(dict(options.client))
        self._isolation = (IsolationLevel.READ_COMMITTED if options.isolation_level == "read_committed"
                           else IsolationLevel.READ_UNCOMMITTED)

    def partitions(self) -> list[TopicPartition]:
        subscription = self._options.subscription
        if subscription.assigned:
            return list(subscription.assigned)
        metadata = self._admin.list_topics(timeout=_TIMEOUT_S)
        return sorted((name, p) for name, topic in metadata.topics.items()
                      if topic.error is None and subscription.matches(name) for p in topic.partitions)

    def earliest(self, partitions: Sequence[TopicPartition]) -> PartitionOffsets:
        return self._list_offsets(partitions, OffsetSpec.earliest())

    def latest(self, partitions: Sequence[TopicPartition]) -> PartitionOffsets:
        return self._list_offsets(partitions, OffsetSpec.latest())

    def for_timestamp(self, partitions: Sequence[TopicPartition], timestamp_ms: int) -> PartitionOffsets:
        """The first offset at or after the timestamp; none is an error (startingOffsetsByTimestampStrategy=error)."""
        found = self._list_offsets(partitions, OffsetSpec.for_timestamp(timestamp_ms))
        missing = [tp for tp, offset in found.items() if offset < 0]
        if missing:
            raise ValueError(f"No offset matched from request of topic-partition {missing[0][0]}-{missing[0][1]}"
                             f" and timestamp {timestamp_ms}")
        return found

    def _list_offsets(self, partitions: Sequence[TopicPartition], spec: OffsetSpec) -> PartitionOffsets:
        if not partitions:
            return {}
        futures = self._admin.list_offsets({KafkaTopicPartition(t, p): spec for t, p in partitions},
                                           isolation_level=self._isolation, request_timeout=_TIMEOUT_S)
        return {(tp.topic, tp.partition): future.result().offset for tp, future in futures.items()}


def read_range(options: SourceOptions, offsets: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of one range as Arrow batches of the source's schema; gaps (compaction, markers) are normal."""
    consumer = Consumer({**options.client, "group.id": f"spark-kafka-source-{uuid.uuid4()}",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "auto.offset.reset": "error", "enable.partition.eof": True})
    try:
        yield from _read(consumer, options, offsets)
    finally:
        consumer.close()


def _read(consumer: Consumer, options: SourceOptions, offsets: OffsetRange) -> Iterator[pa.RecordBatch]:
    tp = KafkaTopicPartition(offsets.topic, offsets.partition)
    position = _checked_start(consumer, tp, offsets.from_offset, options.fail_on_data_loss)
    if position >= offsets.until_offset:
        return
    consumer.assign([KafkaTopicPartition(offsets.topic, offsets.partition, position)])
    rows = _Rows(offsets.topic, offsets.partition, options.include_headers)
    deadline = time.monotonic() + options.poll_timeout_ms / 1000
    while position < offsets.until_offset:
        messages = consumer.consume(CHUNK, timeout=1.0)
        if messages:
            deadline = time.monotonic() + options.poll_timeout_ms / 1000
        elif time.monotonic() > deadline:
            raise TimeoutError(f"Cannot fetch record for offset {position} in {options.poll_timeout_ms}"
                               f" milliseconds from {offsets.topic}-{offsets.partition}")
        for message in messages:
            error, offset = message.error(), message.offset() or 0
            if error is None:
                if offset >= offsets.until_offset:
                    position = offsets.until_offset
                    break
                rows.add(message, offset)
                position = offset + 1
            elif error.code() == KafkaError._PARTITION_EOF:
                # Under read_committed the end may lie past the last record a reader gets (a marker is last).
                position = max(position, offset)
            elif error.code() == KafkaError._AUTO_OFFSET_RESET:
                # The log start moved past the position while reading (retention, DeleteRecords).
                position = _checked_start(consumer, tp, position, options.fail_on_data_loss)
                consumer.assign([KafkaTopicPartition(offsets.topic, offsets.partition, position)])
                break
            else:
                raise KafkaException(error)
        if len(rows) >= CHUNK:
            yield rows.take()
    if len(rows):
        yield rows.take()


def _checked_start(consumer: Consumer, tp: KafkaTopicPartition, start: int, fail_on_data_loss: bool) -> int:
    """Where to start reading: `start`, or the log start offset if it moved past it and losses are allowed."""
    log_start = _log_start_offset(consumer, tp)
    if log_start > start:
        report_data_loss([f"Cannot fetch offset {start} of {tp.topic}-{tp.partition}: the log starts at"
                          f" {log_start}, so records {start} to {log_start - 1} are skipped"], fail_on_data_loss)
        return int(log_start)
    return start


def _log_start_offset(consumer: Consumer, tp: KafkaTopicPartition) -> int:
    """The partition's log start offset from its leader, asked again while the error is a retriable one (a leader
    moving, a connection lost) until the lookup's timeout."""
    deadline = time.monotonic() + _TIMEOUT_S
    while True:
        try:
            log_start, _ = consumer.get_watermark_offsets(tp, timeout=_TIMEOUT_S, cached=False)
            return int(log_start)
        except KafkaException as exc:
            error = exc.args[0]
            if not (isinstance(error, KafkaError) and error.retriable()) or time.monotonic() > deadline:
                raise
            log.info("asking %s-%d's log start offset again after %s", tp.topic, tp.partition, error)
            time.sleep(0.2)  # librdkafka refreshes the partition's leader meanwhile


class _Rows:
    """Records of one partition collected column by column, handed to Spark as one Arrow batch at a time."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self._topic, self._partition, self._include_headers = topic, partition, include_headers
        self._clear()

    def _clear(self) -> None:
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._offsets: list[int] = []
        self._timestamps: list[int] = []
        self._types: list[int] = []
        self._headers: list[list[dict[str, Any]] | None] = []

    def __len__(self) -> int:
        return len(self._offsets)

    def add(self, message: Message, offset: int) -> None:
        kind, timestamp = message.timestamp()
        self._keys.append(message.key())
        self._values.append(message.value())
        self._offsets.append(offset)
        self._timestamps.append(timestamp)
        # librdkafka's NOT_AVAILABLE, CREATE_TIME, LOG_APPEND_TIME (0, 1, 2) -> Kafka's TimestampType ids -1, 0, 1.
        self._types.append(kind - 1)
        if self._include_headers:
            headers = message.headers()
            # confluent-kafka's headers are (name, value) pairs: a list, never the dict form producers accept.
            pairs = headers if isinstance(headers, list) else []
            self._headers.append([{"key": k, "value": v} for k, v in pairs] or None)

    def take(self) -> pa.RecordBatch:
        n = len(self)
        columns = [
            pa.array(self._keys, pa.binary()), pa.array(self._values, pa.binary()),
            pa.array([self._topic] * n, pa.string()), pa.array([self._partition] * n, pa.int32()),
            pa.array(self._offsets, pa.int64()),
            pc.multiply(pa.array(self._timestamps, pa.int64()), 1000).cast(pa.timestamp("us", tz="UTC")),
            pa.array(self._types, pa.int32()),
        ]
        names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
        if self._include_headers:
            columns.append(pa.array(self._headers, pa.list_(pa.struct([("key", pa.string()),
                                                                         ("value", pa.binary())]))))
            names.append("headers")
        self._clear()
        return pa.RecordBatch.from_arrays(columns, names=names)

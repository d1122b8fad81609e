"""The `minibroker` Spark data source: Kafka topics read and written from Python alone, as the JVM connector.

    spark.dataSource.register(MinibrokerDataSource)
    (spark.readStream.format("minibroker").option("kafka.bootstrap.servers", "localhost:9092")
         .option("subscribe", "events").load())

Batch (`spark.read`) and streaming (`spark.readStream`) reads, and both writes, with the connector's option
names and row schema, through confluent-kafka: no JVM Kafka client, no spark-sql-kafka jar. Options:
spark_jobs/kafka_options.py; which offsets a batch reads: kafka_planning.py; the reads: kafka_reader.py;
the sink: kafka_writer.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from spark_jobs import kafka_planning as planning
from spark_jobs.kafka_ledger import ensure_ledger
from spark_jobs.kafka_options import OffsetSpec, SourceOptions, sink_options, source_options
from spark_jobs.kafka_reader import KafkaOffsetReader, read_range, report_data_loss, schema
from spark_jobs.kafka_writer import MinibrokerStreamWriter, MinibrokerWriter, check_sink_schema

FORMAT = "minibroker"


class KafkaInputPartition(InputPartition):
    """One task's work: one offset range of one topic-partition."""

    def __init__(self, offsets: planning.OffsetRange) -> None:
        super().__init__(offsets)
        self.offsets = offsets


class _Planner:
    """What the batch and the stream reader share: the options and the driver's offset reader, made on first use.

    Spark pickles a reader to every executor to call read(); the AdminClient stays behind on the driver.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._offset_reader: KafkaOffsetReader | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_offset_reader": None}

    @property
    def offset_reader(self) -> KafkaOffsetReader:
        if self._offset_reader is None:
            self._offset_reader = KafkaOffsetReader(self.options)
        return self._offset_reader

    def starting_offsets(self, partitions: Sequence[planning.TopicPartition]) -> planning.PartitionOffsets:
        """startingTimestamp, when given, wins over startingOffsets (as the connector's precedence)."""
        if self.options.starting_timestamp is not None:
            return self.offset_reader.for_timestamp(partitions, self.options.starting_timestamp)
        return self.resolve(self.options.starting, partitions, "startingOffsets")

    def resolve(self, spec: OffsetSpec, partitions: Sequence[planning.TopicPartition],
                name: str) -> planning.PartitionOffsets:
        reader = self.offset_reader
        earliest = reader.earliest(partitions) if spec != "latest" else {}
        latest = reader.latest(partitions) if spec != "earliest" else {}
        return planning.resolve_offsets(spec, partitions, earliest, latest, name)

    def input_partitions(self, start: planning.PartitionOffsets,
                         end: planning.PartitionOffsets) -> list[KafkaInputPartition]:
        new = [tp for tp in end if tp not in start]
        ranges, losses = planning.offset_ranges(start, end, self.offset_reader.earliest(new))
        report_data_loss(losses, self.options.fail_on_data_loss)
        return [KafkaInputPartition(r) for r in planning.split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition)
        return read_range(self.options, partition.offsets)


class MinibrokerBatchReader(DataSourceReader):
    """`spark.read`: from startingOffsets (default earliest) to endingOffsets (default latest), planned once."""

    def __init__(self, options: SourceOptions) -> None:
        self._planner = _Planner(options)

    def partitions(self) -> Sequence[InputPartition]:
        partitions = self._planner.offset_reader.partitions()
        start = self._planner.starting_offsets(partitions)
        end = self._planner.resolve(self._planner.options.ending, partitions, "endingOffsets")
        return self._planner.input_partitions(start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self._planner.read(partition)


class MinibrokerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream`: each micro-batch from the last one's end to the latest offsets (or fewer).

    Partitions are listed again for every micro-batch, so topics a pattern matches and partitions added to a
    topic are read from their earliest offset once they appear. The offsets go into Spark's checkpoint as the
    connector's JSON; a restarted query resumes from there, not from startingOffsets.
    """

    def __init__(self, options: SourceOptions) -> None:
        self._planner = _Planner(options)
        self._available_now_end: planning.PartitionOffsets | None = None

    def initialOffset(self) -> dict[str, Any]:
        partitions = self._planner.offset_reader.partitions()
        return planning.to_json(self._planner.starting_offsets(partitions))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self._planner.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow reads what is there now and stops, in batches of maxOffsetsPerTrigger."""
        self._available_now_end = self._latest()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = planning.from_json(start)
        latest = planning.never_back(begin, self._latest())
        if self._available_now_end is not None:
            latest = planning.cap(latest, self._available_now_end)
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in latest if tp not in begin]
            latest = planning.rate_limit(limit.max_rows, begin, latest, self._planner.offset_reader.earliest(new))
        return planning.to_json(latest)

    def reportLatestOffset(self) -> dict[str, Any]:
        return planning.to_json(self._latest())

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return self._planner.input_partitions(planning.from_json(start), planning.from_json(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self._planner.read(partition)

    def _latest(self) -> planning.PartitionOffsets:
        reader = self._planner.offset_reader
        return reader.latest(reader.partitions())


class MinibrokerDataSource(DataSource):
    """Registered as `minibroker`: `spark.dataSource.register(MinibrokerDataSource)`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return MinibrokerBatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MinibrokerStreamReader(source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        options = sink_options(self.options)
        check_sink_schema(schema, options.topic)
        return MinibrokerWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        options = sink_options(self.options)
        check_sink_schema(schema, options.topic)
        if options.exactly_once:
            ensure_ledger(options.client, options.ledger_topic)
        return MinibrokerStreamWriter(options)

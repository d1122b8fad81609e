"""The example pipeline (`minibroker pipeline`): a topic's records counted per key per event-time window.

    input topic --minibroker source--> withWatermark(timestamp) -> groupBy(window, key).count()
                --minibroker sink----> output topic, key = the record key, value = the window's JSON

Append mode with a watermark: a window's count is written once, when the watermark (the latest event time
seen minus the allowed delay) passes the window's end, and never updated after. Its Spark checkpoint (the
source's offsets, the aggregation's state) lives in one directory: a pipeline stopped and started again
with the same directory goes on where it was. By default the sink is at least once: a micro-batch Spark
retries after a failure (a task, the driver) may write some of its windows again, each with the same key and
value. With `exactly_once` the sink writes each task's windows in one transaction (kafka_writer.py): a failed
task's records are aborted and never reach a read_committed reader, and its retry writes them once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spark_jobs.kafka_source import FORMAT

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


def delivery(exactly_once: bool) -> str:
    return "exactly-once (transactional sink)" if exactly_once else "at-least-once"


@dataclass(frozen=True)
class Pipeline:
    bootstrap_servers: str
    input_topic: str
    output_topic: str
    checkpoint: str
    window: str = "10 seconds"
    watermark_delay: str = "10 seconds"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    trigger_interval: str | None = "5 seconds"  # None: Trigger.AvailableNow (read what is there, then stop)
    client: dict[str, str] = field(default_factory=dict)  # security settings, without the kafka. prefix
    exactly_once: bool = False  # the sink's exactlyOnce mode; read_committed readers see each window once


def windowed_counts(records: DataFrame, window: str, watermark_delay: str) -> DataFrame:
    """Each (window, key)'s count as the sink's columns: `key` and a JSON `value`."""
    from pyspark.sql import functions as F

    counts = (records.withWatermark("timestamp", watermark_delay)
              .groupBy(F.window("timestamp", window).alias("window"), F.col("key")).count())
    return counts.select(
        F.col("key"),
        F.to_json(F.struct(F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("window_start"),
                           F.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("window_end"),
                           F.col("key").cast("string").alias("key"), F.col("count"))).alias("value"))


def start(spark: SparkSession, pipeline: Pipeline) -> StreamingQuery:
    kafka = {"kafka.bootstrap.servers": pipeline.bootstrap_servers,
             **{f"kafka.{key}": value for key, value in pipeline.client.items()}}
    reader = (spark.readStream.format(FORMAT).options(**kafka).option("subscribe", pipeline.input_topic)
              .option("startingOffsets", pipeline.starting_offsets))
    if pipeline.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(pipeline.max_offsets_per_trigger))
    results = windowed_counts(reader.load(), pipeline.window, pipeline.watermark_delay)
    writer = (results.writeStream.format(FORMAT).options(**kafka).option("topic", pipeline.output_topic)
              .option("exactlyOnce", str(pipeline.exactly_once).lower())
              .option("checkpointLocation", pipeline.checkpoint).outputMode("append")
              .queryName(f"pipeline-{pipeline.input_topic}-to-{pipeline.output_topic}"))
    if pipeline.trigger_interval is None:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=pipeline.trigger_interval)
    return writer.start()

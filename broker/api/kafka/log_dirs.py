"""DescribeLogDirs 1-4 (kafka-log-dirs.sh, kafka-python's describe_log_dirs): Kafka 4's range, whose v0 is gone
(Kafka 2.8 served 0-2; kio has no v0 schema). v3 adds the top-level error code (KIP-784), v4 each dir's total and
usable bytes (KIP-827)."""

from __future__ import annotations

import importlib
from typing import Any

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, build, encode, kio_error, millis
from proto.types import TopicPartition


async def handle_describe_log_dirs(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.describe_log_dirs.v{header.api_version}.response")
    partitions = None if request.topics is None else [
        TopicPartition(t.topic, index) for t in request.topics for index in t.partitions]
    error, dirs = await context.operations.describe_log_dirs(context.session, partitions)
    return encode(build(schema.DescribeLogDirsResponse, throttle_time=millis(0), error_code=kio_error(error),
                        results=tuple(
        build(schema.DescribeLogDirsResult, error_code=kio_error(d.error), log_dir=d.log_dir,
              total_bytes=d.total_bytes, usable_bytes=d.usable_bytes, topics=tuple(
                  build(schema.DescribeLogDirsTopic, name=topic, partitions=tuple(
                      build(schema.DescribeLogDirsPartition, partition_index=r.partition, partition_size=r.size,
                            offset_lag=r.offset_lag, is_future_key=r.is_future)
                      for r in replicas))
                  for topic, replicas in d.topics.items()))
        for d in dirs)))

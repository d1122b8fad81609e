"""DescribeProducers v0 (key 61, KIP-664; kafka-transactions.sh describe-producers): each partition's active
producers from this broker's replica, leader or follower, with Kafka's refusals (Read on the topic)."""

from __future__ import annotations

import importlib
from typing import Any

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, build, encode, kio_error, millis


async def handle_describe_producers(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.describe_producers.v{header.api_version}.response")
    answers = context.operations.describe_producers(
        context.session, [(t.name, list(t.partition_indexes)) for t in request.topics])
    return encode(build(schema.DescribeProducersResponse, throttle_time=millis(0), topics=tuple(
        build(schema.TopicResponse, name=topic, partitions=tuple(
            build(schema.PartitionResponse, partition_index=partition, error_code=kio_error(error),
                  error_message=None, active_producers=tuple(
                      build(schema.ProducerState, producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                            last_sequence=p.last_sequence, last_timestamp=p.last_timestamp,
                            coordinator_epoch=p.coordinator_epoch, current_txn_start_offset=p.current_txn_start_offset)
                      for p in producers))
            for partition, error, producers in partitions))
        for topic, partitions in answers)))

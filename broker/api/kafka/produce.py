"""Produce 3-8 (record batch v2 only): the same ReplicaManager.appendRecords as the gRPC door; acks=0 gets no
response at all, and an error then closes the connection so the producer refreshes its metadata (Kafka's
rule)."""

from __future__ import annotations

import importlib
from typing import Any

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import (
    Reply,
    RequestError,
    RequestHeader,
    build,
    datetime_or_none,
    encode,
    kio_error,
    millis,
    to_millis,
)
from broker.api.operations import group_by_topic
from broker.replication.delayed_produce import ProducePartitionResponse
from broker.replication.rules import is_valid_required_acks
from common.record import has_zstd_batch
from proto.errors import ErrorCode
from proto.types import TopicPartition

# zstd came with Produce v7 and Fetch v10 (KIP-110): older clients cannot decode it.
ZSTD_MIN_PRODUCE_VERSION = 7


async def handle_produce(context: KafkaContext, header: RequestHeader, request: Any) -> Reply | None:
    order = [(TopicPartition(t.name, p.index), p.records) for t in request.topic_data for p in t.partition_data]
    results: dict[TopicPartition, ProducePartitionResponse] = {}
    if not is_valid_required_acks(request.acks):
        results = {tp: ProducePartitionResponse(ErrorCode.INVALID_REQUIRED_ACKS) for tp, _ in order}
    elif header.api_version < ZSTD_MIN_PRODUCE_VERSION:
        # Kafka's ProduceRequest.validateRecords: a client that old cannot have meant zstd (KIP-110).
        results = {tp: ProducePartitionResponse(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE) for tp, records in order
                   if records is not None and has_zstd_batch(records)}
    accepted = [(tp, records) for tp, records in order if tp not in results]
    if accepted:
        # Null records are no batch at all: the log layer refuses them as it refuses any bad batch.
        # kio's Records is a bytes subclass holding the batch as received: handed on without a copy.
        results |= await context.operations.produce(
            context.session, to_millis(request.timeout), request.acks, [(tp, b"" if records is None else records)
                                                       for tp, records in accepted], request.transactional_id)
    if request.acks == 0:
        failed = [f"{tp}: {results[tp].error.name}" for tp, _ in order if results[tp].error is not ErrorCode.NONE]
        if failed:
            raise RequestError(f"acks=0 produce failed ({', '.join(failed)}): closing the connection so the"
                               " producer refreshes its metadata")
        return None
    schema = importlib.import_module(f"kio.schema.produce.v{header.api_version}.response")
    topics = tuple(
        build(schema.TopicProduceResponse, name=topic, partition_responses=tuple(
            build(schema.PartitionProduceResponse, index=index, error_code=kio_error(r.error),
                  base_offset=r.base_offset, log_append_time=datetime_or_none(r.log_append_time),
                  log_start_offset=r.log_start_offset, record_errors=(), error_message=r.error_message or None)
            for index, r in partitions))
        for topic, partitions in group_by_topic((tp, results[tp]) for tp, _ in order).items())
    return encode(build(schema.ProduceResponse, responses=topics, throttle_time=millis(0)))

"""The transaction family on the Kafka listener, onto the TransactionCoordinator (broker/coordinator/transaction/):
InitProducerId 0-4 (with or without a transactional id), AddPartitionsToTxn 0-3, AddOffsetsToTxn 0-3, EndTxn 0-3,
FindCoordinator's key type 1 (groups.py routes it here), and KIP-664's DescribeTransactions v0 and ListTransactions
v0, which each broker answers for the ids it coordinates.

Only the wire lives here; every rule is the coordinator's. What differs by version: InitProducerId v3+ carries
KIP-360's current producer id and epoch; PRODUCER_FENCED (KIP-588) is answered only from InitProducerId v4 and
AddPartitionsToTxn / AddOffsetsToTxn / EndTxn v2, older versions get INVALID_PRODUCER_EPOCH, as Kafka 2.8's
KafkaApis maps it.
"""

from __future__ import annotations

import importlib
from typing import Any

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import (
    Reply,
    RequestHeader,
    build,
    datetime_of,
    encode,
    kio_error,
    millis,
    to_millis,
)
from broker.api.operations import group_by_topic
from proto.errors import ErrorCode
from proto.types import TopicPartition


def _schema(api: str, header: RequestHeader) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{header.api_version}.response")


def producer_fenced_for(error: ErrorCode, version: int, first_version: int) -> ErrorCode:
    """PRODUCER_FENCED to a client whose version predates it is INVALID_PRODUCER_EPOCH (Kafka's KafkaApis)."""
    if error is ErrorCode.PRODUCER_FENCED and version < first_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


async def handle_init_producer_id(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("init_producer_id", header)
    if request.transactional_id is None:
        error, producer_id, epoch = await context.operations.init_producer_id(context.session)
    else:
        result = await context.transactions.init_producer_id(
            context.session, request.transactional_id, to_millis(request.transaction_timeout),
            int(getattr(request, "producer_id", -1)), int(getattr(request, "producer_epoch", -1)))
        error = producer_fenced_for(result.error, header.api_version, 4)
        producer_id, epoch = result.producer_id, result.producer_epoch
    return encode(build(schema.InitProducerIdResponse, throttle_time=millis(0), error_code=kio_error(error),
                        producer_id=producer_id, producer_epoch=epoch))


async def handle_add_partitions_to_txn(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("add_partitions_to_txn", header)
    partitions = [TopicPartition(t.name, index) for t in request.v3_and_below_topics for index in t.partitions]
    errors = await context.transactions.add_partitions_to_txn(
        context.session, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
        request.v3_and_below_producer_epoch, partitions)
    results = tuple(
        build(schema.AddPartitionsToTxnTopicResult, name=topic, results_by_partition=tuple(
            build(schema.AddPartitionsToTxnPartitionResult, partition_index=index,
                  partition_error_code=kio_error(producer_fenced_for(error, header.api_version, 2)))
            for index, error in by_partition))
        for topic, by_partition in group_by_topic(errors.items()).items())
    return encode(build(schema.AddPartitionsToTxnResponse, throttle_time=millis(0),
                        results_by_topic_v3_and_below=results))


async def handle_add_offsets_to_txn(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("add_offsets_to_txn", header)
    error = await context.transactions.add_offsets_to_txn(context.session, request.transactional_id,
                                                          request.producer_id, request.producer_epoch,
                                                          request.group_id)
    return encode(build(schema.AddOffsetsToTxnResponse, throttle_time=millis(0),
                        error_code=kio_error(producer_fenced_for(error, header.api_version, 2))))


async def handle_end_txn(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("end_txn", header)
    error = await context.transactions.end_txn(context.session, request.transactional_id, request.producer_id,
                                               request.producer_epoch, request.committed)
    return encode(build(schema.EndTxnResponse, throttle_time=millis(0),
                        error_code=kio_error(producer_fenced_for(error, header.api_version, 2))))


async def handle_describe_transactions(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("describe_transactions", header)
    answers = context.transactions.describe_transactions(context.session, list(request.transactional_ids))
    return encode(build(schema.DescribeTransactionsResponse, throttle_time=millis(0), transaction_states=tuple(
        build(schema.TransactionState, error_code=kio_error(txn.error), transactional_id=txn.transactional_id,
              transaction_state="" if txn.state is None else txn.state.kafka_name,
              transaction_timeout=millis(txn.txn_timeout_ms),
              transaction_start_time=datetime_of(txn.txn_start_timestamp),
              producer_id=txn.producer_id, producer_epoch=txn.producer_epoch, topics=tuple(
                  build(schema.TopicData, topic=topic, partitions=tuple(index for index, _ in partitions))
                  for topic, partitions in group_by_topic((tp, None) for tp in txn.topic_partitions).items()))
        for txn in answers)))


async def handle_list_transactions(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("list_transactions", header)
    found = context.transactions.list_transactions(context.session, list(request.state_filters),
                                                   [int(p) for p in request.producer_id_filters])
    return encode(build(schema.ListTransactionsResponse, throttle_time=millis(0), error_code=kio_error(found.error),
                        unknown_state_filters=tuple(found.unknown_state_filters), transaction_states=tuple(
                            build(schema.TransactionState, transactional_id=txn.transactional_id,
                                  producer_id=txn.producer_id, transaction_state=txn.state.kafka_name)
                            for txn in found.transactions)))

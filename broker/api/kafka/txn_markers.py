"""WriteTxnMarkers v1 (key 27): a transaction coordinator writing COMMIT or ABORT markers to the partitions a
transaction touched, or an administrator aborting a hanging transaction (KIP-664: kafka-transactions.sh abort,
AdminClient.abortTransaction). Advertised by ApiVersions as Kafka's brokers do (the admin client picks its version
from it), and authorized as ClusterAction on the cluster."""

from __future__ import annotations

import importlib
from typing import Any

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, build, encode, kio_error
from broker.api.operations import TxnMarker, group_by_topic
from proto.types import TopicPartition


async def handle_write_txn_markers(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.write_txn_markers.v{header.api_version}.response")
    markers = [TxnMarker(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
                         [TopicPartition(t.name, index) for t in m.topics for index in t.partition_indexes])
               for m in request.markers]
    answers = await context.operations.write_txn_markers(context.session, markers)
    results = tuple(
        build(schema.WritableTxnMarkerResult, producer_id=marker.producer_id, topics=tuple(
            build(schema.WritableTxnMarkerTopicResult, name=topic, partitions=tuple(
                build(schema.WritableTxnMarkerPartitionResult, partition_index=index, error_code=kio_error(error))
                for index, error in partitions))
            for topic, partitions in group_by_topic((tp, errors[tp]) for tp in marker.partitions).items()))
        for marker, errors in zip(markers, answers, strict=True))
    return encode(build(schema.WriteTxnMarkersResponse, markers=results))

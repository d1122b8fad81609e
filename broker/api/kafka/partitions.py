"""DeleteRecords 0-2 and ElectLeaders 0-2 (Kafka 2.8's ranges): an admin client's requests about partitions'
records and leaders, onto the same BrokerOperations as the gRPC door (delete_records) and the controller's
ElectLeaders (elect_leaders forwards it to the controller process)."""

from __future__ import annotations

import importlib
from typing import Any

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, build, encode, kio_error, millis, to_millis
from broker.api.operations import group_by_topic
from proto.errors import ErrorCode
from proto.types import TopicPartition

# Kafka's ElectionType.PREFERRED: what ElectLeaders v0, which has no election_type, asks for.
PREFERRED = 0


async def handle_delete_records(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    """Delete on each topic (KafkaApis.handleDeleteRecordsRequest); answered once every in-sync replica's log
    start offset reached the offset, or at the timeout."""
    schema = importlib.import_module(f"kio.schema.delete_records.v{header.api_version}.response")
    requested = [(TopicPartition(t.name, p.partition_index), p.offset) for t in request.topics for p in t.partitions]
    answers = await context.operations.delete_records(context.session, to_millis(request.timeout), requested)
    return encode(build(schema.DeleteRecordsResponse, throttle_time=millis(0), topics=tuple(
        build(schema.DeleteRecordsTopicResult, name=topic, partitions=tuple(
            build(schema.DeleteRecordsPartitionResult, partition_index=index, low_watermark=low_watermark,
                  error_code=kio_error(error))
            for index, (low_watermark, error) in dict(partitions).items()))
        for topic, partitions in group_by_topic((tp, answers[tp]) for tp, _ in requested).items())))


async def handle_elect_leaders(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    """Alter on the cluster (KafkaApis.handleElectReplicaLeader); v1+ carries the election type and a top-level
    error code, v0 elects preferred replicas. A partition's message is null unless it failed."""
    schema = importlib.import_module(f"kio.schema.elect_leaders.v{header.api_version}.response")
    partitions = None if request.topic_partitions is None else [
        TopicPartition(t.topic, index) for t in request.topic_partitions for index in t.partitions]
    error, results = await context.operations.elect_leaders(
        context.session, getattr(request, "election_type", PREFERRED), partitions, to_millis(request.timeout))
    return encode(build(schema.ElectLeadersResponse, throttle_time=millis(0), error_code=kio_error(error),
                        replica_election_results=tuple(
        build(schema.ReplicaElectionResult, topic=topic, partition_result=tuple(
            build(schema.PartitionResult, partition_id=index, error_code=kio_error(code),
                  error_message=None if code is ErrorCode.NONE else message)
            for index, (code, message) in answers))
        for topic, answers in group_by_topic(sorted(results.items())).items())))

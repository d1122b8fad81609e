"""ListOffsets 1-7 (v6 is flexible, v7 the version a client asks for the max timestamp with, KIP-734) and
OffsetForLeaderEpoch 2-3 (KIP-320: the consumer's leader-epoch check after a leader change; librdkafka 2.1+ sends
it even unadvertised)."""

from __future__ import annotations

import importlib
from typing import Any

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, build, encode, kio_error, millis
from broker.api.operations import duplicates
from broker.replication.partition import FetchIsolation
from proto.errors import ErrorCode
from proto.types import TopicPartition


async def handle_list_offsets(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.list_offsets.v{header.api_version}.response")
    # A replica (replica_id >= 0) reads to the log end, with CLUSTER_ACTION on the cluster (KafkaApis);
    # Kafka clients are consumers (-1): below the HW, with Describe on each topic.
    from_consumer = request.replica_id < 0
    replica_allowed = not from_consumer and context.operations.authorize_follower(context.session)
    # isolation_level (v2+) 1 is READ_COMMITTED: the latest offset is then the last stable offset.
    isolation = FetchIsolation.for_consumer(getattr(request, "isolation_level", 0)) if from_consumer else None
    repeated = duplicates(TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions)
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if not (from_consumer or replica_allowed):
                found_error, timestamp, offset, epoch = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1, -1, -1
            else:
                found = context.operations.list_offset(context.session if from_consumer else None, tp, p.timestamp,
                                                       isolation, getattr(p, "current_leader_epoch", -1),
                                                       tp in repeated)
                found_error, timestamp, offset, epoch = found.error, found.timestamp, found.offset, found.leader_epoch
            partitions.append(build(schema.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                                    error_code=kio_error(found_error), timestamp=timestamp, offset=offset,
                                    leader_epoch=epoch))
        topics.append(build(schema.ListOffsetsTopicResponse, name=t.name, partitions=tuple(partitions)))
    return encode(build(schema.ListOffsetsResponse, throttle_time=millis(0), topics=tuple(topics)))


async def handle_offset_for_leader_epoch(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.offset_for_leader_epoch.v{header.api_version}.response")
    # v3+ carries replica_id: a follower's request needs CLUSTER_ACTION on the cluster (KafkaApis), a consumer's
    # Describe on each topic.
    from_follower = getattr(request, "replica_id", -2) >= 0
    follower_allowed = from_follower and context.operations.authorize_follower(context.session)
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            if from_follower and not follower_allowed:
                error, epoch, end_offset = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1, -1
            else:
                error, epoch, end_offset = context.operations.offset_for_leader_epoch(
                    None if from_follower else context.session, TopicPartition(t.topic, p.partition),
                    p.current_leader_epoch, p.leader_epoch)
            partitions.append(build(schema.EpochEndOffset, error_code=kio_error(error), partition=p.partition,
                                    leader_epoch=epoch, end_offset=end_offset))
        topics.append(build(schema.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(partitions)))
    return encode(build(schema.OffsetForLeaderEpochResponse, throttle_time=millis(0), topics=tuple(topics)))

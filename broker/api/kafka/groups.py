"""The group family on the Kafka listener, onto the GroupCoordinator (broker/coordinator/group/):
FindCoordinator 0-3 (a transactional id's coordinator from TransactionOperations), JoinGroup 0-7, SyncGroup 0-5,
Heartbeat 0-4, LeaveGroup 0-4, OffsetCommit 2-8, OffsetFetch 1-7, DescribeGroups 0-5, ListGroups 0-4,
DeleteGroups 0-2, OffsetDelete 0 (KIP-496) and TxnOffsetCommit 0-3 (KIP-98, KIP-447).

Only the wire lives here; every rule is the coordinator's. What differs by version:
- JoinGroup v0 has no rebalance timeout (the session timeout stands in, as in Kafka); from v4 a member
  without an id is given one first (MEMBER_ID_REQUIRED, KIP-394); v5+ carry group.instance.id.
- OffsetCommit v2-v4 carry a retention time (an explicit expire timestamp); v6+ a leader epoch; v7+
  group.instance.id. OffsetFetch v2+ answer a group-level error, and null topics (v2+) mean all partitions;
  v7 may require stable offsets (UNSTABLE_OFFSET_COMMIT while a commit of the partition is pending, KIP-447).
- TxnOffsetCommit v2+ carry a leader epoch; v3 the member, its group.instance.id and generation (KIP-447);
  v0-v1 clients predate KAFKA-7296 and are answered COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS.
- LeaveGroup v0-v2 name one member; v3+ a batch of members.
- DescribeGroups v3+ answer, when asked, each group's authorized operations (KIP-430).
"""

from __future__ import annotations

import importlib
from typing import Any

from broker.api.group_operations import COORDINATOR_KEY_GROUP, COORDINATOR_KEY_TRANSACTION
from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, build, encode, kio_error, millis, to_millis
from broker.coordinator.group.results import MemberIdentity, OffsetAndMetadata
from common.security.acl import AUTHORIZED_OPERATIONS_OMITTED, ResourceType
from proto.errors import ErrorCode
from proto.types import TopicPartition


def _schema(api: str, header: RequestHeader) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{header.api_version}.response")


async def handle_find_coordinator(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("find_coordinator", header)
    key_type = getattr(request, "key_type", COORDINATOR_KEY_GROUP)
    if key_type == COORDINATOR_KEY_TRANSACTION:
        found = await context.transactions.find_coordinator(context.session, request.key, context.listener_name)
    else:
        found = await context.groups.find_coordinator(context.session, request.key, context.listener_name, key_type)
    error, node, message = found.error, found.node, found.message
    return encode(build(schema.FindCoordinatorResponse, throttle_time=millis(0), error_code=kio_error(error),
                        error_message=message, node_id=-1 if node is None else node.id,
                        host="" if node is None else node.host, port=-1 if node is None else node.port))


async def handle_join_group(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("join_group", header)
    session_timeout_ms = to_millis(request.session_timeout)
    rebalance = getattr(request, "rebalance_timeout", None)
    result = await context.groups.join_group(context.session,
        request.group_id, request.member_id, getattr(request, "group_instance_id", None),
        require_known_member_id=header.api_version >= 4, client_id=header.client_id or "",
        client_host=f"/{context.client_host}",  # Java's InetAddress.toString, as Kafka stores and shows it
        rebalance_timeout_ms=session_timeout_ms if rebalance is None else to_millis(rebalance),
        session_timeout_ms=session_timeout_ms, protocol_type=request.protocol_type,
        protocols=[(p.name, p.metadata) for p in request.protocols])
    members = tuple(build(schema.JoinGroupResponseMember, member_id=m.member_id, group_instance_id=m.group_instance_id,
                          metadata=m.metadata) for m in result.members)
    return encode(build(schema.JoinGroupResponse, throttle_time=millis(0), error_code=kio_error(result.error),
                        generation_id=result.generation_id, protocol_type=result.protocol_type,
                        # v0-v6 have a non-null protocol name: empty until a protocol is chosen
                        protocol_name=result.protocol_name if header.api_version >= 7 else result.protocol_name or "",
                        leader=result.leader_id, member_id=result.member_id, members=members))


async def handle_sync_group(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("sync_group", header)
    result = await context.groups.sync_group(context.session,
        request.group_id, request.generation_id, request.member_id, getattr(request, "group_instance_id", None),
        getattr(request, "protocol_type", None), getattr(request, "protocol_name", None),
        {a.member_id: a.assignment for a in request.assignments})
    return encode(build(schema.SyncGroupResponse, throttle_time=millis(0), error_code=kio_error(result.error),
                        protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                        assignment=result.assignment))


async def handle_heartbeat(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("heartbeat", header)
    error = await context.groups.heartbeat(context.session, request.group_id, request.member_id,
                                                      getattr(request, "group_instance_id", None),
                                                      request.generation_id)
    return encode(build(schema.HeartbeatResponse, throttle_time=millis(0), error_code=kio_error(error)))


async def handle_leave_group(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("leave_group", header)
    batch = header.api_version >= 3
    leaving = ([MemberIdentity(m.member_id, m.group_instance_id) for m in request.members] if batch
               else [MemberIdentity(request.member_id)])
    result = await context.groups.leave_group(context.session, request.group_id, leaving)
    error = result.error
    if not batch and error is ErrorCode.NONE and result.members:
        error = result.members[0][1]  # one member: its error is the request's
    members = tuple(build(schema.MemberResponse, member_id=m.member_id, group_instance_id=m.group_instance_id,
                          error_code=kio_error(e)) for m, e in result.members) if batch else ()
    return encode(build(schema.LeaveGroupResponse, throttle_time=millis(0), error_code=kio_error(error),
                        members=members))


async def handle_offset_commit(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("offset_commit", header)
    now = context.groups.coordinator.now_ms()
    retention = getattr(request, "retention_time", None)
    retention_ms = -1 if retention is None else to_millis(retention)
    expire = now + retention_ms if retention_ms >= 0 else -1  # v2-v4: -1 means the broker's retention
    offsets = {}
    for t in request.topics:
        for p in t.partitions:
            offsets[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata or "", now, expire)
    errors = await context.groups.commit_offsets(context.session,
        request.group_id, request.member_id, getattr(request, "group_instance_id", None),
        request.generation_id_or_member_epoch, offsets)
    topics = tuple(
        build(schema.OffsetCommitResponseTopic, name=t.name, partitions=tuple(
            build(schema.OffsetCommitResponsePartition, partition_index=p.partition_index,
                  error_code=kio_error(errors[TopicPartition(t.name, p.partition_index)]))
            for p in t.partitions))
        for t in request.topics)
    return encode(build(schema.OffsetCommitResponse, throttle_time=millis(0), topics=topics))


async def handle_txn_offset_commit(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("txn_offset_commit", header)
    now = context.groups.coordinator.now_ms()
    offsets = {TopicPartition(t.name, p.partition_index): OffsetAndMetadata(
        p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata or "", now)
        for t in request.topics for p in t.partitions}
    errors = await context.groups.txn_commit_offsets(
        context.session, request.transactional_id, request.group_id, request.producer_id, request.producer_epoch,
        getattr(request, "member_id", ""), getattr(request, "group_instance_id", None),
        getattr(request, "generation_id", -1), offsets)
    if header.api_version < 2:
        errors = {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE if e is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else e
                  for tp, e in errors.items()}
    topics = tuple(
        build(schema.TxnOffsetCommitResponseTopic, name=t.name, partitions=tuple(
            build(schema.TxnOffsetCommitResponsePartition, partition_index=p.partition_index,
                  error_code=kio_error(errors[TopicPartition(t.name, p.partition_index)]))
            for p in t.partitions))
        for t in request.topics)
    return encode(build(schema.TxnOffsetCommitResponse, throttle_time=millis(0), topics=topics))


async def handle_offset_fetch(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("offset_fetch", header)
    requested = None if request.topics is None else [
        TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
    result = await context.groups.fetch_offsets(context.session, request.group_id, requested,
                                                getattr(request, "require_stable", False))
    group_error = result.error
    by_topic: dict[str, list[Any]] = {}
    if group_error is ErrorCode.NONE or (header.api_version < 2 and requested is not None):
        # v0-v1 have no group-level error: each partition carries it.
        partition_error = group_error if header.api_version < 2 else ErrorCode.NONE
        for tp in requested if requested is not None else sorted(result.offsets):
            found = result.offsets.get(tp)
            by_topic.setdefault(tp.topic, []).append(build(
                schema.OffsetFetchResponsePartition, partition_index=tp.partition,
                committed_offset=-1 if found is None else found.offset,
                committed_leader_epoch=-1 if found is None else found.leader_epoch,
                metadata="" if found is None else found.metadata,
                error_code=kio_error(partition_error if found is None or partition_error is not ErrorCode.NONE
                                     else found.error)))
    topics = tuple(build(schema.OffsetFetchResponseTopic, name=name, partitions=tuple(partitions))
                   for name, partitions in by_topic.items())
    return encode(build(schema.OffsetFetchResponse, throttle_time=millis(0), topics=topics,
                        error_code=kio_error(group_error)))


async def handle_describe_groups(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("describe_groups", header)
    summaries = await context.groups.describe_groups(context.session, list(request.groups))
    with_operations = getattr(request, "include_authorized_operations", False)  # v3+ (KIP-430)

    def authorized_operations(group_id: str, error: ErrorCode) -> int:
        # As KafkaApis: only a group described without error (a Dead, unknown one too) gets its operations.
        if with_operations and error is ErrorCode.NONE:
            return context.operations.authorized_operations(context.session, ResourceType.GROUP, group_id)
        return AUTHORIZED_OPERATIONS_OMITTED

    groups = tuple(
        build(schema.DescribedGroup, error_code=kio_error(s.error), group_id=s.group_id, group_state=s.state,
              protocol_type=s.protocol_type, protocol_data=s.protocol,
              authorized_operations=authorized_operations(s.group_id, s.error),
              members=tuple(build(schema.DescribedGroupMember, member_id=m.member_id,
                                  group_instance_id=m.group_instance_id, client_id=m.client_id,
                                  client_host=m.client_host, member_metadata=m.metadata,
                                  member_assignment=m.assignment) for m in s.members))
        for s in summaries)
    return encode(build(schema.DescribeGroupsResponse, throttle_time=millis(0), groups=groups))


async def handle_list_groups(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("list_groups", header)
    states = getattr(request, "states_filter", None)
    result = await context.groups.list_groups(context.session, set(states) if states else None)
    return encode(build(schema.ListGroupsResponse, throttle_time=millis(0), error_code=kio_error(result.error),
                        groups=tuple(build(schema.ListedGroup, group_id=g.group_id, protocol_type=g.protocol_type,
                                           group_state=g.state) for g in result.groups)))


async def handle_delete_groups(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("delete_groups", header)
    results = await context.groups.delete_groups(context.session, list(dict.fromkeys(request.groups_names)))
    return encode(build(schema.DeleteGroupsResponse, throttle_time=millis(0), results=tuple(
        build(schema.DeletableGroupResult, group_id=group_id, error_code=kio_error(error))
        for group_id, error in results.items())))


async def handle_offset_delete(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("offset_delete", header)
    result = await context.groups.delete_offsets(
        context.session, request.group_id, [TopicPartition(t.name, p.partition_index)
                                            for t in request.topics for p in t.partitions])
    by_topic: dict[str, list[Any]] = {}
    for tp, error in result.partitions.items():
        by_topic.setdefault(tp.topic, []).append(build(schema.OffsetDeleteResponsePartition,
                                                       partition_index=tp.partition, error_code=kio_error(error)))
    return encode(build(schema.OffsetDeleteResponse, throttle_time=millis(0), error_code=kio_error(result.error),
                        topics=tuple(build(schema.OffsetDeleteResponseTopic, name=name, partitions=tuple(partitions))
                                     for name, partitions in by_topic.items())))

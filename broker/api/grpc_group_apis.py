"""The consumer-group RPCs of the gRPC door: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, TxnOffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete (Kafka's KafkaApis
handle*Request for groups), each a translation between proto/minibroker.proto and the GroupCoordinator's plain values
(broker/coordinator/group/), the same coordinator the Kafka listener serves, so a project-client member and
a Kafka-client member of one group meet in it.

A mixin of KafkaApis (broker/api/grpc_apis.py): it needs the coordinator and
the listener these APIs are served on (FindCoordinator answers with the
coordinator's address on that listener).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import grpc

from broker.api.group_operations import COORDINATOR_KEY_TRANSACTION, GroupOperations
from broker.api.transaction_operations import TransactionOperations
from broker.coordinator.group.results import NO_LEADER_EPOCH, MemberIdentity, OffsetAndMetadata
from common.security.authorizer import Session
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode
from proto.types import TopicPartition

Context = grpc.aio.ServicerContext[Any, Any]



def client_host(context: Context) -> str:
    """The member's address as Kafka shows it (InetAddress.toString: "/127.0.0.1") from gRPC's peer string
    ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000")."""
    peer = context.peer() or ""
    _, _, address = peer.partition(":")
    host = address.rsplit(":", 1)[0] if address.count(":") >= 1 else address
    return "/" + host.strip("[]")


def _optional(message: Any, name: str) -> str | None:
    return getattr(message, name) if message.HasField(name) else None


async def _commit_answers(
        topics: Iterable[pb.OffsetCommitRequest.OffsetCommitRequestTopic],
        commit: Callable[[dict[TopicPartition, OffsetAndMetadata]], Awaitable[dict[TopicPartition, ErrorCode]]]
) -> list[pb.OffsetCommitResponse.OffsetCommitResponseTopic]:
    """OffsetCommit's and TxnOffsetCommit's shared half: the request's offsets to `commit`, its answers per
    partition in request order (a partition named twice: INVALID_REQUEST for all, nothing committed)."""
    requested = [(TopicPartition(t.name, p.partition_index), p) for t in topics for p in t.partitions]
    offsets = {tp: OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
               for tp, p in requested}
    if len(offsets) != len(requested):
        errors = dict.fromkeys(offsets, ErrorCode.INVALID_REQUEST)
    else:
        errors = await commit(offsets)
    answers: dict[str, pb.OffsetCommitResponse.OffsetCommitResponseTopic] = {}
    for tp, _ in requested:
        if tp.topic not in answers:
            answers[tp.topic] = pb.OffsetCommitResponse.OffsetCommitResponseTopic(name=tp.topic)
        answers[tp.topic].partitions.add(partition_index=tp.partition, error_code=errors[tp])
    return list(answers.values())


class GroupApis:
    # Who asks (KafkaApis._session: the gRPC call's authenticated principal), for the ACL checks.
    _session: Callable[[Context], Session]
    _groups: GroupOperations
    _transactions: TransactionOperations
    _listener_name: str

    async def FindCoordinator(self, request: pb.FindCoordinatorRequest,
                              context: Context) -> pb.FindCoordinatorResponse:
        if request.key_type == COORDINATOR_KEY_TRANSACTION:
            found = await self._transactions.find_coordinator(self._session(context), request.key,
                                                              self._listener_name)
        else:
            found = await self._groups.find_coordinator(self._session(context), request.key, self._listener_name,
                                                        request.key_type)
        response = pb.FindCoordinatorResponse(error_code=found.error, node_id=-1, port=-1)
        if found.message is not None:
            response.error_message = found.message
        if found.node is not None:
            response.node_id, response.host, response.port = found.node.id, found.node.host, found.node.port
        return response

    async def JoinGroup(self, request: pb.JoinGroupRequest, context: Context) -> pb.JoinGroupResponse:
        result = await self._groups.join_group(self._session(context),
            request.group_id, request.member_id, _optional(request, "group_instance_id"),
            require_known_member_id=True, client_id=request.client_id, client_host=client_host(context),
            rebalance_timeout_ms=request.rebalance_timeout_ms, session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type, protocols=[(p.name, p.metadata) for p in request.protocols])
        response = pb.JoinGroupResponse(error_code=result.error, generation_id=result.generation_id,
                                        leader=result.leader_id, member_id=result.member_id)
        if result.protocol_type is not None:
            response.protocol_type = result.protocol_type
        if result.protocol_name is not None:
            response.protocol_name = result.protocol_name
        for m in result.members:
            member = response.members.add(member_id=m.member_id, metadata=m.metadata)
            if m.group_instance_id is not None:
                member.group_instance_id = m.group_instance_id
        return response

    async def SyncGroup(self, request: pb.SyncGroupRequest, context: Context) -> pb.SyncGroupResponse:
        assignments = {a.member_id: a.assignment for a in request.assignments}
        if len(assignments) != len(request.assignments):
            return pb.SyncGroupResponse(error_code=ErrorCode.INVALID_REQUEST)
        result = await self._groups.sync_group(self._session(context),
            request.group_id, request.generation_id, request.member_id, _optional(request, "group_instance_id"),
            _optional(request, "protocol_type"), _optional(request, "protocol_name"), assignments)
        response = pb.SyncGroupResponse(error_code=result.error, assignment=result.assignment)
        if result.protocol_type is not None:
            response.protocol_type = result.protocol_type
        if result.protocol_name is not None:
            response.protocol_name = result.protocol_name
        return response

    async def Heartbeat(self, request: pb.HeartbeatRequest, context: Context) -> pb.HeartbeatResponse:
        error = await self._groups.heartbeat(self._session(context), request.group_id, request.member_id,
                                                        _optional(request, "group_instance_id"),
                                                        request.generation_id)
        return pb.HeartbeatResponse(error_code=error)

    async def LeaveGroup(self, request: pb.LeaveGroupRequest, context: Context) -> pb.LeaveGroupResponse:
        if not request.members:
            return pb.LeaveGroupResponse(error_code=ErrorCode.INVALID_REQUEST)
        result = await self._groups.leave_group(self._session(context),
            request.group_id, [MemberIdentity(m.member_id, _optional(m, "group_instance_id"))
                               for m in request.members])
        response = pb.LeaveGroupResponse(error_code=result.error)
        for identity, error in result.members:
            member = response.members.add(member_id=identity.member_id, error_code=error)
            if identity.group_instance_id is not None:
                member.group_instance_id = identity.group_instance_id
        return response

    async def OffsetCommit(self, request: pb.OffsetCommitRequest, context: Context) -> pb.OffsetCommitResponse:
        async def commit(offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, ErrorCode]:
            return await self._groups.commit_offsets(self._session(context),
                request.group_id, request.member_id, _optional(request, "group_instance_id"), request.generation_id,
                offsets)
        response = pb.OffsetCommitResponse()
        response.topics.extend(await _commit_answers(request.topics, commit))
        return response

    async def TxnOffsetCommit(self, request: pb.TxnOffsetCommitRequest,
                              context: Context) -> pb.TxnOffsetCommitResponse:
        async def commit(offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, ErrorCode]:
            return await self._groups.txn_commit_offsets(self._session(context),
                request.transactional_id, request.group_id, request.producer_id, request.producer_epoch,
                request.member_id, _optional(request, "group_instance_id"), request.generation_id, offsets)
        response = pb.TxnOffsetCommitResponse()
        response.topics.extend(await _commit_answers(request.topics, commit))
        return response

    async def OffsetFetch(self, request: pb.OffsetFetchRequest, context: Context) -> pb.OffsetFetchResponse:
        partitions = ([TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
                      if request.topics else None)
        result = await self._groups.fetch_offsets(self._session(context), request.group_id, partitions,
                                                  request.require_stable)
        response = pb.OffsetFetchResponse(error_code=result.error)
        topics: dict[str, pb.OffsetFetchResponse.OffsetFetchResponseTopic] = {}
        for tp, offset in result.offsets.items():
            if tp.topic not in topics:
                topics[tp.topic] = response.topics.add(name=tp.topic)
            topics[tp.topic].partitions.add(
                partition_index=tp.partition, committed_offset=offset.offset, metadata=offset.metadata,
                committed_leader_epoch=offset.leader_epoch if offset.leader_epoch is not None else NO_LEADER_EPOCH,
                error_code=offset.error)
        return response

    async def DescribeGroups(self, request: pb.DescribeGroupsRequest,
                             context: Context) -> pb.DescribeGroupsResponse:
        response = pb.DescribeGroupsResponse()
        for summary in await self._groups.describe_groups(self._session(context), list(request.groups)):
            group = response.groups.add(error_code=summary.error, group_id=summary.group_id,
                                        group_state=summary.state, protocol_type=summary.protocol_type,
                                        protocol_data=summary.protocol)
            for m in summary.members:
                member = group.members.add(member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
                                           member_metadata=m.metadata, member_assignment=m.assignment)
                if m.group_instance_id is not None:
                    member.group_instance_id = m.group_instance_id
        return response

    async def ListGroups(self, request: pb.ListGroupsRequest, context: Context) -> pb.ListGroupsResponse:
        result = await self._groups.list_groups(self._session(context), set(request.states_filter) or None)
        response = pb.ListGroupsResponse(error_code=result.error)
        for g in result.groups:
            response.groups.add(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state)
        return response

    async def DeleteGroups(self, request: pb.DeleteGroupsRequest, context: Context) -> pb.DeleteGroupsResponse:
        results = await self._groups.delete_groups(self._session(context), list(request.groups_names))
        response = pb.DeleteGroupsResponse()
        for group_id, error in results.items():
            response.results.add(group_id=group_id, error_code=error)
        return response

    async def OffsetDelete(self, request: pb.OffsetDeleteRequest, context: Context) -> pb.OffsetDeleteResponse:
        result = await self._groups.delete_offsets(self._session(context), request.group_id, [
            TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes])
        response = pb.OffsetDeleteResponse(error_code=result.error)
        topics: dict[str, pb.OffsetDeleteResponse.OffsetDeleteResponseTopic] = {}
        for tp, error in result.partitions.items():
            if tp.topic not in topics:
                topics[tp.topic] = response.topics.add(name=tp.topic)
            topics[tp.topic].partitions.add(partition_index=tp.partition, error_code=error)
        return response

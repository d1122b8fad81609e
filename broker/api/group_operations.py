"""What both front doors ask of the group coordinator, with Kafka's ACL checks in front (KafkaApis'
handle*GroupRequest / handleOffset*Request authorization, Kafka 2.8):

  FindCoordinator, DescribeGroups   Describe on the group (FindCoordinator for a transactional id: the doors
                                    send it to transaction_operations.py)
  JoinGroup, SyncGroup, Heartbeat,  Read on the group
  LeaveGroup
  OffsetCommit                      Read on the group, then Read on each topic (only the rest is committed)
  TxnOffsetCommit                   Write on the TransactionalId (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                                    Read on the group, then Read on each topic
  OffsetFetch                       Describe on the group, then Describe on each topic
  ListGroups                        Describe on the cluster, else only the groups the principal may describe
  DeleteGroups                      Delete on each group
  OffsetDelete                      Delete on the group, then Read on each topic (only the rest is deleted)

A refused group is GROUP_AUTHORIZATION_FAILED, a refused topic TOPIC_AUTHORIZATION_FAILED. With no
authorizer configured every check passes (BrokerOperations.authorize), and these are the coordinator's calls.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.api.operations import BrokerOperations
from broker.coordinator.group.group_coordinator import GroupCoordinator
from broker.coordinator.group.results import (
    DeleteOffsetsResult,
    FindCoordinatorResult,
    GroupSummary,
    JoinGroupResult,
    LeaveGroupResult,
    ListGroupsResult,
    MemberIdentity,
    OffsetAndMetadata,
    OffsetFetchResult,
    PartitionOffset,
    SyncGroupResult,
)
from common.security.acl import AclOperation, ResourceType
from common.security.authorizer import Session
from proto.errors import ErrorCode
from proto.types import TopicPartition

REFUSED_GROUP = ErrorCode.GROUP_AUTHORIZATION_FAILED
# FindCoordinator's key types (Kafka's CoordinatorType).
COORDINATOR_KEY_GROUP = 0
COORDINATOR_KEY_TRANSACTION = 1


class GroupOperations:
    def __init__(self, coordinator: GroupCoordinator, operations: BrokerOperations) -> None:
        self.coordinator = coordinator
        self._operations = operations

    def _group_allowed(self, session: Session, operation: AclOperation, group_id: str) -> bool:
        return self._operations.authorize(session, operation, ResourceType.GROUP, group_id)

    async def find_coordinator(self, session: Session, key: str, listener_name: str,
                               key_type: int = COORDINATOR_KEY_GROUP) -> FindCoordinatorResult:
        """The coordinator of a group; any key type but a group's or a transactional id's (which the doors send to
        TransactionOperations) is INVALID_REQUEST (Kafka's "Unknown coordinator type in FindCoordinator
        request")."""
        if key_type != COORDINATOR_KEY_GROUP:
            return FindCoordinatorResult(ErrorCode.INVALID_REQUEST,
                                         message=f"Unknown coordinator type {key_type} in FindCoordinator request")
        if not self._group_allowed(session, AclOperation.DESCRIBE, key):
            return FindCoordinatorResult(REFUSED_GROUP)
        return await self.coordinator.find_coordinator(key, listener_name)

    async def join_group(self, session: Session, group_id: str, member_id: str, group_instance_id: str | None,
                         require_known_member_id: bool, client_id: str, client_host: str,
                         rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                         protocols: Sequence[tuple[str, bytes]]) -> JoinGroupResult:
        if not self._group_allowed(session, AclOperation.READ, group_id):
            return JoinGroupResult(REFUSED_GROUP, member_id=member_id)
        return await self.coordinator.join_group(
            group_id, member_id, group_instance_id, require_known_member_id, client_id, client_host,
            rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)

    async def sync_group(self, session: Session, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncGroupResult:
        if not self._group_allowed(session, AclOperation.READ, group_id):
            return SyncGroupResult(REFUSED_GROUP)
        return await self.coordinator.sync_group(group_id, generation_id, member_id, group_instance_id,
                                                 protocol_type, protocol_name, assignments)

    async def heartbeat(self, session: Session, group_id: str, member_id: str, group_instance_id: str | None,
                        generation_id: int) -> ErrorCode:
        if not self._group_allowed(session, AclOperation.READ, group_id):
            return REFUSED_GROUP
        return await self.coordinator.heartbeat(group_id, member_id, group_instance_id, generation_id)

    async def leave_group(self, session: Session, group_id: str,
                          members: Sequence[MemberIdentity]) -> LeaveGroupResult:
        if not self._group_allowed(session, AclOperation.READ, group_id):
            return LeaveGroupResult(REFUSED_GROUP)
        return await self.coordinator.leave_group(group_id, members)

    def _readable_offsets(self, session: Session, offsets: dict[TopicPartition, OffsetAndMetadata]
                          ) -> tuple[dict[TopicPartition, OffsetAndMetadata], dict[TopicPartition, ErrorCode]]:
        """The commits of topics the principal may Read, and TOPIC_AUTHORIZATION_FAILED for the others."""
        readable = self._operations.authorized_topics(session, AclOperation.READ, (tp.topic for tp in offsets))
        refused = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in offsets if tp.topic not in readable}
        return {tp: offset for tp, offset in offsets.items() if tp.topic in readable}, refused

    async def commit_offsets(self, session: Session, group_id: str, member_id: str,
                             group_instance_id: str | None, generation_id: int,
                             offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, ErrorCode]:
        if not self._group_allowed(session, AclOperation.READ, group_id):
            return dict.fromkeys(offsets, REFUSED_GROUP)
        allowed, refused = self._readable_offsets(session, offsets)
        committed = await self.coordinator.commit_offsets(group_id, member_id, group_instance_id, generation_id,
                                                          allowed) if allowed else {}
        return {**committed, **refused}

    async def txn_commit_offsets(self, session: Session, transactional_id: str, group_id: str, producer_id: int,
                                 producer_epoch: int, member_id: str, group_instance_id: str | None,
                                 generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]
                                 ) -> dict[TopicPartition, ErrorCode]:
        """Kafka 2.8's handleTxnOffsetCommitRequest: the producer id's authorization is implied by the
        transactional id's."""
        if not self._operations.authorize(session, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                          transactional_id):
            return dict.fromkeys(offsets, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not self._group_allowed(session, AclOperation.READ, group_id):
            return dict.fromkeys(offsets, REFUSED_GROUP)
        allowed, refused = self._readable_offsets(session, offsets)
        committed = await self.coordinator.txn_commit_offsets(
            group_id, producer_id, producer_epoch, member_id, group_instance_id, generation_id,
            allowed) if allowed else {}
        return {**committed, **refused}

    async def fetch_offsets(self, session: Session, group_id: str, partitions: Sequence[TopicPartition] | None,
                            require_stable: bool = False) -> OffsetFetchResult:
        if not self._group_allowed(session, AclOperation.DESCRIBE, group_id):
            return OffsetFetchResult(REFUSED_GROUP)
        result = await self.coordinator.fetch_offsets(group_id, partitions, require_stable)
        named = partitions if partitions is not None else list(result.offsets)
        describable = self._operations.authorized_topics(session, AclOperation.DESCRIBE, (tp.topic for tp in named))
        if partitions is None:  # "all of the group's partitions": those on undescribable topics are left out
            offsets = {tp: o for tp, o in result.offsets.items() if tp.topic in describable}
        else:  # a named partition on an undescribable topic says so, and nothing of its offset
            offsets = {tp: o if tp.topic in describable
                       else PartitionOffset(error=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                       for tp, o in result.offsets.items()}
            offsets.update({tp: PartitionOffset(error=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                            for tp in partitions if tp.topic not in describable})
        return OffsetFetchResult(result.error, offsets)

    async def describe_groups(self, session: Session, group_ids: Sequence[str]) -> list[GroupSummary]:
        allowed = [g for g in group_ids if self._group_allowed(session, AclOperation.DESCRIBE, g)]
        found = {s.group_id: s for s in await self.coordinator.describe_groups(allowed)} if allowed else {}
        return [found.get(g) or GroupSummary(g, REFUSED_GROUP) for g in group_ids]

    async def list_groups(self, session: Session, states: set[str] | None = None) -> ListGroupsResult:
        result = await self.coordinator.list_groups(states)
        if self._operations.authorize_cluster(session, AclOperation.DESCRIBE, log_if_denied=False):
            return result
        return ListGroupsResult(result.error, [
            g for g in result.groups
            if self._operations.authorize(session, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id,
                                          log_if_denied=False)])

    async def delete_groups(self, session: Session, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        allowed = [g for g in group_ids if self._group_allowed(session, AclOperation.DELETE, g)]
        deleted = await self.coordinator.delete_groups(allowed) if allowed else {}
        return {g: deleted.get(g, REFUSED_GROUP) for g in group_ids}

    async def delete_offsets(self, session: Session, group_id: str,
                             partitions: Sequence[TopicPartition]) -> DeleteOffsetsResult:
        if not self._group_allowed(session, AclOperation.DELETE, group_id):
            return DeleteOffsetsResult(REFUSED_GROUP)
        readable = self._operations.authorized_topics(session, AclOperation.READ, (tp.topic for tp in partitions))
        # The coordinator is asked even when no topic is readable: the group's own error comes first.
        result = await self.coordinator.delete_offsets(group_id, [tp for tp in partitions if tp.topic in readable])
        if result.error is not ErrorCode.NONE:
            return result
        refused = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in partitions if tp.topic not in readable}
        return DeleteOffsetsResult(ErrorCode.NONE, {**result.partitions, **refused})

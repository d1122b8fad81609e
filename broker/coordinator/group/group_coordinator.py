"""GroupCoordinator: Kafka's group membership and offset protocol (Kafka 2.x's
coordinator/group/GroupCoordinator.scala), for both front doors, in plain values.

The rebalance, as a Kafka consumer sees it:
 1. FindCoordinator: the leader of the group's __consumer_offsets partition is its coordinator.
 2. JoinGroup: the group goes to PreparingRebalance and waits (DelayedJoin) until every member rejoined or the
    rebalance timeout passed; a new group waits group.initial.rebalance.delay.ms more for others to come
    (InitialDelayedJoin). Then the next generation starts: a protocol is chosen by vote, the group moves to
    CompletingRebalance, and every waiting JoinGroup is answered, the leader's with all members' subscriptions.
    From JoinGroup v4 a member without an id is first given one and told MEMBER_ID_REQUIRED (KIP-394).
 3. SyncGroup: the leader sends the assignment; it is stored in __consumer_offsets (acks=all), the group is
    Stable and each member gets its part. Followers wait for the leader's SyncGroup.
 4. Heartbeat within session.timeout.ms (DelayedHeartbeat), or the member is removed and the group
    rebalances; REBALANCE_IN_PROGRESS tells a member to rejoin.
 5. OffsetCommit from a member of the current generation, or standalone (generation -1, no member id) for a
    group without members; OffsetFetch; LeaveGroup removes members at once.

Transactions (KIP-98, KIP-447): TxnOffsetCommit stores a transactional producer's offsets pending until its
transaction's marker reaches the group's partition (handle_txn_completion); from v3 it names the member and
generation, which are checked when given. OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a
partition with a pending commit.

Administration: DescribeGroups, ListGroups, DeleteGroups (Empty groups only) and OffsetDelete (KIP-496: an
Empty group's offsets, or a consumer group's offsets of topics its members do not subscribe to); deleted and
expired offsets share the manager's cleanupGroupMetadata.

Static membership (KIP-345, group.instance.id): a static member that rejoins without a member id gets a new id
in its old place and no rebalance unless its protocols changed; the old id is fenced (FENCED_INSTANCE_ID).
A static member's session timeout removes it as it does a dynamic one, and LeaveGroup by instance id works.

Every method runs on the broker's event loop, as do the purgatory timers that call back into it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from broker.config.metadata_cache import MetadataCache
from broker.coordinator.group.delayed_heartbeat import DelayedHeartbeat, member_key
from broker.coordinator.group.delayed_join import DelayedJoin, InitialDelayedJoin, group_join_key
from broker.coordinator.group.group_metadata import GroupMetadata, GroupState, MemberMetadata
from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC_NAME, GroupMetadataManager
from broker.coordinator.group.results import (
    UNKNOWN_MEMBER_ID,
    DeleteOffsetsResult,
    FindCoordinatorResult,
    GroupOverview,
    GroupSummary,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    ListGroupsResult,
    MemberIdentity,
    MemberSummary,
    OffsetAndMetadata,
    OffsetFetchResult,
    PartitionOffset,
    SyncGroupResult,
)
from broker.purgatory.purgatory import DelayedOperationPurgatory
from proto.errors import ErrorCode
from proto.types import TopicPartition
from zk.paths import NO_LEADER

__all__ = [
    "DeleteOffsetsResult", "FindCoordinatorResult", "GroupConfig", "GroupCoordinator", "GroupOverview",
    "GroupSummary", "JoinGroupMember", "JoinGroupResult", "LeaveGroupResult", "ListGroupsResult", "MemberIdentity",
    "MemberSummary", "OffsetAndMetadata", "OffsetFetchResult", "PartitionOffset", "SyncGroupResult",
]

logger = logging.getLogger(__name__)

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member's session until its first rebalance completes.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The group.* keys (Kafka's GroupConfig)."""

    min_session_timeout_ms: int
    max_session_timeout_ms: int
    initial_rebalance_delay_ms: int
    max_size: int


class GroupCoordinator:
    def __init__(self, broker_id: int, config: GroupConfig, manager: GroupMetadataManager,
                 heartbeat_purgatory: DelayedOperationPurgatory[DelayedHeartbeat],
                 join_purgatory: DelayedOperationPurgatory[DelayedJoin], metadata_cache: MetadataCache,
                 ensure_offsets_topic: Callable[[], Awaitable[ErrorCode]], time_ms: Callable[[], int]) -> None:
        self.broker_id = broker_id
        self.config = config
        self.manager = manager
        self._heartbeats = heartbeat_purgatory
        self._joins = join_purgatory
        self._metadata_cache = metadata_cache
        self._ensure_offsets_topic = ensure_offsets_topic
        self._time_ms = time_ms
        self._active = False
        # Loads and appends in flight (a reference keeps each task alive; shutdown cancels them).
        self._tasks: set[asyncio.Task[None]] = set()

    def now_ms(self) -> int:
        """The coordinator's clock: commit timestamps and expire times are in it."""
        return self._time_ms()

    def startup(self) -> None:
        self._active = True

    def shutdown(self) -> None:
        """Stop answering; what members wait for is dropped (they find the next coordinator)."""
        self._active = False
        for task in self._tasks:
            task.cancel()

    # ------------------------------------------------------------------ FindCoordinator

    def partition_for(self, group_id: str) -> int:
        return self.manager.partition_for(group_id)

    async def find_coordinator(self, group_id: str, listener_name: str) -> FindCoordinatorResult:
        """The leader of the group's __consumer_offsets partition as reached on `listener_name`; the topic is
        created on first use (COORDINATOR_NOT_AVAILABLE until it has a leader)."""
        error = await self._ensure_offsets_topic()
        if error is not ErrorCode.NONE:
            return FindCoordinatorResult(error)
        info = self._metadata_cache.get_partition_info(TopicPartition(GROUP_METADATA_TOPIC_NAME,
                                                                      self.partition_for(group_id)))
        if info is None or info.leader == NO_LEADER:
            return FindCoordinatorResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        node = next((n for n in self._metadata_cache.get_alive_brokers(listener_name) if n.id == info.leader), None)
        if node is None:
            return FindCoordinatorResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return FindCoordinatorResult(ErrorCode.NONE, node)

    # ------------------------------------------------------------------ leadership of __consumer_offsets

    def on_leadership_change(self, became_leader: Sequence[tuple[TopicPartition, int]],
                             resigned: Sequence[tuple[TopicPartition, int | None]]) -> None:
        """Kafka's onLeadershipChange, for the __consumer_offsets partitions among those changed."""
        for tp, epoch in became_leader:
            if tp.topic == GROUP_METADATA_TOPIC_NAME:
                self.on_election(tp.partition, epoch)
        for tp, maybe_epoch in resigned:
            if tp.topic == GROUP_METADATA_TOPIC_NAME:
                self.on_resignation(tp.partition, maybe_epoch)

    def on_election(self, partition: int, leader_epoch: int) -> None:
        """This broker leads __consumer_offsets-`partition` now: load its groups (Kafka's handleGroupImmigration)."""
        if not self.manager.begin_loading(partition, leader_epoch):
            return
        logger.info("Scheduling loading of offsets and group metadata from %s-%d for epoch %d",
                    GROUP_METADATA_TOPIC_NAME, partition, leader_epoch)
        self._spawn(self._load(partition, leader_epoch))

    async def _load(self, partition: int, leader_epoch: int) -> None:
        for group in await self.manager.load_groups_and_offsets(partition, leader_epoch):
            # Kafka's onGroupLoaded: every member gets a fresh session from now.
            for member in group.members.values():
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def on_resignation(self, partition: int, leader_epoch: int | None) -> None:
        """This broker no longer leads the partition: drop its groups (Kafka's handleGroupEmigration)."""
        for group in self.manager.remove_groups_for_partition(partition, leader_epoch):
            self._on_group_unloaded(group)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        group.transition_to(GroupState.DEAD, self._time_ms())
        for member in list(group.members.values()):
            if previous is GroupState.PREPARING_REBALANCE and member.awaiting_join_callback is not None:
                self._invoke_join_callback(group, member, JoinGroupResult(ErrorCode.NOT_COORDINATOR,
                                                                          member_id=member.member_id))
            elif previous in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) \
                    and member.awaiting_sync_callback is not None:
                self._invoke_sync_callback(member, SyncGroupResult(ErrorCode.NOT_COORDINATOR))
            self._heartbeats.check_and_complete(member_key(group.group_id, member.member_id))
        self._joins.check_and_complete(group_join_key(group.group_id))

    # ------------------------------------------------------------------ shared checks

    def _validate_group_status(self, group_id: str) -> ErrorCode | None:
        """Kafka's validateGroupStatus: why this broker cannot serve the group now, or None."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_group_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_group_local(group_id):
            return ErrorCode.NOT_COORDINATOR
        return None

    # ------------------------------------------------------------------ JoinGroup

    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                         require_known_member_id: bool, client_id: str, client_host: str,
                         rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                         protocols: Sequence[tuple[str, bytes]]) -> JoinGroupResult:
        """JoinGroup; `require_known_member_id` for v4+ (KIP-394); rebalance_timeout_ms is the session timeout for
        v0, which had none. Answered when the rebalance completes."""
        protocols = list(protocols)
        error = self._validate_group_status(group_id)
        if error is not None:
            return JoinGroupResult(error, member_id=member_id)
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return JoinGroupResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id)
        is_unknown_member = member_id == UNKNOWN_MEMBER_ID
        group = self.manager.get_group(group_id)
        if group is None:
            if not is_unknown_member:
                return JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            group = self.manager.add_group(GroupMetadata(group_id, current_state_timestamp=self._time_ms()))
        if group.is_(GroupState.DEAD):
            # Removed meanwhile (emigrated or deleted): let the member find the coordinator again.
            return JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not group.supports_protocols(protocol_type, (name for name, _ in protocols)):
            return JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if not self._accept_joining_member(group, member_id):
            self._maybe_remove_unaccepted_member(group)
            return JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=member_id)
        future: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()

        def respond(result: JoinGroupResult) -> None:
            if not future.done():
                future.set_result(result)

        if is_unknown_member:
            self._do_unknown_join_group(group, group_instance_id, require_known_member_id, client_id, client_host,
                                        rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, respond)
        else:
            self._do_current_member_join_group(group, member_id, group_instance_id, client_id, client_host,
                                               rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                               respond)
        if group.is_(GroupState.PREPARING_REBALANCE):
            # This may have been the member the rebalance waited for.
            self._joins.check_and_complete(group_join_key(group_id))
        return await future

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """group.max.size: a member already in (or pending) may stay; a new one only below the limit."""
        if group.has(member_id) or group.is_pending_member(member_id):
            return True
        return group.size() + len(group.pending_members) < self.config.max_size

    def _maybe_remove_unaccepted_member(self, group: GroupMetadata) -> None:
        """A group created for a join it then refused is not kept."""
        if group.is_(GroupState.EMPTY) and not group.members and not group.has_offsets():
            self.manager.remove_group(group)

    def _do_unknown_join_group(self, group: GroupMetadata, group_instance_id: str | None,
                               require_known_member_id: bool, client_id: str, client_host: str,
                               rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                               protocols: list[tuple[str, bytes]], respond: Callable[[JoinGroupResult], None]) -> None:
        new_member_id = f"{client_id}-{uuid.uuid4()}"
        if group_instance_id is not None:
            old_member_id = group.static_member_id(group_instance_id)
            if old_member_id is not None:
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, group_instance_id,
                                                         rebalance_timeout_ms, session_timeout_ms, protocols, respond)
                return
            # A static member's first join needs no second round trip: its instance id names it (KIP-345).
        elif require_known_member_id:
            # KIP-394: first give the member its id; its next JoinGroup with it enters the group.
            group.pending_members.add(new_member_id)
            self._schedule_heartbeat_expiration(group, new_member_id, True, session_timeout_ms)
            respond(JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id))
            return
        self._add_member_and_rebalance(group, new_member_id, group_instance_id, client_id, client_host,
                                       rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, respond)

    def _do_current_member_join_group(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                                      client_id: str, client_host: str, rebalance_timeout_ms: int,
                                      session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                                      respond: Callable[[JoinGroupResult], None]) -> None:
        if group.is_pending_member(member_id):
            self._add_member_and_rebalance(group, member_id, group_instance_id, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, respond)
            return
        if group.is_static_member_fenced(member_id, group_instance_id):
            respond(JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id))
            return
        if not group.has(member_id) or group.state in (GroupState.EMPTY, GroupState.DEAD):
            respond(JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
            return
        member = group.get(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                              respond)
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # The member did not see the JoinGroup answer: send it again.
                respond(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, respond)
        elif group.is_leader(member_id) or not member.matches(protocols):
            # Stable: the leader rejoining, or a member with new metadata, means a new assignment.
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                              respond)
        else:
            # A follower rejoining with what it had: no rebalance, the current generation again.
            respond(JoinGroupResult(ErrorCode.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                                    group.leader_id or "", member_id))

    def _join_result(self, group: GroupMetadata, member: MemberMetadata) -> JoinGroupResult:
        members = [JoinGroupMember(m.member_id, m.group_instance_id, metadata)
                   for m, metadata in group.current_member_metadata()] if group.is_leader(member.member_id) else []
        return JoinGroupResult(ErrorCode.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                               group.leader_id or "", member.member_id, members)

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                                  client_id: str, client_host: str, rebalance_timeout_ms: int,
                                  session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                                  respond: Callable[[JoinGroupResult], None]) -> None:
        member = MemberMetadata(member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, protocols, is_new=True)
        # A new member during a new group's initial delay makes InitialDelayedJoin wait once more.
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, respond)
        # A pending member (KIP-394) that joined with its id: its pending expiry completes now.
        self._heartbeats.check_and_complete(member_key(group.group_id, member_id))
        # A new member gets the new-member join timeout as its session until the rebalance completes, so one that
        # vanishes mid-join cannot hold the group in PreparingRebalance for ever.
        self._schedule_heartbeat_expiration(group, member_id, False, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"Adding new member {member_id} with group instance id"
                                             f" {group_instance_id}")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                     session_timeout_ms: int, respond: Callable[[JoinGroupResult], None]) -> None:
        member.supported_protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self._await_join(group, member, respond)
        self._maybe_prepare_rebalance(group, f"Updating metadata for member {member.member_id}")

    def _update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str, new_member_id: str,
                                            group_instance_id: str, rebalance_timeout_ms: int,
                                            session_timeout_ms: int, protocols: list[tuple[str, bytes]],
                                            respond: Callable[[JoinGroupResult], None]) -> None:
        """Kafka's updateStaticMemberAndRebalance: a known group.instance.id joined without a member id (a
        restart). It takes the old member's place under a new id; the old incarnation is fenced."""
        current_leader = group.leader_id or ""
        old = group.get(old_member_id)
        if old.awaiting_join_callback is not None:
            self._invoke_join_callback(group, old, JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID,
                                                                   member_id=old_member_id))
        self._invoke_sync_callback(old, SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        old_protocols = old.supported_protocols
        # The old id's session timer expires without effect: the group no longer has that id.
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self._complete_and_schedule_next_heartbeat_expiration(group, member)
        member.supported_protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if group.is_(GroupState.STABLE) and group.select_protocol() == group.protocol_name:
            # The assignment stands (KIP-345's point): persist the new member id, no rebalance.
            self._spawn(self._store_static_member(group, member, old_member_id, old_protocols, current_leader,
                                                  respond))
        else:
            self._await_join(group, member, respond)
            # Unless one is under way (it takes the member in): Stable with another protocol to choose, or
            # CompletingRebalance, where the leader may be assigning to the old id, need a new rebalance.
            if not group.is_(GroupState.PREPARING_REBALANCE):
                self._prepare_rebalance(group, f"Updating metadata for static member {new_member_id} with"
                                               f" instance id {group_instance_id}")

    async def _store_static_member(self, group: GroupMetadata, member: MemberMetadata, old_member_id: str,
                                   old_protocols: list[tuple[str, bytes]], current_leader: str,
                                   respond: Callable[[JoinGroupResult], None]) -> None:
        generation = group.generation_id
        error = await self.manager.store_group(group, {m.member_id: m.assignment for m in group.members.values()})
        if error is not ErrorCode.NONE and group.has(member.member_id) and member.group_instance_id is not None:
            logger.warning("Failed to persist metadata for group %s: %s", group.group_id, error.name)
            # The new member id is not stored: the old one comes back.
            member.supported_protocols = old_protocols
            restored = group.replace_static_member(member.group_instance_id, member.member_id, old_member_id)
            self._complete_and_schedule_next_heartbeat_expiration(group, restored)
            respond(JoinGroupResult(error, generation, group.protocol_type, group.protocol_name, current_leader))
            return
        respond(JoinGroupResult(error, generation, group.protocol_type, group.protocol_name, current_leader,
                                member.member_id))

    def _await_join(self, group: GroupMetadata, member: MemberMetadata,
                    respond: Callable[[JoinGroupResult], None]) -> None:
        if member.awaiting_join_callback is None:
            group.num_members_awaiting_join += 1
        member.awaiting_join_callback = respond

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        # Followers waiting in SyncGroup learn the assignment they wait for will not come.
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        initial_delay = self.config.initial_rebalance_delay_ms
        delayed: DelayedJoin
        if group.is_(GroupState.EMPTY):
            delayed = InitialDelayedJoin(self, self._joins, group.group_id, initial_delay, initial_delay,
                                         max(group.rebalance_timeout_ms() - initial_delay, 0))
        else:
            delayed = DelayedJoin(self, group.group_id, group.rebalance_timeout_ms())
        group.transition_to(GroupState.PREPARING_REBALANCE, self._time_ms())
        logger.info("Preparing to rebalance group %s in state %s with old generation %d (%s-%d) (reason: %s)",
                    group.group_id, group.state.value, group.generation_id, GROUP_METADATA_TOPIC_NAME,
                    self.partition_for(group.group_id), reason)
        self._joins.try_complete_else_watch(delayed, [group_join_key(group.group_id)])

    # ------------------------------------------------------------------ DelayedJoin callbacks (JoinCoordinator)

    def _group_in_play(self, group_id: str) -> GroupMetadata | None:
        group = self.manager.get_group(group_id)
        return None if group is None or group.is_(GroupState.DEAD) else group

    def try_complete_join(self, group_id: str) -> bool:
        group = self._group_in_play(group_id)
        return group is None or group.has_all_members_joined()

    def new_member_added(self, group_id: str) -> bool:
        group = self._group_in_play(group_id)
        if group is None or not group.new_member_added:
            return False
        group.new_member_added = False
        return True

    def on_complete_join(self, group_id: str) -> None:
        group = self._group_in_play(group_id)
        if group is None or not group.is_(GroupState.PREPARING_REBALANCE):
            return
        # Members that did not rejoin within the rebalance timeout are out.
        for member in group.not_yet_rejoined_members():
            logger.info("Group %s removing member %s: it did not rejoin within the rebalance timeout",
                        group.group_id, member.member_id)
            self._remove_heartbeat_for_leaving_member(group, member)
            group.remove(member.member_id)
        group.init_next_generation(self._time_ms())
        if group.is_(GroupState.EMPTY):
            logger.info("Group %s with generation %d is now empty (%s-%d)", group.group_id, group.generation_id,
                        GROUP_METADATA_TOPIC_NAME, self.partition_for(group.group_id))
            self._spawn(self._store_empty_group(group))
            return
        logger.info("Stabilized group %s generation %d (%s-%d) with %d members", group.group_id,
                    group.generation_id, GROUP_METADATA_TOPIC_NAME, self.partition_for(group.group_id),
                    group.size())
        for member in list(group.members.values()):
            self._invoke_join_callback(group, member, self._join_result(group, member))
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
            member.is_new = False

    async def _store_empty_group(self, group: GroupMetadata) -> None:
        error = await self.manager.store_group(group, {})
        if error is not ErrorCode.NONE:
            logger.warning("Failed to write empty metadata for group %s: %s", group.group_id, error.name)

    def _invoke_join_callback(self, group: GroupMetadata, member: MemberMetadata, result: JoinGroupResult) -> None:
        callback = member.awaiting_join_callback
        if callback is not None:
            member.awaiting_join_callback = None
            group.num_members_awaiting_join -= 1
            callback(result)

    # ------------------------------------------------------------------ SyncGroup

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncGroupResult:
        """SyncGroup: the leader's `assignments` are stored, then every member gets its own; followers wait."""
        error = self._validate_group_status(group_id)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The group is still loading: the member rejoins (Kafka answers so blindly).
            return SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if error is not None:
            return SyncGroupResult(error)
        group = self.manager.get_group(group_id)
        if group is None:
            return SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.DEAD):
            return SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = _member_error(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return SyncGroupResult(error)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_(GroupState.EMPTY):
            return SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.get(member_id)
        if group.is_(GroupState.STABLE):
            # The member lost the answer: the assignment it got.
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
            return SyncGroupResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
        future: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()

        def respond(result: SyncGroupResult) -> None:
            if not future.done():
                future.set_result(result)

        member.awaiting_sync_callback = respond
        self._complete_and_schedule_next_heartbeat_expiration(group, member)
        if group.is_leader(member_id):
            logger.info("Assignment received from leader %s for group %s for generation %d", member_id, group_id,
                        group.generation_id)
            # Members the leader left out get an empty assignment.
            assignment = {m: assignments.get(m, b"") for m in group.members}
            self._spawn(self._store_assignment(group, group.generation_id, assignment))
        return await future

    async def _store_assignment(self, group: GroupMetadata, generation_id: int, assignment: dict[str, bytes]) -> None:
        error = await self.manager.store_group(group, assignment)
        # Another rebalance (or an unload) may have started while the append waited.
        if group.is_(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation_id:
            if error is not ErrorCode.NONE:
                self._reset_and_propagate_assignment_error(group, error)
                self._maybe_prepare_rebalance(group, f"Error {error.name} when storing group assignment during"
                                                     " SyncGroup")
            else:
                for member_id, member in group.members.items():
                    member.assignment = assignment.get(member_id, b"")
                self._propagate_assignment(group, ErrorCode.NONE)
                group.transition_to(GroupState.STABLE, self._time_ms())

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in list(group.members.values()):
            if member.awaiting_sync_callback is not None:
                self._invoke_sync_callback(member, SyncGroupResult(error, group.protocol_type, group.protocol_name,
                                                                   member.assignment))
                # A member waiting in SyncGroup counted as alive, so its session timer completed at once;
                # from its answer on it must heartbeat again (Kafka's propagateAssignment).
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    @staticmethod
    def _invoke_sync_callback(member: MemberMetadata, result: SyncGroupResult) -> None:
        callback = member.awaiting_sync_callback
        if callback is not None:
            member.awaiting_sync_callback = None
            callback(result)

    # ------------------------------------------------------------------ Heartbeat and sessions

    async def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                        generation_id: int) -> ErrorCode:
        error = self._validate_group_status(group_id)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # the group is loading: Kafka answers blindly, the member's session comes back
        if error is not None:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = _member_error(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return error
        self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        # Heartbeats during CompletingRebalance are normal: the member got its JoinGroup answer.
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(GroupState.PREPARING_REBALANCE) else ErrorCode.NONE

    def _complete_and_schedule_next_heartbeat_expiration(self, group: GroupMetadata, member: MemberMetadata,
                                                         timeout_ms: int | None = None) -> None:
        key = member_key(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self._heartbeats.check_and_complete(key)
        member.heartbeat_satisfied = False
        self._schedule_heartbeat_expiration(group, member.member_id, False,
                                            member.session_timeout_ms if timeout_ms is None else timeout_ms)

    def _schedule_heartbeat_expiration(self, group: GroupMetadata, member_id: str, is_pending: bool,
                                       timeout_ms: int) -> None:
        delayed = DelayedHeartbeat(self, group.group_id, member_id, is_pending, timeout_ms)
        self._heartbeats.try_complete_else_watch(delayed, [member_key(group.group_id, member_id)])

    def _remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.is_leaving = True
        self._heartbeats.check_and_complete(member_key(group.group_id, member.member_id))

    def try_complete_heartbeat(self, group_id: str, member_id: str, is_pending: bool) -> bool:
        group = self.manager.get_group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return True  # nothing left to expire
        if is_pending:
            # The pending member joined with its id (or it is gone): its pending expiry is moot.
            return group.has(member_id) or not group.is_pending_member(member_id)
        if not group.has(member_id):
            return True
        member = group.get(member_id)
        return member.has_satisfied_heartbeat() or member.is_leaving

    def on_expire_heartbeat(self, group_id: str, member_id: str, is_pending: bool) -> None:
        if not self._active:
            return
        group = self.manager.get_group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return
        if is_pending:
            logger.info("Pending member %s in group %s has been removed after session timeout expiration",
                        member_id, group_id)
            self._remove_pending_member_and_update_group(group, member_id)
        elif group.has(member_id):
            member = group.get(member_id)
            if not member.has_satisfied_heartbeat():
                logger.info("Member %s in group %s has failed, removing it from the group", member_id, group_id)
                self._remove_member_and_update_group(group, member, f"removing member {member_id} on heartbeat"
                                                                    " expiration")

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.discard(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._joins.check_and_complete(group_join_key(group.group_id))

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        self._invoke_join_callback(group, member, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                                                  member_id=member.member_id))
        self._invoke_sync_callback(member, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._joins.check_and_complete(group_join_key(group.group_id))

    # ------------------------------------------------------------------ LeaveGroup

    async def leave_group(self, group_id: str, members: Sequence[MemberIdentity]) -> LeaveGroupResult:
        error = self._validate_group_status(group_id)
        if error is not None:
            return LeaveGroupResult(error)
        group = self.manager.get_group(group_id)
        if group is None:
            return LeaveGroupResult(ErrorCode.NONE, [(m, ErrorCode.UNKNOWN_MEMBER_ID) for m in members])
        if group.is_(GroupState.DEAD):
            return LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        answers = []
        for leaving in members:
            member_id = leaving.member_id
            if member_id == UNKNOWN_MEMBER_ID and leaving.group_instance_id is not None:
                member_id = group.static_member_id(leaving.group_instance_id) or UNKNOWN_MEMBER_ID
            if group.is_static_member_fenced(member_id, leaving.group_instance_id):
                answers.append((leaving, ErrorCode.FENCED_INSTANCE_ID))
            elif group.is_pending_member(member_id):
                self._remove_pending_member_and_update_group(group, member_id)
                self._heartbeats.check_and_complete(member_key(group_id, member_id))
                answers.append((leaving, ErrorCode.NONE))
            elif not group.has(member_id):
                answers.append((leaving, ErrorCode.UNKNOWN_MEMBER_ID))
            else:
                member = group.get(member_id)
                logger.info("Member %s has left group %s through explicit `LeaveGroup` request", member_id, group_id)
                self._remove_heartbeat_for_leaving_member(group, member)
                self._remove_member_and_update_group(group, member, f"removing member {member_id} on LeaveGroup")
                answers.append((leaving, ErrorCode.NONE))
        return LeaveGroupResult(ErrorCode.NONE, answers)

    # ------------------------------------------------------------------ OffsetCommit / OffsetFetch

    async def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                             generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]
                             ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit: per partition, NONE once the commit is in __consumer_offsets with the configured acks.
        generation_id -1 is a standalone commit, stored while the group has no members (Empty)."""
        answers, known = self._committable(group_id, offsets)
        if not known:
            return answers
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # A member of a generation of a group nobody knows: it must rejoin.
                return {**answers, **dict.fromkeys(known, ErrorCode.ILLEGAL_GENERATION)}
            group = self.manager.add_group(GroupMetadata(group_id, current_state_timestamp=self._time_ms()))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return {**answers, **dict.fromkeys(known, error)}
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        answers.update(await self.manager.store_offsets(group, known))
        return answers

    def _committable(self, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata]
                     ) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, OffsetAndMetadata]]:
        """A commit's answers so far and the offsets left to store: all refused while the group is not here (not
        coordinated, loading), else UNKNOWN_TOPIC_OR_PARTITION for the partitions the metadata does not know."""
        error = self._validate_group_status(group_id)
        if error is not None:
            return dict.fromkeys(offsets, error), {}
        known = {tp: o for tp, o in offsets.items() if self._metadata_cache.contains(tp)}
        return dict.fromkeys(offsets.keys() - known.keys(), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), known

    @staticmethod
    def _validate_offset_commit(group: GroupMetadata, generation_id: int, member_id: str,
                                group_instance_id: str | None) -> ErrorCode | None:
        """Kafka 2.8's GroupCoordinator.doCommitOffsets, in its order."""
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            # The group only uses Kafka to store offsets: stored whatever member id the commit names.
            return None
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return _member_error(group, member_id, group_instance_id, generation_id)

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                 group_instance_id: str | None, generation_id: int,
                                 offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit (Kafka 2.8's handleTxnCommitOffsets): per partition, NONE once the offsets are in
        __consumer_offsets as the producer's transactional batch; they count as committed only after the
        transaction's COMMIT marker. A member id and a generation are checked only when given (v3+)."""
        answers, known = self._committable(group_id, offsets)
        if not known:
            return answers
        group = self.manager.get_group(group_id) or self.manager.add_group(
            GroupMetadata(group_id, current_state_timestamp=self._time_ms()))
        error = _txn_offset_commit_error(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return {**answers, **dict.fromkeys(known, error)}
        answers.update(await self.manager.store_offsets(group, known, producer_id, producer_epoch))
        return answers

    def handle_txn_completion(self, producer_id: int, completed_partitions: Iterable[int], is_commit: bool) -> None:
        """A transaction marker of `producer_id` is acknowledged on these __consumer_offsets partitions: its
        pending offsets there become committed (COMMIT) or go (ABORT). On the event loop, in memory only."""
        self.manager.handle_txn_completion(producer_id, completed_partitions, is_commit)

    async def fetch_offsets(self, group_id: str, partitions: Sequence[TopicPartition] | None,
                            require_stable: bool = False) -> OffsetFetchResult:
        """The committed offsets of `partitions` (None: every partition the group has committed); with
        `require_stable`, UNSTABLE_OFFSET_COMMIT for those with a commit pending (KIP-447)."""
        error = self._validate_group_status(group_id)
        if error is not None:
            return OffsetFetchResult(error)
        return OffsetFetchResult(ErrorCode.NONE, self.manager.get_offsets(group_id, partitions, require_stable))

    # ------------------------------------------------------------------ DescribeGroups / ListGroups / DeleteGroups

    async def describe_groups(self, group_ids: Sequence[str]) -> list[GroupSummary]:
        return [self._describe(group_id) for group_id in group_ids]

    def _describe(self, group_id: str) -> GroupSummary:
        error = self._validate_group_status(group_id)
        if error is not None:
            return GroupSummary(group_id, error)
        group = self.manager.get_group(group_id)
        if group is None:
            return GroupSummary(group_id, ErrorCode.NONE)
        stable = group.is_(GroupState.STABLE) and group.protocol_name is not None
        members = [MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                                 m.assignment if stable else b"")
                   for m in group.members.values()]
        return GroupSummary(group_id, ErrorCode.NONE, group.state.value, group.protocol_type or "",
                            (group.protocol_name or "") if stable else "", members)

    async def list_groups(self, states: set[str] | None = None) -> ListGroupsResult:
        """The groups this broker coordinates, in the given states (Kafka's names; None or empty: all)."""
        if not self._active:
            return ListGroupsResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        wanted = {s.lower() for s in states} if states else None
        groups = [GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
                  for g in self.manager.current_groups()
                  if wanted is None or g.state.value.lower() in wanted]
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.is_loading() else ErrorCode.NONE
        return ListGroupsResult(error, groups)

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        """Delete groups without members: Dead here, tombstones for their offsets and metadata in the log."""
        answers: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            error = self._validate_group_status(group_id)
            if error is not None:
                answers[group_id] = error
                continue
            group = self.manager.get_group(group_id)
            if group is None or group.is_(GroupState.DEAD):
                answers[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_(GroupState.EMPTY):
                answers[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                group.transition_to(GroupState.DEAD, self._time_ms())
                _, answers[group_id] = await self.manager.cleanup_group_metadata(
                    group, lambda g: g.remove_offsets(list(g.offsets)))
        return answers

    # ------------------------------------------------------------------ OffsetDelete

    async def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]) -> DeleteOffsetsResult:
        """OffsetDelete (KIP-496, Kafka's handleDeleteOffsets): an Empty group loses the offsets of every partition
        named; a consumer group with members only those of topics none of them subscribes to (the others are
        GROUP_SUBSCRIBED_TO_TOPIC); any other group with members is NON_EMPTY_GROUP. A group left Empty without
        offsets is Dead, as expiration leaves it. With a group error the partitions carry none."""
        error = self._validate_group_status(group_id)
        if error is not None:
            return DeleteOffsetsResult(error)
        group = self.manager.get_group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return DeleteOffsetsResult(ErrorCode.GROUP_ID_NOT_FOUND)
        if not (group.is_(GroupState.EMPTY) or group.is_consumer_group()):
            return DeleteOffsetsResult(ErrorCode.NON_EMPTY_GROUP)
        answers: dict[TopicPartition, ErrorCode] = {}
        eligible: list[TopicPartition] = []
        for tp in dict.fromkeys(partitions):
            if not self._metadata_cache.contains(tp):
                answers[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not group.is_(GroupState.EMPTY) and group.is_subscribed_to_topic(tp.topic):
                answers[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                eligible.append(tp)
        if eligible:
            removed, error = await self.manager.cleanup_group_metadata(group, lambda g: g.remove_offsets(eligible))
            answers.update(dict.fromkeys(eligible, error))
            logger.info("The following offsets of the group %s were deleted: %s. A total of %d offsets were removed.",
                        group_id, ", ".join(f"{tp.topic}-{tp.partition}" for tp in eligible), len(removed))
        return DeleteOffsetsResult(ErrorCode.NONE, answers)

    # ------------------------------------------------------------------ offset expiration

    async def cleanup_group_metadata(self) -> int:
        """The offsets.retention.check.interval.ms task: expired offsets, and Empty groups left without offsets,
        get tombstones. Returns how many offsets expired."""
        now = self._time_ms()
        expired_total = 0
        for group in self.manager.current_groups():
            if self.manager.is_group_local(group.group_id):
                expired, _ = await self.manager.cleanup_group_metadata(
                    group, lambda g: g.remove_expired_offsets(now, self.manager.config.retention_ms))
                expired_total += len(expired)
        if expired_total:
            logger.info("Removed %d expired offsets", expired_total)
        return expired_total

    # ------------------------------------------------------------------ helpers

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _txn_offset_commit_error(group: GroupMetadata, member_id: str, group_instance_id: str | None,
                             generation_id: int) -> ErrorCode | None:
    """Kafka 2.8's doTxnCommitOffsets checks, in its order: the member and the generation only when given
    (a producer that is no group member sends neither)."""
    if group.is_(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if group.is_static_member_fenced(member_id, group_instance_id):
        return ErrorCode.FENCED_INSTANCE_ID
    if member_id != UNKNOWN_MEMBER_ID and not group.has(member_id):
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation_id >= 0 and generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    return None


def _member_error(group: GroupMetadata, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode | None:
    """The member checks of SyncGroup, Heartbeat and OffsetCommit, in Kafka's order: a fenced static member, an
    unknown member, a stale generation."""
    if group.is_static_member_fenced(member_id, group_instance_id):
        return ErrorCode.FENCED_INSTANCE_ID
    if not group.has(member_id):
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    return None

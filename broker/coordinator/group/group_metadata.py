"""A group and its members as the coordinator holds them (Kafka 2.x's GroupMetadata.scala and
MemberMetadata.scala): plain state, no I/O, no timers.

The state machine, with the states each one may be entered from (Kafka's validPreviousStates):

  Empty               <- PreparingRebalance              (no members left after a rebalance)
  PreparingRebalance  <- Stable, CompletingRebalance, Empty
  CompletingRebalance <- PreparingRebalance              (every expected member joined: waiting for the leader's
                                                          assignment in SyncGroup)
  Stable              <- CompletingRebalance             (the assignment is stored)
  Dead                <- any                             (deleted, expired, or its partition emigrated)

The protocol (the consumer's assignor) is chosen by vote: among the protocols every member supports, each
member votes for the first of its own list that is a candidate, and the most votes win.

Offsets (KIP-98, KIP-447): an OffsetCommit is pending from its append until the in-sync replicas have it; a
TxnOffsetCommit is pending per producer id from its append until its transaction's marker reaches the group's
__consumer_offsets partition: COMMIT makes its offsets the committed ones (unless a newer record got there
first), ABORT drops them. Either kind of pending commit makes OffsetFetch with require_stable answer
UNSTABLE_OFFSET_COMMIT for the partition.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker.coordinator.group.results import JoinGroupResult, OffsetAndMetadata, SyncGroupResult
from proto.types import TopicPartition


class GroupState(enum.Enum):
    # Kafka's toString of each state is what DescribeGroups and ListGroups show.
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}

CONSUMER_PROTOCOL_TYPE = "consumer"
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    # (name, metadata) in the member's order of preference
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join_callback: JoinCallback | None = None
    awaiting_sync_callback: SyncCallback | None = None
    is_new: bool = False  # joined and not yet through a rebalance: its session is the new-member join timeout
    is_leaving: bool = False
    heartbeat_satisfied: bool = False

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync_callback is not None

    def protocols(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"Member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's MemberMetadata.matches: the same protocols, in the same order, with the same metadata."""
        return protocols == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"Member {self.member_id} does not support any of the candidate protocols")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            # A new member can expire while waiting for the join to complete: that needs a heartbeat too.
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True  # waiting for the rebalance counts as alive
        return self.heartbeat_satisfied


@dataclass(frozen=True, slots=True)
class CommitRecordMetadataAndOffset:
    """A committed offset and where its record is in __consumer_offsets (None until appended), so a later load
    or a concurrent commit keeps the newest (Kafka's CommitRecordMetadataAndOffset)."""

    append_offset: int | None
    offset_and_metadata: OffsetAndMetadata

    def older_than(self, other: CommitRecordMetadataAndOffset) -> bool:
        """Kafka's olderThan: by where the records are in the log (both must be appended)."""
        if self.append_offset is None or other.append_offset is None:
            raise ValueError("only appended commits are ordered")
        return self.append_offset < other.append_offset


@dataclass(eq=False)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    current_state_timestamp: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)  # KIP-394: given an id, not yet joined with it
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    num_members_awaiting_join: int = 0
    new_member_added: bool = False
    offsets: dict[TopicPartition, CommitRecordMetadataAndOffset] = field(default_factory=dict)
    subscribed_topics: set[str] | None = None  # a consumer group's topics (KIP-496), set with each generation
    pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # Kafka's pendingTransactionalOffsetCommits: per producer id, the offsets of its open transaction (the
    # append offset None until the record is in the log).
    pending_transactional_offset_commits: dict[int, dict[TopicPartition, CommitRecordMetadataAndOffset]] = field(
        default_factory=dict)
    received_consumer_offset_commits: bool = False
    received_transactional_offset_commits: bool = False

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    # ------------------------------------------------------------------ membership

    def add(self, member: MemberMetadata, callback: JoinCallback | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)
        member.awaiting_join_callback = callback
        if callback is not None:
            self.num_members_awaiting_join += 1

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """Another member id holds this group.instance.id now: the caller is a zombie (FENCED_INSTANCE_ID)."""
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """A static member rejoined with no member id: it keeps its place under a new id (KIP-345); whoever waits
        on the old id is told it is fenced."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS_STATES[state]:
            raise IllegalStateTransition(
                f"Group {self.group_id} should be in the {sorted(s.value for s in _VALID_PREVIOUS_STATES[state])}"
                f" states before moving to {state.value} state. Instead it is in {self.state.value} state")
        self.state = state
        self.current_state_timestamp = now_ms

    # ------------------------------------------------------------------ protocols

    def _candidate_protocols(self) -> set[str]:
        members = iter(self.members.values())
        common = next(members).protocols()
        for member in members:
            common &= member.protocols()
        return common

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        """A joining member fits if the group is empty, or speaks its protocol type and one common protocol."""
        if not self.members:
            return bool(protocol_type) and any(True for _ in protocols)
        return self.protocol_type == protocol_type and bool(set(protocols) & self._candidate_protocols())

    def select_protocol(self) -> str:
        if not self.members:
            raise IllegalStateTransition(f"Cannot select protocol for empty group {self.group_id}")
        candidates = self._candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes.items(), key=lambda item: item[1])[0]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.subscribed_topics = self.compute_subscribed_topics()

    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Kafka's isSubscribedToTopic: unknown subscriptions (None) count as subscribed to everything."""
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def compute_subscribed_topics(self) -> set[str] | None:
        """The topics a consumer group's members subscribe to, from their subscriptions (Kafka's
        computeSubscribedTopics); None when not a consumer group or a subscription does not parse."""
        if not self.is_consumer_group():
            return None
        if not self.members:
            return set()
        topics: set[str] = set()
        for _, metadata in self.current_member_metadata():
            found = subscription_topics(metadata)
            if found is None:
                return None
            topics.update(found)
        return topics

    def current_member_metadata(self) -> list[tuple[MemberMetadata, bytes]]:
        """Each member and its subscription for the chosen protocol: what the leader assigns from."""
        if self.protocol_name is None or self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise IllegalStateTransition(f"Cannot obtain member metadata for group in state {self.state.value}")
        return [(m, m.metadata(self.protocol_name)) for m in self.members.values()]

    # ------------------------------------------------------------------ offsets

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        found = self.offsets.get(tp)
        return None if found is None else found.offset_and_metadata

    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits) \
            or bool(self.pending_transactional_offset_commits)

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.received_consumer_offset_commits = True
        self.pending_offset_commits.update(offsets)

    def has_received_consistent_offset_commits(self) -> bool:
        """False once both consumers and transactional producers committed offsets here: Kafka warns of it."""
        return not (self.received_consumer_offset_commits and self.received_transactional_offset_commits)

    def on_offset_commit_append(self, tp: TopicPartition, committed: CommitRecordMetadataAndOffset) -> None:
        """The commit's record is in the log (acks=all): it becomes the committed offset unless a newer record
        got there first."""
        if tp in self.pending_offset_commits and self.pending_offset_commits[tp] == committed.offset_and_metadata:
            del self.pending_offset_commits[tp]
        current = self.offsets.get(tp)
        if current is None or current.append_offset is None or committed.append_offset is None \
                or current.append_offset < committed.append_offset:
            self.offsets[tp] = committed

    def fail_pending_offset_write(self, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == offset:
            del self.pending_offset_commits[tp]

    # ------------------------------------------------------------------ transactional offsets (KIP-98)

    def prepare_txn_offset_commit(self, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """A TxnOffsetCommit is about to be appended: its offsets are pending for the producer's transaction."""
        self.received_transactional_offset_commits = True
        pending = self.pending_transactional_offset_commits.setdefault(producer_id, {})
        for tp, offset in offsets.items():
            pending[tp] = CommitRecordMetadataAndOffset(None, offset)

    def on_txn_offset_commit_append(self, producer_id: int, tp: TopicPartition,
                                    appended: CommitRecordMetadataAndOffset) -> None:
        """The record is in the log: remember where, so the COMMIT marker can order it against other commits.
        A later TxnOffsetCommit of the same partition in the same transaction replaced it: nothing to do."""
        pending = self.pending_transactional_offset_commits.get(producer_id)
        if pending is not None and tp in pending \
                and pending[tp].offset_and_metadata == appended.offset_and_metadata:
            pending[tp] = appended

    def fail_pending_txn_offset_commit(self, producer_id: int, tp: TopicPartition) -> None:
        """The append failed: the client is told and retries, maybe at another coordinator."""
        pending = self.pending_transactional_offset_commits.get(producer_id)
        if pending is None:
            return  # the partition emigrated meanwhile
        pending.pop(tp, None)
        if not pending:
            del self.pending_transactional_offset_commits[producer_id]

    def complete_pending_txn_offset_commit(self, producer_id: int, is_commit: bool) -> None:
        """The producer's marker is in the log: COMMIT moves its offsets into the committed ones unless a newer
        record of the partition is there already; ABORT drops them (Kafka's completePendingTxnOffsetCommit)."""
        pending = self.pending_transactional_offset_commits.pop(producer_id, None)
        if pending is None or not is_commit:
            return
        for tp, committed in pending.items():
            if committed.append_offset is None:
                # A client commits only after its TxnOffsetCommit was answered: a coordinator bug (Kafka's
                # IllegalStateException).
                raise RuntimeError(
                    f"Trying to complete a transactional offset commit for producerId {producer_id} and groupId"
                    f" {self.group_id} even though the offset commit record itself hasn't been appended to the log.")
            current = self.offsets.get(tp)
            if current is None or current.older_than(committed):
                self.offsets[tp] = committed

    def has_pending_offset_commits_from_producer(self, producer_id: int) -> bool:
        return producer_id in self.pending_transactional_offset_commits

    def has_pending_offset_commits_for_topic_partition(self, tp: TopicPartition) -> bool:
        """Whether a commit of `tp`, plain or transactional, is not yet complete (KIP-447's unstable offset)."""
        return tp in self.pending_offset_commits or any(
            tp in pending for pending in self.pending_transactional_offset_commits.values())

    def remove_offsets(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        removed = []
        for tp in tps:
            self.pending_offset_commits.pop(tp, None)
            for pending in self.pending_transactional_offset_commits.values():
                pending.pop(tp, None)
            if self.offsets.pop(tp, None) is not None:
                removed.append(tp)
        return removed

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Kafka's removeExpiredOffsets (KIP-211, KIP-496). An offset with an explicit expire timestamp expires
        then; otherwise offsets.retention.minutes after:
        - the group became Empty, for a group that had members (all its offsets);
        - its commit, for a consumer group with members, only for topics none of them subscribes to;
        - its commit, for a group that never had members (standalone commits).
        Other groups with members keep their offsets."""
        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            def base(c: CommitRecordMetadataAndOffset) -> int:
                if self.current_state_timestamp >= 0:
                    return self.current_state_timestamp
                return c.offset_and_metadata.commit_timestamp
            subscribed: set[str] = set()
        elif self.is_consumer_group() and self.subscribed_topics is not None:
            def base(c: CommitRecordMetadataAndOffset) -> int:
                return c.offset_and_metadata.commit_timestamp
            subscribed = self.subscribed_topics
        elif self.protocol_type is None:
            def base(c: CommitRecordMetadataAndOffset) -> int:
                return c.offset_and_metadata.commit_timestamp
            subscribed = set()
        else:
            return []
        expired = []
        for tp, committed in self.offsets.items():
            if tp.topic in subscribed or tp in self.pending_offset_commits:
                continue
            expire = committed.offset_and_metadata.expire_timestamp
            if (now_ms >= expire) if expire >= 0 else (now_ms - base(committed) >= retention_ms):
                expired.append(tp)
        for tp in expired:
            del self.offsets[tp]
        return expired


def subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a consumer's subscription (ConsumerProtocolSubscription: int16 version, then an array of
    int16-length topic names, in every version); None if it does not parse."""
    try:
        (count,) = _I32.unpack_from(metadata, 2)
        pos, topics = 6, []
        for _ in range(count):
            (length,) = _I16.unpack_from(metadata, pos)
            topic = metadata[pos + 2:pos + 2 + length]
            if length < 0 or len(topic) != length:
                return None
            topics.append(topic.decode("utf-8"))
            pos += 2 + length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


class IllegalStateTransition(Exception):
    """A transition Kafka's state machine forbids: a coordinator bug, never a client's doing."""

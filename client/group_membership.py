"""A group member's side of Kafka's group protocol, as plain state: Kafka's AbstractCoordinator rules.

What a member does with each answer of its coordinator, with no I/O: the
coordinator's I/O (client/consumer_coordinator.py) sends what these methods ask
for and hands the answers back, so every rule is unit-tested on its own.

The member's state (Kafka's MemberState):

    UNJOINED --join--> PREPARING_REBALANCE --JoinGroup answered--> COMPLETING_REBALANCE
        ^                      ^                                         | SyncGroup answered
        |                      +------- rejoin (REBALANCE_IN_PROGRESS) --+
        +--- leave / fatal error / generation lost                       v
                                                                       STABLE

A member joins with an empty member id; a coordinator that promises KIP-394
answers MEMBER_ID_REQUIRED with the id to join again with. The JoinGroup answer
names the generation, the chosen protocol (assignor) and the leader; the leader
gets every member's subscription and computes the assignment, which its
SyncGroup carries; every member's SyncGroup answer carries its own partitions.
Heartbeats (every heartbeat_interval_ms while STABLE) learn that a rebalance
started (REBALANCE_IN_PROGRESS: join again) or that the member was dropped
(UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION: its partitions are lost, join afresh).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from client.errors import CommitFailedError
from proto.errors import ErrorCode, KafkaError, error_for
from proto.types import UNKNOWN_MEMBER_ID

NO_GENERATION_ID = -1


class MemberState(enum.Enum):
    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"


@dataclass(frozen=True)
class Generation:
    generation_id: int
    member_id: str
    protocol_name: str | None


NO_GENERATION = Generation(NO_GENERATION_ID, UNKNOWN_MEMBER_ID, None)


class Next(enum.Enum):
    """What the member does after an answer."""

    JOIN = "join"  # send JoinGroup (again, at once)
    JOIN_AFTER_BACKOFF = "join after backoff"  # the coordinator is busy loading: JoinGroup after retry_backoff_ms
    FIND_COORDINATOR = "find coordinator"  # the coordinator moved or died: FindCoordinator, then JoinGroup
    SYNC = "sync"  # send SyncGroup (the leader's with the assignment)
    STABLE = "stable"  # joined: the SyncGroup answer's assignment is the member's


@dataclass(frozen=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


# The errors after which a member's generation is gone (the coordinator dropped the member): its
# partitions may already belong to others, so they are lost, not revoked.
_GENERATION_LOST = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID})
_COORDINATOR_GONE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


class GroupMembership:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.state = MemberState.UNJOINED
        self.generation = NO_GENERATION
        # The member id survives a failed join (KIP-394: the coordinator gave it), not a lost generation.
        self.member_id = UNKNOWN_MEMBER_ID
        self.leader_id: str | None = None
        self.members: list[JoinedMember] = []  # the leader's view of the group, from its JoinGroup answer
        self.rejoin_needed = True
        self.rejoin_reason = "the member has not joined yet"
        self.generation_lost = False  # the last generation ended without a rebalance: partitions are lost

    # ------------------------------------------------------------------ events

    def request_rejoin(self, reason: str) -> None:
        self.rejoin_needed = True
        self.rejoin_reason = reason

    def reset_generation(self, reason: str) -> None:
        """The coordinator no longer knows this member (or it left): next time it joins as a new member."""
        if self.generation is not NO_GENERATION:
            self.generation_lost = True
        self.generation = NO_GENERATION
        self.member_id = UNKNOWN_MEMBER_ID
        self.state = MemberState.UNJOINED
        self.request_rejoin(reason)

    def start_join(self) -> str:
        """The member sends a JoinGroup: the member id to send."""
        self.state = MemberState.PREPARING_REBALANCE
        return self.member_id

    def is_leader(self) -> bool:
        return self.leader_id is not None and self.leader_id == self.generation.member_id

    def leave(self) -> str | None:
        """The member leaves (close, unsubscribe, max.poll.interval.ms exceeded): the member id to send a
        LeaveGroup with, None when it has none. Partitions it still holds are lost (another member may get
        them before this one rejoins)."""
        # A member given its id by MEMBER_ID_REQUIRED is pending in the group already: it leaves too (Kafka keeps
        # that id in its generation).
        member_id = self.member_id or self.generation.member_id
        if self.generation is not NO_GENERATION:
            self.generation_lost = True
        self.generation = NO_GENERATION
        self.member_id = UNKNOWN_MEMBER_ID
        self.state = MemberState.UNJOINED
        self.request_rejoin("the member left the group")
        return member_id or None

    # ------------------------------------------------------------------ answers

    def on_join_response(self, error: int, *, generation_id: int, protocol_name: str | None, leader: str,
                         member_id: str, members: Sequence[JoinedMember]) -> Next:
        """Kafka's JoinGroupResponseHandler. Raises the error when no retry can help."""
        code = error_code(error)
        if code is ErrorCode.NONE:
            if self.state is not MemberState.PREPARING_REBALANCE:
                # Left (or lost the generation) while the JoinGroup was in flight: that answer is stale.
                return Next.JOIN
            self.member_id = member_id
            self.generation = Generation(generation_id, member_id, protocol_name)
            self.leader_id = leader
            self.members = list(members) if leader == member_id else []
            self.state = MemberState.COMPLETING_REBALANCE
            return Next.SYNC
        self.state = MemberState.UNJOINED
        if code is ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = member_id  # join again at once with the id the coordinator chose
            return Next.JOIN
        if code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return Next.JOIN_AFTER_BACKOFF
        if code is ErrorCode.UNKNOWN_MEMBER_ID:
            self.reset_generation("the coordinator does not know the member id")
            return Next.JOIN
        if code in _COORDINATOR_GONE:
            return Next.FIND_COORDINATOR
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            return Next.JOIN_AFTER_BACKOFF
        # INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, INVALID_GROUP_ID, GROUP_MAX_SIZE_REACHED,
        # FENCED_INSTANCE_ID, GROUP_AUTHORIZATION_FAILED, ...: nothing a retry changes.
        raise error_for(code, f"JoinGroup of group {self.group_id!r}")

    def on_sync_response(self, error: int) -> Next:
        """Kafka's SyncGroupResponseHandler; on STABLE the caller installs the answer's assignment."""
        code = error_code(error)
        if code is ErrorCode.NONE:
            if self.state is not MemberState.COMPLETING_REBALANCE:
                return Next.JOIN
            self.state = MemberState.STABLE
            self.rejoin_needed = False
            self.generation_lost = False
            self.members = []
            return Next.STABLE
        self.state = MemberState.UNJOINED
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            self.request_rejoin("the group rebalanced again while the member synced")
            return Next.JOIN
        if code in _GENERATION_LOST and code is not ErrorCode.FENCED_INSTANCE_ID:
            self.reset_generation(f"SyncGroup answered {code.name}")
            return Next.JOIN
        if code in _COORDINATOR_GONE:
            self.request_rejoin(f"SyncGroup answered {code.name}")
            return Next.FIND_COORDINATOR
        raise error_for(code, f"SyncGroup of group {self.group_id!r}")

    def on_heartbeat_response(self, error: int) -> Next | None:
        """Kafka's HeartbeatResponseHandler: None when all is well, else what to do next."""
        code = error_code(error)
        if code is ErrorCode.NONE:
            return None
        if code in _COORDINATOR_GONE:
            return Next.FIND_COORDINATOR
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            # Only a STABLE member rejoins; one already joining will see the rebalance in its JoinGroup.
            if self.state is MemberState.STABLE:
                self.request_rejoin("the group is rebalancing")
            return Next.JOIN
        if code in _GENERATION_LOST and code is not ErrorCode.FENCED_INSTANCE_ID:
            if self.state is MemberState.STABLE:
                self.reset_generation(f"Heartbeat answered {code.name}")
            return Next.JOIN
        raise error_for(code, f"Heartbeat of group {self.group_id!r}")

    def on_commit_error(self, code: ErrorCode) -> KafkaError:
        """What an OffsetCommit error means for the member (Kafka's OffsetCommitResponseHandler): the error
        to raise; a generation the coordinator no longer accepts is gone, and the commit cannot be retried."""
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self.reset_generation(f"OffsetCommit answered {code.name}")
            return CommitFailedError(_COMMIT_FAILED)
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            # KIP-266: the member is rebalancing; its commit would be accepted once it rejoined.
            self.request_rejoin("OffsetCommit answered REBALANCE_IN_PROGRESS")
            return CommitFailedError(_COMMIT_FAILED)
        return error_for(code, f"OffsetCommit of group {self.group_id!r}")


_COMMIT_FAILED = ("Commit cannot be completed since the group has already rebalanced and assigned the partitions"
                  " to another member. This means that the time between subsequent calls to poll() was longer than"
                  " the configured max_poll_interval_ms, which typically implies that the poll loop is spending too"
                  " much time message processing. You can address this either by increasing the rebalance timeout"
                  " with max_poll_interval_ms, or by reducing the maximum size of batches returned in poll() with"
                  " max_poll_records.")


def error_code(error: int) -> ErrorCode:
    try:
        return ErrorCode(error)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


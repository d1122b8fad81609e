"""What the group coordinator takes and answers, in plain values (no wire types), so the Kafka listener and the
gRPC door build their own messages from the same results. Names follow Kafka's request and response fields."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.config.metadata_cache import Node
from proto.errors import ErrorCode
from proto.types import UNKNOWN_MEMBER_ID, TopicPartition

NO_GENERATION = -1  # a standalone (simple consumer) commit: not a member of any generation
NO_LEADER_EPOCH = -1
INVALID_OFFSET = -1


@dataclass(frozen=True, slots=True)
class FindCoordinatorResult:
    error: ErrorCode
    node: Node | None = None  # the coordinator as reached on the asking listener
    message: str | None = None


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    """A member as the group's leader sees it in JoinGroup's response: its subscription for the chosen protocol."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    error: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = UNKNOWN_MEMBER_ID  # also set with MEMBER_ID_REQUIRED: the id to join with next
    members: list[JoinGroupMember] = field(default_factory=list)  # only the leader gets them


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    """One member leaving (LeaveGroup v3+ removes a batch; v0-2 the one asking)."""

    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    error: ErrorCode  # the request's error (NOT_COORDINATOR, ...); NONE when members carry their own
    members: list[tuple[MemberIdentity, ErrorCode]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset as Kafka stores it (kafka.common.OffsetAndMetadata): leader_epoch -1 when unknown,
    expire_timestamp -1 unless an OffsetCommit v2-v4 asked for a retention time."""

    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    """OffsetFetch's answer for one partition: offset -1 and empty metadata when nothing is committed."""

    offset: int = INVALID_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    error: ErrorCode
    offsets: dict[TopicPartition, PartitionOffset] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # the member's subscription for the group's protocol (empty unless the group is Stable)
    assignment: bytes  # what SyncGroup gave it (empty unless the group is Stable)


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """DescribeGroups' answer for one group (Kafka's GroupSummary); a group nobody has is Dead, no error."""

    group_id: str
    error: ErrorCode
    state: str = "Dead"
    protocol_type: str = ""
    protocol: str = ""
    members: list[MemberSummary] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class ListGroupsResult:
    error: ErrorCode  # COORDINATOR_LOAD_IN_PROGRESS while a partition loads (the list is then partial)
    groups: list[GroupOverview] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DeleteOffsetsResult:
    """OffsetDelete's answer: a group error (then no partitions), or each partition's."""

    error: ErrorCode
    partitions: dict[TopicPartition, ErrorCode] = field(default_factory=dict)

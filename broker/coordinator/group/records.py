"""The records of __consumer_offsets, byte for byte Kafka's (GroupMetadataManager's schemas in 2.x; the
OffsetCommitKey/Value and GroupMetadataKey/Value JSON schemas of group-coordinator/.../common/message in 3.x).

Every key starts with an int16 version that says what it is: 0 and 1 an offset commit (group, topic,
partition), 2 a group's metadata (group). Every value starts with its own int16 version. A null value is a
tombstone: the offset, or the whole group, is gone, and compaction removes the key later.

Written here: OffsetCommitKey v1, OffsetCommitValue v3 (v1 when the commit has an explicit expire timestamp,
as Kafka 2.1+ writes for OffsetCommit v2-v4's retention time), GroupMetadataKey v2, GroupMetadataValue v3.
Read: every version Kafka 2.x-3.x writes (values 0-3 of both, and the flexible v4 of both with empty tagged
fields).

Strings are int16-length UTF-8 (-1 for a nullable one that is null), bytes int32-length; arrays an int32
count. Version 4 values are flexible: unsigned varint lengths plus one, and a tagged-field section after each
struct.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.coordinator.schema import I16, Reader, RecordFormatError, Writer
from proto.types import TopicPartition

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

# ------------------------------------------------------------------ the values, decoded


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    topic_partition: TopicPartition


@dataclass(frozen=True, slots=True)
class GroupKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int  # -1: unknown (values before v3)
    metadata: str
    commit_timestamp: int
    expire_timestamp: int  # -1 unless value v1


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int  # the session timeout in v0 values, which had none
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int  # -1 before v2
    members: tuple[MemberValue, ...]


# ------------------------------------------------------------------ writing


def offset_commit_key(group_id: str, tp: TopicPartition) -> bytes:
    return bytes(Writer().i16(OFFSET_COMMIT_KEY_VERSION).string(group_id).string(tp.topic).i32(tp.partition).out)


def group_metadata_key(group_id: str) -> bytes:
    return bytes(Writer().i16(GROUP_METADATA_KEY_VERSION).string(group_id).out)


def offset_commit_value(value: OffsetValue) -> bytes:
    """v3 (with the leader epoch); v1 when the commit carries an expire timestamp (Kafka's choice since 2.1)."""
    if value.expire_timestamp >= 0:
        w = Writer().i16(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE).i64(value.offset).string(value.metadata)
        return bytes(w.i64(value.commit_timestamp).i64(value.expire_timestamp).out)
    w = Writer().i16(OFFSET_COMMIT_VALUE_VERSION).i64(value.offset).i32(value.leader_epoch).string(value.metadata)
    return bytes(w.i64(value.commit_timestamp).out)


def group_metadata_value(value: GroupValue) -> bytes:
    w = Writer().i16(GROUP_METADATA_VALUE_VERSION).string(value.protocol_type).i32(value.generation)
    w.string(value.protocol).string(value.leader).i64(value.current_state_timestamp).i32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.out)


# ------------------------------------------------------------------ reading


def read_key(data: bytes) -> OffsetKey | GroupKey:
    r = Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), TopicPartition(r.string(), r.i32()))
    if version == 2:
        return GroupKey(r.string())
    raise RecordFormatError(f"Unknown group metadata message version: {version}")


def _value_reader(data: bytes, what: str) -> tuple[int, Reader]:
    """The value's version (0-4: what Kafka has written) and a reader after it; v4 is flexible (KIP-915)."""
    version = I16.unpack_from(data)[0] if len(data) >= 2 else -1
    if not 0 <= version <= 4:
        raise RecordFormatError(f"Unknown {what} message version: {version}")
    r = Reader(data, flexible=version >= 4)
    r.pos = 2
    return version, r


def read_offset_value(data: bytes) -> OffsetValue:
    version, r = _value_reader(data, "offset")
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.i64()
    expire_timestamp = r.i64() if version == 1 else -1
    r.tagged_fields()
    return OffsetValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def read_group_value(data: bytes) -> GroupValue:
    version, r = _value_reader(data, "group metadata")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    current_state_timestamp = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_length()):
        member_id = r.string()
        group_instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if version >= 1 else None
        session_timeout = r.i32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tagged_fields()
        members.append(MemberValue(member_id, group_instance_id, client_id, client_host,
                                   session_timeout if rebalance_timeout is None else rebalance_timeout,
                                   session_timeout, subscription, assignment))
    r.tagged_fields()
    return GroupValue(protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members))

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

import struct
from dataclasses import dataclass

from common.record import read_raw_varint
from proto.errors import InvalidRecordError
from proto.types import TopicPartition

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A __consumer_offsets record no Kafka version wrote (Kafka's IllegalStateException on load)."""


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


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def i16(self, v: int) -> _Writer:
        self.out += _I16.pack(v)
        return self

    def i32(self, v: int) -> _Writer:
        self.out += _I32.pack(v)
        return self

    def i64(self, v: int) -> _Writer:
        self.out += _I64.pack(v)
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.i16(-1)
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise RecordFormatError(f"string of {len(data)} bytes is longer than an int16 length allows")
        self.i16(len(data))
        self.out += data
        return self

    def bytes_(self, v: bytes) -> _Writer:
        self.i32(len(v))
        self.out += v
        return self


def offset_commit_key(group_id: str, tp: TopicPartition) -> bytes:
    return bytes(_Writer().i16(OFFSET_COMMIT_KEY_VERSION).string(group_id).string(tp.topic).i32(tp.partition).out)


def group_metadata_key(group_id: str) -> bytes:
    return bytes(_Writer().i16(GROUP_METADATA_KEY_VERSION).string(group_id).out)


def offset_commit_value(value: OffsetValue) -> bytes:
    """v3 (with the leader epoch); v1 when the commit carries an expire timestamp (Kafka's choice since 2.1)."""
    if value.expire_timestamp >= 0:
        w = _Writer().i16(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE).i64(value.offset).string(value.metadata)
        return bytes(w.i64(value.commit_timestamp).i64(value.expire_timestamp).out)
    w = _Writer().i16(OFFSET_COMMIT_VALUE_VERSION).i64(value.offset).i32(value.leader_epoch).string(value.metadata)
    return bytes(w.i64(value.commit_timestamp).out)


def group_metadata_value(value: GroupValue) -> bytes:
    w = _Writer().i16(GROUP_METADATA_VALUE_VERSION).string(value.protocol_type).i32(value.generation)
    w.string(value.protocol).string(value.leader).i64(value.current_state_timestamp).i32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.out)


# ------------------------------------------------------------------ reading


class _Reader:
    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError(f"record ends at byte {len(self.data)}, {n} more bytes wanted at {self.pos}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def _uvarint(self) -> int:
        try:
            value, self.pos = read_raw_varint(self.data, self.pos)
        except (IndexError, InvalidRecordError):
            raise RecordFormatError(f"bad varint at byte {self.pos}") from None
        return value

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self._uvarint() - 1  # compact: length + 1, 0 for null
        return self.i32() if wide else self.i16()

    def nullable_string(self) -> str | None:
        n = self._length(wide=False)
        if n < 0:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordFormatError(f"string is not UTF-8: {e}") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise RecordFormatError(f"null where a string must be, at byte {self.pos}")
        return s

    def bytes_(self) -> bytes:
        n = self._length(wide=True)
        if n < 0:
            raise RecordFormatError(f"null where bytes must be, at byte {self.pos}")
        return self._take(n)

    def array_length(self) -> int:
        n = self._length(wide=True)
        if n < 0:
            raise RecordFormatError(f"null array at byte {self.pos}")
        return n

    def tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self._uvarint()):
                self._uvarint()  # tag
                self._take(self._uvarint())


def read_key(data: bytes) -> OffsetKey | GroupKey:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), TopicPartition(r.string(), r.i32()))
    if version == 2:
        return GroupKey(r.string())
    raise RecordFormatError(f"Unknown group metadata message version: {version}")


def _value_reader(data: bytes, what: str) -> tuple[int, _Reader]:
    """The value's version (0-4: what Kafka has written) and a reader after it; v4 is flexible (KIP-915)."""
    version = _I16.unpack_from(data)[0] if len(data) >= 2 else -1
    if not 0 <= version <= 4:
        raise RecordFormatError(f"Unknown {what} message version: {version}")
    r = _Reader(data, flexible=version >= 4)
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

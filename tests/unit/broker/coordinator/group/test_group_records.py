"""broker/coordinator/group/records.py: __consumer_offsets keys and values in Kafka's bytes (the expected bytes
are written out field by field from Kafka's schemas: OffsetCommitKey/Value, GroupMetadataKey/Value), every
version Kafka writes read back, and records no Kafka wrote refused with RecordFormatError."""

from __future__ import annotations

import struct

import pytest

from broker.coordinator.group import records
from broker.coordinator.group.records import GroupKey, GroupValue, MemberValue, OffsetKey, OffsetValue
from proto.types import TopicPartition


def s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def b(data: bytes) -> bytes:
    return i32(len(data)) + data


NULL = i16(-1)


def test_offset_commit_key_is_version_1_group_topic_partition() -> None:
    key = records.offset_commit_key("grp", TopicPartition("orders", 7))
    assert key == i16(1) + s("grp") + s("orders") + i32(7)
    assert key.hex() == "0001" "0003677270" "00066f7264657273" "00000007"
    assert records.read_key(key) == OffsetKey("grp", TopicPartition("orders", 7))
    # Version 0 keys (Kafka 0.8.2's) read the same.
    assert records.read_key(i16(0) + s("g") + s("t") + i32(0)) == OffsetKey("g", TopicPartition("t", 0))


def test_group_metadata_key_is_version_2_group() -> None:
    key = records.group_metadata_key("grp")
    assert key == bytes.fromhex("0002" "0003677270")
    assert records.read_key(key) == GroupKey("grp")


def test_offset_commit_value_v3_has_the_leader_epoch() -> None:
    value = OffsetValue(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1_700_000_000_000,
                        expire_timestamp=-1)
    data = records.offset_commit_value(value)
    assert data == i16(3) + i64(42) + i32(5) + s("m") + i64(1_700_000_000_000)
    assert records.read_offset_value(data) == value


def test_offset_commit_value_v1_when_the_commit_has_an_expire_timestamp() -> None:
    value = OffsetValue(offset=42, leader_epoch=-1, metadata="", commit_timestamp=1000, expire_timestamp=5000)
    data = records.offset_commit_value(value)
    assert data == i16(1) + i64(42) + s("") + i64(1000) + i64(5000)
    assert records.read_offset_value(data) == value


def test_older_and_flexible_offset_values_read() -> None:
    assert records.read_offset_value(i16(0) + i64(9) + s("md") + i64(77)) == OffsetValue(9, -1, "md", 77, -1)
    assert records.read_offset_value(i16(2) + i64(9) + s("") + i64(77)) == OffsetValue(9, -1, "", 77, -1)
    # v4 (KIP-915): compact string (length + 1 as an unsigned varint) and an empty tagged-field section.
    v4 = i16(4) + i64(9) + i32(3) + bytes([3]) + b"md" + i64(77) + b"\x00"
    assert records.read_offset_value(v4) == OffsetValue(9, 3, "md", 77, -1)


def member(member_id: str = "c-1", instance: str | None = None) -> MemberValue:
    return MemberValue(member_id, instance, "client", "/127.0.0.1", 60_000, 10_000, b"sub", b"asg")


def test_group_metadata_value_v3() -> None:
    value = GroupValue("consumer", 3, "range", "c-1", 1234, (member("c-1", "i-1"), member("c-2")))
    data = records.group_metadata_value(value)
    expected = (i16(3) + s("consumer") + i32(3) + s("range") + s("c-1") + i64(1234) + i32(2)
                + s("c-1") + s("i-1") + s("client") + s("/127.0.0.1") + i32(60_000) + i32(10_000) + b(b"sub")
                + b(b"asg")
                + s("c-2") + NULL + s("client") + s("/127.0.0.1") + i32(60_000) + i32(10_000) + b(b"sub")
                + b(b"asg"))
    assert data == expected
    assert records.read_group_value(data) == value


def test_an_empty_group_has_null_protocol_and_leader() -> None:
    value = GroupValue("consumer", 4, None, None, 99, ())
    data = records.group_metadata_value(value)
    assert data == i16(3) + s("consumer") + i32(4) + NULL + NULL + i64(99) + i32(0)
    assert records.read_group_value(data) == value


def test_group_metadata_value_v0_has_no_rebalance_timeout() -> None:
    data = (i16(0) + s("consumer") + i32(1) + s("range") + s("m") + i32(1)
            + s("m") + s("client") + s("/h") + i32(30_000) + b(b"s") + b(b"a"))
    assert records.read_group_value(data) == GroupValue(
        "consumer", 1, "range", "m", -1, (MemberValue("m", None, "client", "/h", 30_000, 30_000, b"s", b"a"),))


def test_group_metadata_value_v4_is_flexible() -> None:
    data = (i16(4) + bytes([9]) + b"consumer" + i32(1) + bytes([6]) + b"range" + bytes([2]) + b"m" + i64(5)
            + bytes([2])  # one member
            + bytes([2]) + b"m" + b"\x00" + bytes([7]) + b"client" + bytes([3]) + b"/h" + i32(1) + i32(2)
            + bytes([2]) + b"s" + bytes([2]) + b"a" + b"\x00"
            + b"\x00")
    assert records.read_group_value(data) == GroupValue(
        "consumer", 1, "range", "m", 5, (MemberValue("m", None, "client", "/h", 1, 2, b"s", b"a"),))


@pytest.mark.parametrize("data", [
    i16(3),  # a key version nobody wrote
    i16(1) + s("g"),  # cut short
    i16(1) + i16(5) + b"ab",  # a string longer than the record
])
def test_keys_no_kafka_wrote_are_refused(data: bytes) -> None:
    with pytest.raises(records.RecordFormatError):
        records.read_key(data)


@pytest.mark.parametrize("data", [i16(5) + i64(1), i16(3) + i64(1), b"\x00"])
def test_offset_values_no_kafka_wrote_are_refused(data: bytes) -> None:
    with pytest.raises(records.RecordFormatError):
        records.read_offset_value(data)


def test_a_null_string_where_kafka_has_none_is_refused() -> None:
    with pytest.raises(records.RecordFormatError, match="null where a string must be"):
        records.read_group_value(i16(3) + NULL + i32(1) + NULL + NULL + i64(0) + i32(0))

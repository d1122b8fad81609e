"""ConsumerProtocol bytes are Kafka's: what a Java or librdkafka member writes, we read, and back."""

from __future__ import annotations

import struct

import pytest

from client.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition


def kstr(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_a_version_0_subscription_from_an_old_client_is_read() -> None:
    # version 0, topics ["a", "bc"], user data null (-1): what kafka-python and librdkafka write.
    data = struct.pack(">hi", 0, 2) + kstr("a") + kstr("bc") + struct.pack(">i", -1)
    assert decode_subscription(data) == Subscription(("a", "bc"))


def test_a_newer_version_than_we_know_is_read_with_the_newest_schema() -> None:
    # Version 9 with the v3 fields (owned partitions, generation, rack) and a trailing field we do not know.
    data = (struct.pack(">hi", 9, 1) + kstr("t") + struct.pack(">i", 2) + b"ud"
            + struct.pack(">i", 1) + kstr("t") + struct.pack(">iii", 2, 0, 3)
            + struct.pack(">i", 7) + kstr("r1") + b"future")
    assert decode_subscription(data) == Subscription(("t",), b"ud", (TopicPartition("t", 0), TopicPartition("t", 3)),
                                                     7, "r1")


def test_subscription_round_trip_is_version_1_with_owned_partitions() -> None:
    sub = Subscription(("x", "y"), owned_partitions=(TopicPartition("x", 1), TopicPartition("x", 0)))
    data = encode_subscription(sub)
    assert data[:2] == b"\x00\x01"
    assert decode_subscription(data) == Subscription(("x", "y"), owned_partitions=(TopicPartition("x", 0),
                                                                                    TopicPartition("x", 1)))


def test_assignment_bytes_are_kafkas_version_0() -> None:
    data = encode_assignment(Assignment((TopicPartition("a", 1), TopicPartition("b", 0), TopicPartition("a", 0))))
    expected = (struct.pack(">hi", 0, 2) + kstr("a") + struct.pack(">iii", 2, 0, 1)
                + kstr("b") + struct.pack(">ii", 1, 0) + struct.pack(">i", -1))
    assert data == expected
    assert decode_assignment(data).partitions == (TopicPartition("a", 0), TopicPartition("a", 1),
                                                  TopicPartition("b", 0))


def test_an_empty_assignment_is_zero_bytes() -> None:
    assert decode_assignment(b"") == Assignment()


@pytest.mark.parametrize("data", [b"\x00", b"\xff\xff", b"\x00\x00\x00\x00\x00\x05ab"])
def test_malformed_bytes_are_invalid_request(data: bytes) -> None:
    with pytest.raises(KafkaError) as caught:
        decode_subscription(data)
    assert caught.value.code == ErrorCode.INVALID_REQUEST

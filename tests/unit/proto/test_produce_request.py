"""proto/produce_request.py writes the bytes protobuf's SerializeToString writes for the same ProduceRequest."""

from __future__ import annotations

import os

import pytest

from proto import minibroker_pb2 as pb
from proto.produce_request import encode_produce_request, varint

TOPICS = [
    ("orders", [(0, os.urandom(300)), (5, b"x" * 200_000)]),
    ("", [(0, b""), (2_147_483_647, b"\x00")]),
    ("\u00e9v\u00e9nements", []),
]


def message(transactional_id: str | None, acks: int, timeout_ms: int,
            topics: list[tuple[str, list[tuple[int, bytes]]]]) -> pb.ProduceRequest:
    request = pb.ProduceRequest(acks=acks, timeout_ms=timeout_ms)
    if transactional_id is not None:
        request.transactional_id = transactional_id
    for name, partitions in topics:
        topic = request.topics.add(name=name)
        for index, records in partitions:
            topic.partitions.add(index=index, records=records)
    return request


@pytest.mark.parametrize("transactional_id", [None, "", "txn-\u00fc"])
@pytest.mark.parametrize("acks", [-1, 0, 1])
@pytest.mark.parametrize("timeout_ms", [0, 30_000])
def test_the_bytes_are_protobufs(transactional_id: str | None, acks: int, timeout_ms: int) -> None:
    expected = message(transactional_id, acks, timeout_ms, TOPICS).SerializeToString()
    assert encode_produce_request(transactional_id, acks, timeout_ms, TOPICS) == expected


def test_no_topics() -> None:
    assert encode_produce_request(None, -1, 30_000, []) == message(None, -1, 30_000, []).SerializeToString()


def test_parsed_back_the_records_are_the_same_bytes() -> None:
    records = os.urandom(1 << 20)
    parsed = pb.ProduceRequest.FromString(encode_produce_request("t", -1, 100, [("a", [(3, records)])]))
    assert parsed.transactional_id == "t" and parsed.HasField("transactional_id")
    assert (parsed.acks, parsed.timeout_ms) == (-1, 100)
    assert [(t.name, [(p.index, p.records) for p in t.partitions]) for t in parsed.topics] == [("a", [(3, records)])]


@pytest.mark.parametrize("n", [1, 127, 128, 300, 2**31 - 1, -1, -(2**31)])
def test_varint_is_protobufs_int32(n: int) -> None:
    # Field 2 (acks) of a ProduceRequest alone: its tag, then the varint (0, the default, is left out).
    assert b"\x10" + varint(n) == pb.ProduceRequest(acks=n).SerializeToString()

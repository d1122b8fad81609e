"""A ProduceRequest's wire bytes written directly: the same bytes as ProduceRequest.SerializeToString, each
batch's records copied once.

The producer's requests carry up to max_request_size (1 MiB) of record batches.
Built as a message and serialized by protobuf (upb), each megabyte costs about
0.9 ms of CPU, twenty times a copy: the serializer's arena and output buffers
are fresh allocations above glibc's mmap threshold, freed again after every
request, so every page of them faults in anew (with the malloc thresholds
raised, the same call costs 0.04 ms). One b"".join of the framing and the
records here is the one copy the request needs (issue 26).

The encoding is protobuf's, for proto/minibroker.proto's ProduceRequest
(tests/unit/proto/test_produce_request.py compares it with SerializeToString):
each field as its tag (field number << 3 | wire type) and its value, in field
number order, a proto3 field at its default left out; int32 as a varint of its
64-bit two's complement; strings, bytes and messages length-delimited.
"""

from __future__ import annotations

from collections.abc import Sequence

_VARINT = 0
_LENGTH_DELIMITED = 2

# ProduceRequest's fields.
_TRANSACTIONAL_ID = bytes([1 << 3 | _LENGTH_DELIMITED])
_ACKS = bytes([2 << 3 | _VARINT])
_TIMEOUT_MS = bytes([3 << 3 | _VARINT])
_TOPICS = bytes([4 << 3 | _LENGTH_DELIMITED])
# TopicProduceData's.
_NAME = bytes([1 << 3 | _LENGTH_DELIMITED])
_PARTITIONS = bytes([2 << 3 | _LENGTH_DELIMITED])
# PartitionProduceData's.
_INDEX = bytes([1 << 3 | _VARINT])
_RECORDS = bytes([2 << 3 | _LENGTH_DELIMITED])


def varint(n: int) -> bytes:
    """Protobuf's base-128 varint; a negative int32 as its 64-bit two's complement (ten bytes)."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _int32(tag: bytes, value: int) -> list[bytes | bytearray]:
    return [tag, varint(value)] if value else []


def _length_delimited(tag: bytes, parts: list[bytes | bytearray]) -> list[bytes | bytearray]:
    return [tag, varint(sum(len(p) for p in parts)), *parts]


def encode_produce_request(transactional_id: str | None, acks: int, timeout_ms: int,
                           topics: Sequence[tuple[str, Sequence[tuple[int, bytes | bytearray]]]]) -> bytes:
    """The serialized ProduceRequest: `topics` as (name, [(partition index, record batch bytes)])."""
    parts: list[bytes | bytearray] = []
    if transactional_id is not None:
        parts += _length_delimited(_TRANSACTIONAL_ID, [transactional_id.encode()])
    parts += _int32(_ACKS, acks)
    parts += _int32(_TIMEOUT_MS, timeout_ms)
    for name, partitions in topics:
        topic: list[bytes | bytearray] = _length_delimited(_NAME, [name.encode()]) if name else []
        for index, records in partitions:
            partition = _int32(_INDEX, index)
            if records:
                partition += _length_delimited(_RECORDS, [records])
            topic += _length_delimited(_PARTITIONS, partition)
        parts += _length_delimited(_TOPICS, topic)
    return b"".join(parts)

"""What protobuf costs on the data path: serialize + parse of Produce/Fetch
messages whose `records` field carries raw RecordBatch bytes.

Decides whether Produce/Fetch need raw-bytes serializers that bypass protobuf
for the records (a protobuf header plus the batch bytes appended as they are).
Compared against a plain copy of the same bytes (the floor any serializer that
builds one contiguous buffer pays) and against such a header + tail framing.

    .venv/bin/python bench/proto_bytes.py
"""

from __future__ import annotations

import os
import struct
import timeit
from collections.abc import Callable
from functools import partial

from google.protobuf.internal import api_implementation

from proto import minibroker_pb2 as pb

SIZES = [1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20]
_LENGTH = struct.Struct(">I")


def _best_us(fn: Callable[[], object], budget_s: float = 0.3) -> float:
    """Best per-call time over a few repeats, in microseconds."""
    calls = max(1, int(budget_s / max(timeit.timeit(fn, number=1), 1e-7) / 5))
    return min(timeit.repeat(fn, number=calls, repeat=5)) / calls * 1e6


def produce_nested(records: bytes) -> pb.ProduceRequest:
    # Nested constructors copy each sub-message into its parent: the records
    # once per level.
    partition = pb.ProduceRequest.PartitionProduceData(index=0, records=records)
    topic = pb.ProduceRequest.TopicProduceData(name="bench", partitions=[partition])
    return pb.ProduceRequest(acks=-1, timeout_ms=30000, topics=[topic])


def produce_in_place(records: bytes) -> pb.ProduceRequest:
    # add() builds in place: the records are copied once.
    request = pb.ProduceRequest(acks=-1, timeout_ms=30000)
    request.topics.add(name="bench").partitions.add(index=0, records=records)
    return request


def fetch_response_in_place(records: bytes) -> pb.FetchResponse:
    response = pb.FetchResponse()
    response.responses.add(topic="bench").partitions.add(partition_index=0, high_watermark=1, records=records)
    return response


def serialize(message: pb.ProduceRequest) -> bytes:
    return message.SerializeToString()


def parse_produce(wire: bytes, get_records: bool) -> object:
    request = pb.ProduceRequest.FromString(wire)
    # Reading a bytes field makes a new Python bytes object (a copy) every time.
    return request.topics[0].partitions[0].records if get_records else request


def fetch_round_trip(records: bytes) -> bytes:
    wire = fetch_response_in_place(records).SerializeToString()
    return pb.FetchResponse.FromString(wire).responses[0].partitions[0].records


def copy(records: bytes) -> bytes:
    return bytes(bytearray(records))


def header_and_tail(meta: bytes, records: bytes) -> memoryview:
    """The alternative: protobuf for the small header, the batch bytes appended
    untouched; the reader slices them out with a memoryview (no copy)."""
    framed = b"".join((_LENGTH.pack(len(meta)), meta, records))
    (n,) = _LENGTH.unpack_from(framed)
    pb.ProduceRequest.FromString(framed[4 : 4 + n])
    return memoryview(framed)[4 + n :]


def main() -> None:
    print(f"protobuf implementation: {api_implementation.Type()}; µs per message, best of 5 repeats")
    columns = ["nested", "add()", "ser", "parse", "+get", "fetch rt", "copy", "hdr+tail"]
    print(f"{'size':>9} " + " ".join(f"{c:>9}" for c in columns))
    for size in SIZES:
        records = os.urandom(size)
        wire = produce_in_place(records).SerializeToString()
        meta = produce_in_place(b"").SerializeToString()
        figures = [
            _best_us(partial(produce_nested, records)),
            _best_us(partial(produce_in_place, records)),
            _best_us(partial(serialize, produce_in_place(records))),
            _best_us(partial(parse_produce, wire, False)),
            _best_us(partial(parse_produce, wire, True)),
            _best_us(partial(fetch_round_trip, records)),
            _best_us(partial(copy, records)),
            _best_us(partial(header_and_tail, meta, records)),
        ]
        print(f"{size >> 10:>5} KiB " + " ".join(f"{f:9.1f}" for f in figures))
    print(
        "nested/add(): build a ProduceRequest with nested constructors / in place; ser: SerializeToString;\n"
        "parse / +get: FromString, then reading .records; fetch rt: FetchResponse build+serialize+parse+get;\n"
        "copy: one copy of the bytes; hdr+tail: protobuf header + raw records framing, both ways"
    )


if __name__ == "__main__":
    main()

"""CPU of one Produce / Fetch round trip over grpc.aio on loopback, client and
server in this process, so the figure is the sum of both sides.

Run it twice to see what glibc's allocator does to big messages on this
machine: freeing a large buffer gives its pages back to the OS and the next
one faults them in again (~4 µs a page here, ~1 ms per MiB), so raising the
mmap and trim thresholds keeps the pages in the heap:

    .venv/bin/python bench/grpc_round_trip.py 1048576
    MALLOC_MMAP_THRESHOLD_=134217728 MALLOC_TRIM_THRESHOLD_=268435456 \\
        .venv/bin/python bench/grpc_round_trip.py 1048576
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable

import grpc

from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc

_OPTIONS = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]


class _Broker(pb_grpc.KafkaClientServicer):
    """Answers without touching a log: only the transport and protobuf are measured."""

    def __init__(self, records: bytes) -> None:
        self._records = records

    async def Produce(self, request: pb.ProduceRequest, context: grpc.aio.ServicerContext) -> pb.ProduceResponse:
        records = request.topics[0].partitions[0].records
        response = pb.ProduceResponse()
        response.responses.add(name="bench").partitions.add(index=0, base_offset=len(records))
        return response

    async def Fetch(self, request: pb.FetchRequest, context: grpc.aio.ServicerContext) -> pb.FetchResponse:
        response = pb.FetchResponse()
        response.responses.add(topic="bench").partitions.add(partition_index=0, records=self._records)
        return response


async def _measure(name: str, size: int, call: Callable[[], Awaitable[object]], n: int = 200) -> None:
    for _ in range(20):
        await call()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        await call()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"{name:8} {size >> 10:6} KiB: {cpu / n * 1e6:7.0f} µs CPU, {wall / n * 1e6:7.0f} µs wall per call")


async def main(size: int) -> None:
    records = os.urandom(size)
    server = grpc.aio.server(options=_OPTIONS)
    # Only Produce and Fetch are served; the generated base answers the rest UNIMPLEMENTED.
    broker = _Broker(records)  # type: ignore[abstract]
    pb_grpc.add_KafkaClientServicer_to_server(broker, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=_OPTIONS) as channel:
        stub = pb_grpc.KafkaClientStub(channel)
        produce = pb.ProduceRequest(acks=-1, timeout_ms=30000)
        produce.topics.add(name="bench").partitions.add(index=0, records=records)
        fetch = pb.FetchRequest(replica_id=-1, max_bytes=64 << 20)
        await _measure("Produce", size, lambda: stub.Produce(produce))
        await _measure("Fetch", size, lambda: stub.Fetch(fetch))
    await server.stop(None)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20))

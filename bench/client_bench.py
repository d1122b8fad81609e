"""Client CPU per record, without a real broker: the producer's send path and the consumer's decode path.

    .venv/bin/python bench/client_bench.py [value_size]

  accumulate  RecordAccumulator.append per record, then the drain's seal (header + CRC) per
              batch: the producer's own work for each record, single-threaded; and
              append_keyless, records without a key over six partitions (KIP-794's sticky
              partitioner), as send() adds them.
  request     records into 1 MB batches, each sealed and its Produce request's bytes written, as the
              I/O thread does: the per-batch work spread over its records (fresh buffers every
              batch, as in a producer: their page faults are part of the cost).
  producer    Producer.send() for every record, then flush(), against an in-process stub
              broker that answers Metadata and acknowledges Produce without storing anything;
              the stub shares the process (and the GIL), so this is a lower bound.
  baseline    confluent-kafka's produce() for every record into librdkafka's queue (no broker
              reachable, nothing sent): the calling thread's cost of the C client, the floor
              send() is measured against.
  decode      decode_records over 16 KiB batches.
  consume     parse_records over 1 MiB fetch answers: CRC check, decode, and the
              ConsumerRecords a consumer hands out.

Figures are records per second of CPU time (best of several runs): the machine
is shared, so wall time says more about the neighbours than about the code.
Single-threaded figures count the calling thread only, since gRPC keeps
threads of its own busy in the background.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from confluent_kafka import Producer as ConfluentProducer

from client.accumulator import ProducerBatch, RecordAccumulator
from client.fetcher import parse_records
from client.metadata import ClusterMetadata
from client.producer import Producer
from client.structs import BrokerMetadata, PartitionMetadata
from common.record import CompressionType, ProducerRecord, build_batch, decode_records
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.produce_request import encode_produce_request
from proto.types import TopicPartition

TOPIC = "bench"
TP = TopicPartition(TOPIC, 0)


def best_rate(records: int, run: Callable[[], object], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.thread_time()
        run()
        best = min(best, time.thread_time() - started)
    return records / best


def bench_accumulate(n: int, value: bytes) -> float:
    cluster = ClusterMetadata([BrokerMetadata(1, "h", 1)], [PartitionMetadata(TOPIC, 0, 1, 0, (1,), (1,), (), 0)])

    def run() -> None:
        accumulator = RecordAccumulator(linger_ms=0, buffer_memory=1 << 40)
        append = accumulator.append
        now = int(time.time() * 1000)
        for _ in range(n):
            append(TP, now, None, value, (), -1, len(value), -1)
        accumulator.close()
        while drained := accumulator.drain(cluster, {1}, 1 << 40, 0).get(1):
            for batch in drained:
                batch.seal(CompressionType.NONE)
                accumulator.answered(batch)

    return best_rate(n, run)


def bench_append_keyless(n: int, value: bytes, partitions: int = 6) -> float:
    tps = tuple(TopicPartition(TOPIC, p) for p in range(partitions))
    available = tuple(range(partitions))

    def run() -> None:
        accumulator = RecordAccumulator(linger_ms=0, buffer_memory=1 << 40)
        append = accumulator.append_keyless
        now = int(time.time() * 1000)
        for _ in range(n):
            append(TOPIC, tps, available, now, value, (), len(value), -1)

    return best_rate(n, run)


def bench_request_bytes(n: int, value: bytes) -> float:
    per_batch = 1_000_000 // (len(value) + 10)

    def run() -> None:
        for batch_id in range(n // per_batch):
            batch = ProducerBatch(TP, batch_id, 0.0, 0, 1_000_000)
            for _ in range(per_batch):
                batch.try_append(1, None, value, ())
            records = batch.seal(CompressionType.NONE, producer_id=1, producer_epoch=0, base_sequence=0)
            encode_produce_request(None, -1, 30_000, [(TOPIC, [(0, records)])])

    return best_rate(n // per_batch * per_batch, run)


def bench_confluent_produce(n: int, value: bytes) -> float:
    """confluent-kafka's produce() into librdkafka's queue, toward a port nothing listens on: the calling thread's
    CPU per record, with nothing sent."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again before librdkafka tries it
    producer = ConfluentProducer({"bootstrap.servers": f"127.0.0.1:{port}", "queue.buffering.max.messages": 2 * n,
                                  "queue.buffering.max.kbytes": 2 * n * len(value) // 1024 + 1024,
                                  "log_level": 0})

    def run() -> None:
        produce = producer.produce
        for _ in range(n):
            produce(TOPIC, value)
        producer.purge()
        producer.poll(0)  # the purged records' delivery reports: until served they hold their queue slots

    try:
        return best_rate(n, run)
    finally:
        producer.flush(0)


class _StubBroker(pb_grpc.KafkaClientServicer):
    """Acknowledges everything: only the client's work (and gRPC's) is measured."""

    def __init__(self) -> None:
        self.port = 0
        self.offset = 0

    def Metadata(self, request: pb.MetadataRequest, context: Any) -> pb.MetadataResponse:
        response = pb.MetadataResponse(controller_id=1)
        response.brokers.add(node_id=1, host="127.0.0.1", port=self.port)
        response.topics.add(name=TOPIC).partitions.add(partition_index=0, leader_id=1, replica_nodes=[1],
                                                       isr_nodes=[1])
        return response

    def Produce(self, request: pb.ProduceRequest, context: Any) -> pb.ProduceResponse:
        response = pb.ProduceResponse()
        for topic in request.topics:
            out = response.responses.add(name=topic.name)
            for part in topic.partitions:
                out.partitions.add(index=part.index, base_offset=self.offset)
                self.offset += 1
        return response


def bench_producer(n: int, value: bytes) -> tuple[float, float]:
    """(records/s of the calling thread's CPU in send(), records/s of the process's CPU for send() + flush()).

    The I/O thread drains and seals batches while send() runs, so the first
    figure is the application thread's cost and the second the whole client's.
    """
    stub = _StubBroker()  # type: ignore[abstract]  # only Metadata and Produce are served
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_KafkaClientServicer_to_server(stub, server)
    stub.port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    producer = Producer(f"127.0.0.1:{stub.port}", acks=1, linger_ms=5)
    producer.send(TOPIC, value).get(10)
    send_best = total_best = float("inf")
    for _ in range(3):
        started, thread_started = time.process_time(), time.thread_time()
        send = producer.send
        for _ in range(n):
            send(TOPIC, value)
        send_best = min(send_best, time.thread_time() - thread_started)
        producer.flush(60)
        total_best = min(total_best, time.process_time() - started)
    producer.close()
    server.stop(None)
    return n / send_best, n / total_best


def fetch_responses(n: int, value: bytes) -> tuple[list[bytes], list[bytes]]:
    """`n` records as 16 KiB batches, and as 1 MiB fetch answers (max_partition_fetch_bytes) of such batches."""
    per_batch = max(1, 16384 // (len(value) + 10))
    now = int(time.time() * 1000)
    batches = [
        build_batch([ProducerRecord(value, None, now)] * min(per_batch, n - start), base_offset=start)
        for start in range(0, n, per_batch)
    ]
    per_response = max(1, (1 << 20) // len(batches[0]))
    responses = [b"".join(batches[i : i + per_response]) for i in range(0, len(batches), per_response)]
    return batches, responses


def decode_all(batches: list[bytes]) -> None:
    for batch in batches:
        decode_records(batch)


def parse_all(responses: list[bytes]) -> None:
    for response in responses:
        parse_records(TP, response, 0)


def main(value_size: int) -> None:
    value = os.urandom(value_size)
    n = 200_000
    print(f"{value_size}-byte values, null keys, records/s of CPU time (best of runs)")
    # Single-threaded figures first: once gRPC has started, its threads compete for the GIL.
    batches, responses = fetch_responses(n, value)
    print(f"  decode_records                {best_rate(n, lambda: decode_all(batches)):>12,.0f}")
    print(f"  parse_records (consumer)      {best_rate(n, lambda: parse_all(responses)):>12,.0f}")
    print(f"  accumulate (append + seal)    {bench_accumulate(n, value):>12,.0f}")
    print(f"  append_keyless, 6 partitions  {bench_append_keyless(n, value):>12,.0f}")
    print(f"  1 MB batches to request bytes {bench_request_bytes(n, value):>12,.0f}")
    print(f"  confluent-kafka produce()     {bench_confluent_produce(n, value):>12,.0f}   (baseline)")
    send_only, with_flush = bench_producer(n, value)
    print(f"  producer send(), its thread   {send_only:>12,.0f}")
    print(f"  producer send() + flush()     {with_flush:>12,.0f}")

if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)

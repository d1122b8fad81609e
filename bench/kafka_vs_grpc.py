"""The same workload through both front doors of one cluster, figures printed side by side from one run.

    .venv/bin/python bench/kafka_vs_grpc.py [--records 200000] [--sizes 100,1024] [--partitions 1,6] [--repeat 3]

Brings up a local cluster (3 brokers, 1 controller; local_cluster.cluster, as `minibroker cluster up`
does) and for each record size and partition count creates an RF=3, min.insync.replicas=2 topic per door and:

- produces `--records` records with acks=all: confluent-kafka (librdkafka) through the Kafka listener, with
  its defaults and with linger.ms=5, and minibroker's own client through the gRPC listener (linger.ms=5);
- consumes them all back: confluent-kafka (Fetch, records sent with sendfile) and minibroker's client (gRPC);
- reads the brokers' CPU time (utime+stime of the three processes) around each phase: broker CPU seconds
  per MB of record payload;

runs each workload `--repeat` times (default 3), the two sides in turn on fresh topics each run so both
see the same load, and prints each run, the medians over the runs and issue 26's ratios of medians beside
their goals, with the min and max of the per-run ratios (the gRPC produce against the better of the
confluent-kafka runs, in records/s and broker CPU per MB; the gRPC consume against confluent-kafka's): on
this shared machine one side's figures move 3-5x between runs, a median of three does not;
then, on the 1 KiB one-partition topic:
- the broker's read path alone, with raw protocol clients that do not decode records: Fetch responses of up to
  16 MiB from offset 0, again and again, through the Kafka listener (header bytes, then the log's file slice
  with sendfile) and through the gRPC listener (one pread per partition into the protobuf response), with
  the leader's CPU per MB;
- the sendfile floor: the leader's segment files sent with os.sendfile over a loopback socket to a reader,
  and the confluent-kafka consume of the same topic as a share of it.
The cluster and its temporary data dir are removed at the end.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from kio.schema.types import BrokerId, TopicName  # noqa: E402
from kio.static.primitive import i8, i32, i32Timedelta, i64  # noqa: E402

import client  # noqa: E402
from client.connection import channel_options  # noqa: E402
from local_cluster.cluster import LocalCluster  # noqa: E402
from local_cluster.cluster_file import ClusterInfo  # noqa: E402
from proto import minibroker_pb2 as pb  # noqa: E402
from proto import minibroker_pb2_grpc as pb_grpc  # noqa: E402
from tests.integration.kafka_wire import WireConnection, encode_request  # noqa: E402

MB = 1 << 20
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


class FirstRecord:
    """When a consume phase saw its first record: the client's start-up (connect, metadata, offsets) is then
    told apart from the steady rate."""

    def __init__(self) -> None:
        self.at: float | None = None

    def seen(self) -> None:
        if self.at is None:
            self.at = time.perf_counter()


class Phase:
    """Wall time and the brokers' CPU time of one measured phase."""

    def __init__(self, pids: list[int]) -> None:
        self._pids = pids

    def run(self, work: Callable[[], int]) -> tuple[int, float, float]:
        """(records, seconds, broker CPU seconds)."""
        cpu = sum(process_cpu_s(p) for p in self._pids)
        started = time.perf_counter()
        records = work()
        elapsed = time.perf_counter() - started
        return records, elapsed, sum(process_cpu_s(p) for p in self._pids) - cpu


def create(admin: AdminClient, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[name].result(timeout=60)


def produce_waiting(producer: Producer, topic: str, value: bytes) -> None:
    """One produce(), waiting for room while librdkafka's queue is full (a blocking send)."""
    while True:
        try:
            producer.produce(topic, value)
            return
        except BufferError:
            producer.poll(0.01)


def kafka_produce(bootstrap: str, topic: str, n: int, value: bytes, extra: dict[str, object]) -> Callable[[], int]:
    def work() -> int:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **extra})
        for _ in range(n):
            produce_waiting(producer, topic, value)
        assert producer.flush(300) == 0
        return n

    return work


def grpc_produce(bootstrap: str, topic: str, n: int, value: bytes) -> Callable[[], int]:
    def work() -> int:
        producer = client.Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        for _ in range(n):
            producer.send(topic, value)
        producer.flush(timeout=300)
        producer.close()
        return n

    return work


def kafka_consume(bootstrap: str, topic: str, partitions: int, n: int, first: FirstRecord,
                  extra: dict[str, object] | None = None) -> tuple[Callable[[], int], Callable[[], None]]:
    """The timed part (assign and read `n` records) and the clean-up; building and closing the consumer are
    the client's own business, not the front door's. `extra`: more librdkafka settings (security)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 64 * MB, "max.partition.fetch.bytes": 16 * MB, **(extra or {})})

    def work() -> int:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got = 0
        deadline = time.monotonic() + 300
        while got < n and time.monotonic() < deadline:
            # consume() waits out its timeout unless it gets all it asked for: ask for no more than is left.
            for message in consumer.consume(min(10_000, n - got), 1.0):
                if message.error() is None:
                    first.seen()
                    got += 1
        return got

    return work, consumer.close


def grpc_consume(bootstrap: str, topic: str, partitions: int, n: int, first: FirstRecord
                 ) -> tuple[Callable[[], int], Callable[[], None]]:
    consumer = client.Consumer(bootstrap_servers=bootstrap)

    def work() -> int:
        consumer.assign([client.TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        got = 0
        deadline = time.monotonic() + 300
        while got < n and time.monotonic() < deadline:
            polled = sum(len(records) for records in consumer.poll(timeout_ms=1000).values())
            if polled:
                first.seen()
            got += polled
        return got

    return work, consumer.close


FETCH_BYTES = 16 * MB


def raw_kafka_fetches(address: str, topic: str, seconds: float, tls: ssl.SSLContext | None = None
                      ) -> Callable[[], int]:
    """Fetch v11 from offset 0 for `seconds`, reading and dropping each response; the bytes received. With
    `tls`, over an SSL listener."""
    request = encode_request(FetchRequest(
        replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(0)), min_bytes=i32(1),
        max_bytes=i32(FETCH_BYTES), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName(topic), partitions=(FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0), log_start_offset=i64(-1),
            partition_max_bytes=i32(FETCH_BYTES)),)),), forgotten_topics_data=(), rack_id=""), 1)

    def work() -> int:
        received = 0
        with WireConnection(address, tls=tls) as conn:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                conn.send(request)
                received += len(conn.receive()[1])
        return received

    return work


def raw_grpc_fetches(address: str, topic: str, seconds: float) -> Callable[[], int]:
    request = pb.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=FETCH_BYTES, topics=[
        pb.FetchRequest.FetchTopic(topic=topic, partitions=[pb.FetchRequest.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
            partition_max_bytes=FETCH_BYTES)])])

    def work() -> int:
        received = 0
        with grpc.insecure_channel(address, options=channel_options(100, 1000)) as channel:
            stub = pb_grpc.KafkaClientStub(channel)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                response = stub.Fetch(request, timeout=60)
                received += sum(len(p.records) for t in response.responses for p in t.partitions)
        return received

    return work


def sendfile_floor(info: ClusterInfo, topic: str) -> tuple[int, float]:
    """Bytes and seconds to os.sendfile every segment of `topic` (one broker's copy) over loopback."""
    log_dir = Path(info.brokers[0].log_dir)
    files = sorted(log_dir.glob(f"{topic}-*/*.log"))
    server = socket.create_server(("127.0.0.1", 0))
    received = [0]

    def drain() -> None:
        conn, _ = server.accept()
        with conn:
            while chunk := conn.recv(4 * MB):
                received[0] += len(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    total = 0
    started = time.perf_counter()
    with socket.create_connection(server.getsockname()) as out:
        for path in files:
            with open(path, "rb") as f:
                size, offset = os.fstat(f.fileno()).st_size, 0
                while offset < size:
                    offset += os.sendfile(out.fileno(), f.fileno(), offset, size - offset)
                total += size
    reader.join()
    elapsed = time.perf_counter() - started
    server.close()
    return total, elapsed


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def spread(values: list[float], fmt: str) -> str:
    """Values' median with their min and max: '123 (101-150)'."""
    return f"{median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def print_ratios(tag: str, figures: dict[str, list[tuple[float, float]]]) -> None:
    """Issue 26's goals, each ratio of medians beside its goal: the gRPC produce against the better of the two
    confluent-kafka runs (records/s, and broker CPU per MB), the gRPC consumer against confluent-kafka's; with
    the ratio's min and max over the runs (run i of one side against run i of the other)."""
    def rows(prefix: str, door: str) -> list[list[tuple[float, float]]]:
        return [v for k, v in figures.items() if k.startswith(prefix) and door in k]

    kafka_produce, (grpc_produce,) = rows("produce", "(Kafka)"), rows("produce", "(gRPC)")
    (kafka_consume,), (grpc_consume,) = rows("consume", "(Kafka"), rows("consume", "(gRPC)")
    runs = range(len(grpc_produce))
    rates = [grpc_produce[i][0] / max(k[i][0] for k in kafka_produce) for i in runs]
    cpus = [grpc_produce[i][1] / min(k[i][1] for k in kafka_produce) for i in runs]
    consumes = [grpc_consume[i][0] / kafka_consume[i][0] for i in runs]
    rate = median([r for r, _ in grpc_produce]) / max(median([r for r, _ in k]) for k in kafka_produce)
    cpu = median([c for _, c in grpc_produce]) / min(median([c for _, c in k]) for k in kafka_produce)
    consume = median([r for r, _ in grpc_consume]) / median([r for r, _ in kafka_consume])
    print(f"  ratios {tag} (of medians, min-max per run): gRPC/Kafka produce records/s {rate:.2f}"
          f" ({min(rates):.2f}-{max(rates):.2f}; goal >= 0.5: {_met(rate >= 0.5)}),"
          f" broker CPU/MB {cpu:.1f}x ({min(cpus):.1f}-{max(cpus):.1f}; goal <= 2x: {_met(cpu <= 2)}),"
          f" consume records/s {consume:.2f} ({min(consumes):.2f}-{max(consumes):.2f};"
          f" goal > 1: {_met(consume > 1)})", flush=True)


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def run_workload(info: ClusterInfo, admin: AdminClient, phase: Phase, tag: str, suffix: str, partitions: int,
                 n: int, value: bytes, figures: dict[str, list[tuple[float, float]]]) -> str:
    """One run of a workload: fresh topics, each side in turn, a line per row and its figures added to
    `figures`. Returns the confluent-kafka topic."""
    size = len(value)
    k_topic, g_topic = f"k-{suffix}", f"g-{suffix}"
    for topic in (k_topic, g_topic, k_topic + "-linger"):
        create(admin, topic, partitions)
    rows = [
        (f"produce {tag} confluent-kafka defaults (Kafka)",
         kafka_produce(info.kafka_bootstrap_servers, k_topic, n, value, {})),
        (f"produce {tag} confluent-kafka linger.ms=5 (Kafka)",
         kafka_produce(info.kafka_bootstrap_servers, k_topic + "-linger", n, value, {"linger.ms": 5})),
        (f"produce {tag} minibroker client linger.ms=5 (gRPC)",
         grpc_produce(info.bootstrap_servers, g_topic, n, value)),
        (f"consume {tag} confluent-kafka (Kafka, sendfile)",
         kafka_consume(info.kafka_bootstrap_servers, k_topic, partitions, n, kafka_first := FirstRecord())),
        (f"consume {tag} minibroker client (gRPC)",
         grpc_consume(info.bootstrap_servers, g_topic, partitions, n, grpc_first := FirstRecord())),
    ]
    for name, job in rows:
        work, done = job if isinstance(job, tuple) else (job, lambda: None)
        started = time.perf_counter()
        records, seconds, cpu = phase.run(work)
        done()
        megabytes = records * size / MB
        figures.setdefault(name, []).append((records / seconds, cpu / megabytes))
        line = f"{name:58} {records / seconds:>11,.0f} {megabytes / seconds:>8.1f} {cpu / megabytes:>16.3f}"
        first = kafka_first if "confluent-kafka (Kafka, sendfile)" in name else \
            grpc_first if name.startswith("consume") else None
        if first is not None and first.at is not None:
            steady = seconds - (first.at - started)
            line += f"   first record after {first.at - started:.2f} s, then {megabytes / steady:,.0f} MB/s"
        print(line, flush=True)
    return k_topic


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--partitions", default="1,6")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each workload, the two sides in turn: medians and ratios of medians printed")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="minibroker-kafka-vs-grpc-"))
    cluster = LocalCluster(data_dir)
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (on {os.cpu_count()} CPUs)")
    try:
        info = cluster.up(brokers=3, controllers=1)
        pids = [b.pid for b in info.brokers if b.pid is not None]
        phase = Phase(pids)
        admin = AdminClient({"bootstrap.servers": info.kafka_bootstrap_servers})
        print(f"{'workload':58} {'records/s':>11} {'MB/s':>8} {'broker CPU s/MB':>16}")
        floor_topic = None
        for size in (int(s) for s in args.sizes.split(",")):
            value = os.urandom(size)
            n = args.records if size <= 100 else max(args.records // 4, 1)
            for partitions in (int(p) for p in args.partitions.split(",")):
                tag = f"{size}B x {partitions}p"
                figures: dict[str, list[tuple[float, float]]] = {}  # row name: (records/s, broker CPU s/MB) per run
                for run in range(args.repeat):
                    k_topic = run_workload(info, admin, phase, tag, f"{size}-{partitions}-{run}", partitions, n,
                                           value, figures)
                    if size >= 1024 and partitions == 1 and floor_topic is None:
                        floor_topic = (k_topic, n, size)
                if args.repeat > 1:
                    print(f"  medians of {args.repeat} runs {tag} (records/s min-max at the end):")
                    for name, runs in figures.items():
                        rates = [r for r, _ in runs]
                        print(f"{name:58} {median(rates):>11,.0f} {median(rates) * size / MB:>8.1f}"
                              f" {median([c for _, c in runs]):>16.3f}   {spread(rates, ',.0f')}", flush=True)
                print_ratios(tag, figures)
        if floor_topic is not None:
            topic, n, size = floor_topic
            leader_id = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
            leader = info.broker(leader_id)
            assert leader.pid is not None and leader.kafka_address is not None
            leader_phase = Phase([leader.pid])
            for door, work in (("Kafka listener, sendfile", raw_kafka_fetches(leader.kafka_address, topic, 5.0)),
                               ("gRPC listener, pread", raw_grpc_fetches(leader.address, topic, 5.0))):
                received, seconds, cpu = leader_phase.run(work)
                print(f"raw Fetch of {topic} from offset 0 ({door}): {received / MB / seconds:,.0f} MB/s,"
                      f" leader CPU {cpu / (received / MB):.4f} s/MB", flush=True)
            first = FirstRecord()
            work, done = kafka_consume(info.kafka_bootstrap_servers, topic, 1, n, first)
            started = time.perf_counter()
            records, seconds, _ = phase.run(work)
            done()
            assert first.at is not None
            # The steady rate: from the first record on (librdkafka's start-up is not the broker's sendfile).
            consumed_mb_s = records * size / MB / (seconds - (first.at - started))
            total, floor_seconds = sendfile_floor(info, topic)
            floor_mb_s = total / MB / floor_seconds
            print(f"os.sendfile of {topic}'s segments over loopback: {floor_mb_s:,.0f} MB/s;"
                  f" confluent-kafka consume of it: {consumed_mb_s:,.0f} MB/s of payload"
                  f" ({consumed_mb_s / floor_mb_s:.0%} of the floor)")
    finally:
        cluster.down(kill=True)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

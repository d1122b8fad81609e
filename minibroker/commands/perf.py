"""`minibroker perf produce | consume | end-to-end`: Kafka's performance tools, same options and output lines.

    minibroker perf produce --topic T --num-records N (--record-size B | --payload-file F [--payload-delimiter D])
        --throughput -1 [--producer-props acks=1 linger.ms=5 batch.size=65536 ...]  (kafka-producer-perf-test.sh)
    minibroker perf consume --topic T --messages N [--from-latest] [--timeout MS]
                                                                           (kafka-consumer-perf-test.sh)
    minibroker perf end-to-end --topic T --num-records N [--producer-props acks=all]
                                                                           (kafka.tools.EndToEndLatency)

each with --bootstrap-server H:P or --data-dir D (perf produce also takes
bootstrap.servers in --producer-props, as Kafka's does). A record's latency
runs from send() to its acknowledgement, measured with a monotonic clock.
"""

from __future__ import annotations

import argparse
import gc
import operator
import os
import random
import re
import sys
import time
from datetime import datetime
from pathlib import Path

from broker.server.malloc import tune_malloc
from client import Admin, Consumer, ConsumerRecord, FutureRecordMetadata, KafkaError, NewTopic, Producer, TopicPartition
from common.grpc_tls import GrpcSecurity
from minibroker.commands.client_options import (
    UsageError,
    add_cluster_options,
    bootstrap_servers,
    client_kwargs,
    client_security,
    load_config_file,
    parse_key_values,
)

MB = 1024 * 1024
_NS_PER_MS = 1_000_000
_NS_PER_S = 1_000_000_000
# Kafka's ProducerPerformance keeps at most this many latency samples for the percentiles.
_MAX_LATENCY_SAMPLES = 500_000


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("perf", help="producer, consumer and end-to-end performance tests",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    tools = parser.add_subparsers(dest="tool", required=True, metavar="TOOL")

    produce = tools.add_parser("produce", help="kafka-producer-perf-test: send records as fast as asked")
    add_cluster_options(produce)
    produce.add_argument("--topic", required=True, help="produce messages to this topic")
    produce.add_argument("--num-records", type=int, required=True, help="number of messages to produce")
    payload = produce.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, help="message size in bytes. Note that you must provide exactly"
                                                         " one of --record-size or --payload-file.")
    payload.add_argument("--payload-file", type=Path, metavar="FILE",
                         help="file to read the message payloads from; each record's payload is one of them, at"
                              " random. Note that you must provide exactly one of --record-size or --payload-file.")
    produce.add_argument("--payload-delimiter", default="\n", metavar="DELIMITER",
                         help="provides delimiter to be used when --payload-file is provided. Defaults to new line."
                              " Note that this parameter will be ignored if --payload-file is not provided.")
    produce.add_argument("--throughput", type=float, required=True,
                         help="throttle message throughput to *approximately* THROUGHPUT messages/sec; -1: no limit")
    _producer_options(produce)
    produce.set_defaults(func=_produce)

    consume = tools.add_parser("consume", help="kafka-consumer-perf-test: read records as fast as possible")
    add_cluster_options(consume)
    consume.add_argument("--topic", required=True, help="the topic to consume from")
    consume.add_argument("--messages", type=int, required=True, help="the number of messages to consume")
    consume.add_argument("--group", help="the consumer group id (default: perf-consumer-<random>)")
    consume.add_argument("--from-latest", action="store_true",
                         help="start from the latest record instead of the earliest (without a committed offset)")
    consume.add_argument("--fetch-size", type=int, default=1048576,
                         help="the amount of data to fetch in a single request, per partition (default 1048576)")
    consume.add_argument("--timeout", type=int, default=10000, metavar="MS",
                         help="the maximum allowed time between returned records (default 10000)")
    consume.add_argument("--consumer.config", dest="consumer_config", type=Path, metavar="FILE",
                         help="consumer config properties file")
    consume.add_argument("--date-format", default="%Y-%m-%d %H:%M:%S:%f",
                         help="strftime format of start.time and end.time (default: Kafka's yyyy-MM-dd HH:mm:ss:SSS)")
    consume.add_argument("--hide-header", action="store_true", help="do not print the header line")
    consume.set_defaults(func=_consume)

    e2e = tools.add_parser("end-to-end", help="EndToEndLatency: produce one record, consume it, repeat")
    add_cluster_options(e2e)
    e2e.add_argument("--topic", required=True, help="the topic (created with one partition if it does not exist)")
    e2e.add_argument("--num-records", type=int, required=True, help="number of round trips")
    e2e.add_argument("--record-size", type=int, default=100, help="message size in bytes (default 100)")
    e2e.add_argument("--timeout-ms", type=int, default=60000, help="how long one poll may wait for the record")
    _producer_options(e2e)
    e2e.set_defaults(func=_end_to_end)


def _producer_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--producer-props", nargs="+", default=[], metavar="PROP=VALUE",
                        help="producer configs, Kafka's names: acks=1 linger.ms=5 batch.size=65536 ...")
    parser.add_argument("--producer.config", dest="producer_config", type=Path, metavar="FILE",
                        help="producer config properties file; --producer-props win over it")


def _producer(args: argparse.Namespace, defaults: dict[str, str]) -> tuple[Producer, str, GrpcSecurity]:
    """The producer --producer.config and --producer-props describe, the bootstrap servers it uses and how it
    secures its connections (--command-config, or the data dir's, unless the props say)."""
    props = defaults | load_config_file(args.producer_config) | parse_key_values(args.producer_props)
    bootstrap = bootstrap_servers(args, props)
    security = client_security(args, props)
    return Producer(bootstrap, **client_kwargs(Producer, props), channel_factory=security.channel_factory), bootstrap, \
        security


def tune_runtime() -> None:
    """The tools' equivalent of the JVM flags Kafka's scripts pass: a collector that keeps out of the way.

    Every record in flight holds a few small objects (its future, its callback) for a few milliseconds:
    long enough to survive the young generations, so with CPython's default thresholds they keep
    triggering full collections of every object the process has. Freezing what exists after start-up
    (modules, gRPC, protobuf) takes it out of those collections, and a larger young generation lets
    most records' objects die before they are ever traversed.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    # And the broker's malloc thresholds: megabyte requests and answers reuse heap pages instead of
    # faulting in fresh ones each time (broker/server/malloc.py).
    tune_malloc()


def _fail(tool: str, error: Exception) -> int:
    print(f"minibroker perf {tool}: {error}", file=sys.stderr)
    return 1


# ---------------------------------------------------------------------- produce


def _produce(args: argparse.Namespace) -> int:
    if args.throughput == 0:
        return _fail("produce", UsageError("--throughput must be positive, or -1 for no limit"))
    try:
        payloads = None if args.payload_file is None else read_payloads(args.payload_file, args.payload_delimiter)
        producer, _, _ = _producer(args, {})
    except (UsageError, ValueError) as e:
        return _fail("produce", e)
    # Kafka's payload without a file: random upper-case letters, one payload for every record.
    payload = b"" if payloads is not None else bytes(random.choice(range(65, 91)) for _ in range(args.record_size))
    stats = ProducerStats(args.num_records)
    tune_runtime()
    throttler = ThroughputThrottler(args.throughput, time.monotonic_ns())
    size = len(payload)
    topic = args.topic
    send = producer.send
    clock = time.monotonic_ns
    throttled = args.throughput > 0  # -1 never throttles: no need to ask per record
    try:
        for i in range(args.num_records):
            if payloads is not None:
                payload = random.choice(payloads)
                size = len(payload)
            send_start = clock()
            # Kafka's producer.send(record, callback): one callback per record, attached as it is sent.
            send(topic, payload, callback=_Completion(stats, i, send_start, size))
            if throttled and throttler.should_throttle(i, send_start):
                throttler.throttle()
    finally:
        producer.close()
    print(stats.total())
    if stats.errors:
        print(f"{stats.errors} records failed; the first: {stats.first_error}", file=sys.stderr)
        return 1
    return 0


def read_payloads(path: Path, delimiter: str) -> list[bytes]:
    """ProducerPerformance's payload file: its UTF-8 text split at `delimiter` (a regular expression, as Java's
    String.split takes it, which also drops trailing empty strings)."""
    print(f"Reading payloads from: {path.absolute()}")
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read the payload file {path}: {e}") from None
    if not text:
        raise UsageError("File does not exist or empty file provided.")
    try:
        payloads = re.split(delimiter, text)
    except re.error as e:
        raise UsageError(f"Invalid --payload-delimiter {delimiter!r}: {e}") from None
    while payloads and not payloads[-1]:
        payloads.pop()
    if not payloads:
        raise UsageError(f"The payload file {path} holds nothing but delimiters")
    print(f"Number of messages read: {len(payloads)}")
    return [p.encode("utf-8") for p in payloads]


class ProducerStats:
    """Kafka's ProducerPerformance.Stats: totals, a window printed every 5 s, sampled latencies.

    Completions arrive on the producer's one I/O thread, which also prints the window line, as in Kafka;
    total() is read once the producer is closed. So no lock: the callback is the costliest thing the
    benchmark adds per record, and it runs under the GIL the send loop needs.
    """

    REPORTING_INTERVAL_NS = 5 * _NS_PER_S

    def __init__(self, num_records: int) -> None:
        self.start = time.monotonic_ns()
        self.sampling = max(num_records // min(max(num_records, 1), _MAX_LATENCY_SAMPLES), 1)
        self.latencies: list[float] = []
        # Totals of the windows closed so far: a completion only touches the current window's counters.
        self._closed_count = self._closed_bytes = 0
        self._closed_total_latency = self._closed_max_latency = 0.0
        self.errors = 0
        self.first_error: Exception | None = None
        self._new_window(self.start)

    @property
    def count(self) -> int:
        return self._closed_count + self.window_count

    @property
    def bytes(self) -> int:
        return self._closed_bytes + self.window_bytes

    @property
    def total_latency(self) -> float:
        return self._closed_total_latency + self.window_total_latency

    @property
    def max_latency(self) -> float:
        return max(self._closed_max_latency, self.window_max_latency)

    def _new_window(self, now_ns: int) -> None:
        self.window_start = now_ns
        self.window_count = self.window_bytes = 0
        self.window_total_latency = self.window_max_latency = 0.0

    def _close_window(self, now_ns: int) -> None:
        self._closed_count += self.window_count
        self._closed_bytes += self.window_bytes
        self._closed_total_latency += self.window_total_latency
        self._closed_max_latency = max(self._closed_max_latency, self.window_max_latency)
        self._new_window(now_ns)

    def completion(self, iteration: int, send_start_ns: int, size: int) -> _Completion:
        return _Completion(self, iteration, send_start_ns, size)

    def record(self, iteration: int, latency_ms: float, size: int, now_ns: int) -> None:
        self.window_count += 1
        self.window_bytes += size
        self.window_total_latency += latency_ms
        if latency_ms > self.window_max_latency:
            self.window_max_latency = latency_ms
        if iteration % self.sampling == 0:
            self.latencies.append(latency_ms)
        if now_ns - self.window_start >= self.REPORTING_INTERVAL_NS:
            print(self.window(now_ns), flush=True)
            self._close_window(now_ns)

    def record_error(self, error: Exception | None) -> None:
        self.errors += 1
        self.first_error = self.first_error or error

    def window(self, now_ns: int) -> str:
        elapsed_s = max(now_ns - self.window_start, 1) / _NS_PER_S
        count = max(self.window_count, 1)
        return (f"{self.window_count} records sent, {self.window_count / elapsed_s:.1f} records/sec"
                f" ({self.window_bytes / elapsed_s / MB:.2f} MB/sec), {self.window_total_latency / count:.1f} ms avg"
                f" latency, {self.window_max_latency:.1f} ms max latency.")

    def total(self) -> str:
        elapsed_s = max(time.monotonic_ns() - self.start, 1) / _NS_PER_S
        p50, p95, p99, p999 = percentiles(self.latencies, 0.5, 0.95, 0.99, 0.999)
        return (f"{self.count} records sent, {self.count / elapsed_s:f} records/sec ({self.bytes / elapsed_s / MB:.2f}"
                f" MB/sec), {self.total_latency / max(self.count, 1):.2f} ms avg latency, {self.max_latency:.2f} ms"
                f" max latency, {p50} ms 50th, {p95} ms 95th, {p99} ms 99th, {p999} ms 99.9th.")


class _Completion:
    """One record's completion callback (Kafka's PerfCallback): a small object, not a closure, per record."""

    __slots__ = ("iteration", "send_start_ns", "size", "stats")

    def __init__(self, stats: ProducerStats, iteration: int, send_start_ns: int, size: int) -> None:
        self.stats = stats
        self.iteration = iteration
        self.send_start_ns = send_start_ns
        self.size = size

    def __call__(self, future: FutureRecordMetadata) -> None:
        now = time.monotonic_ns()
        # Like Kafka's, a failed record counts too: its latency is how long it took to fail.
        self.stats.record(self.iteration, (now - self.send_start_ns) / _NS_PER_MS, self.size, now)
        if future.failed():
            self.stats.record_error(future.exception())


def percentiles(latencies_ms: list[float], *points: float) -> list[int]:
    """Kafka's: the sorted sample at index int(p * size), in whole milliseconds."""
    ordered = sorted(latencies_ms)
    if not ordered:
        return [0 for _ in points]
    return [int(ordered[min(int(p * len(ordered)), len(ordered) - 1)]) for p in points]


class ThroughputThrottler:
    """Kafka's ThroughputThrottler: sleep, on average, 1/throughput s per record, in sleeps of >= 2 ms."""

    MIN_SLEEP_NS = 2 * _NS_PER_MS

    def __init__(self, target_throughput: float, start_ns: int) -> None:
        self.target = target_throughput
        self.start_ns = start_ns
        self.sleep_time_ns = _NS_PER_S / target_throughput if target_throughput > 0 else 0.0
        self.sleep_deficit_ns = 0.0

    def should_throttle(self, amount_so_far: int, send_start_ns: int) -> bool:
        if self.target < 0:
            return False
        elapsed_s = (send_start_ns - self.start_ns) / _NS_PER_S
        return elapsed_s > 0 and amount_so_far / elapsed_s > self.target

    def throttle(self) -> None:
        self.sleep_deficit_ns += self.sleep_time_ns
        if self.sleep_deficit_ns >= self.MIN_SLEEP_NS:
            time.sleep(self.sleep_deficit_ns / _NS_PER_S)
            self.sleep_deficit_ns = 0.0


# ---------------------------------------------------------------------- consume

CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,"
                   " rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def _consume(args: argparse.Namespace) -> int:
    try:
        props = load_config_file(args.consumer_config)
    except UsageError as e:
        return _fail("consume", e)
    props.setdefault("group.id", args.group or f"perf-consumer-{random.randrange(100000)}")
    props.setdefault("auto.offset.reset", "latest" if args.from_latest else "earliest")
    props.setdefault("max.partition.fetch.bytes", str(args.fetch_size))
    props.setdefault("client.id", "perf-consumer-client")
    try:
        consumer = Consumer(bootstrap_servers=bootstrap_servers(args, props), **client_kwargs(Consumer, props),
                            channel_factory=client_security(args, props).channel_factory)
    except (UsageError, ValueError) as e:
        return _fail("consume", e)
    tune_runtime()
    if not args.hide_header:
        print(CONSUMER_HEADER, flush=True)
    messages = size = 0
    start = time.time()
    try:
        consumer.subscribe([args.topic])
        last_consumed = time.monotonic()
        while messages < args.messages and (time.monotonic() - last_consumed) * 1000 <= args.timeout:
            batches = consumer.poll(timeout_ms=100, max_records=args.messages - messages)
            if batches:
                last_consumed = time.monotonic()
            for records in batches.values():
                messages += len(records)
                size += serialized_size(records)
    except KafkaError as e:
        return _fail("consume", e)
    finally:
        consumer.close()
    end = time.time()
    if messages < args.messages:
        print(f"WARNING: Exiting before consuming the expected number of messages: timeout ({args.timeout} ms)"
              " exceeded. You can use the --timeout option to increase the timeout.")
    elapsed_s = max(end - start, 1e-9)
    mb = size / MB
    # No group membership here, so no rebalance: all of the time was spent fetching.
    print(f"{_date(start, args.date_format)}, {_date(end, args.date_format)}, {mb:.4f}, {mb / elapsed_s:.4f},"
          f" {messages}, {messages / elapsed_s:.4f}, 0, {round(elapsed_s * 1000)}, {mb / elapsed_s:.4f},"
          f" {messages / elapsed_s:.4f}")
    return 0


# By index: a little cheaper than the attribute, for every record consumed.
_KEY_SIZE = operator.itemgetter(ConsumerRecord._fields.index("serialized_key_size"))
_VALUE_SIZE = operator.itemgetter(ConsumerRecord._fields.index("serialized_value_size"))


def serialized_size(records: list[ConsumerRecord]) -> int:
    """The bytes of the records' keys and values, as Kafka's tool counts them (a null counts 0).

    Per record, so in C loops: a null's size is -1, which counting the -1s makes up for.
    """
    key_sizes = list(map(_KEY_SIZE, records))
    value_sizes = list(map(_VALUE_SIZE, records))
    return sum(key_sizes) + key_sizes.count(-1) + sum(value_sizes) + value_sizes.count(-1)


def _date(epoch_s: float, date_format: str) -> str:
    text = datetime.fromtimestamp(epoch_s).strftime(date_format)
    # %f is microseconds; Kafka's SSS is milliseconds.
    return text[:-3] if date_format.endswith("%f") else text


# ---------------------------------------------------------------------- end-to-end


def _end_to_end(args: argparse.Namespace) -> int:
    try:
        # EndToEndLatency's: no batching delay.
        producer, bootstrap, security = _producer(args, {"linger.ms": "0"})
    except (UsageError, ValueError) as e:
        return _fail("end-to-end", e)
    # Not auto-created by the metadata lookup: a missing topic is created below, with one partition, as Kafka's is.
    consumer = Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="latest",
                        fetch_max_wait_ms=0, allow_auto_create_topics=False,
                        channel_factory=security.channel_factory)
    try:
        return _round_trips(args, producer, consumer, bootstrap, security)
    except (KafkaError, EndToEndError) as e:
        return _fail("end-to-end", e)
    finally:
        producer.close()
        consumer.close()


class EndToEndError(Exception):
    pass


def _round_trips(args: argparse.Namespace, producer: Producer, consumer: Consumer, bootstrap: str,
                 security: GrpcSecurity) -> int:
    partitions = consumer.partitions_for_topic(args.topic)
    if not partitions:
        with Admin(bootstrap, channel_factory=security.channel_factory) as admin:
            admin.create_topics([NewTopic(args.topic, num_partitions=1)])
        partitions = {0}
    tps = [TopicPartition(args.topic, p) for p in sorted(partitions)]
    consumer.assign(tps)
    consumer.seek_to_end(*tps)
    for tp in tps:
        consumer.position(tp)
    latencies_ms: list[float] = []
    total_ns = 0
    for i in range(args.num_records):
        message = os.urandom(args.record_size)
        begin = time.monotonic_ns()
        producer.send(args.topic, message).get()
        batches = consumer.poll(timeout_ms=args.timeout_ms)
        elapsed = time.monotonic_ns() - begin
        records = [r for rs in batches.values() for r in rs]
        if not records:
            raise EndToEndError(f"poll() timed out before finding a result (timeout:[{args.timeout_ms}])")
        if records[0].value != message:
            raise EndToEndError("The message read did not match the message sent")
        if len(records) > 1:
            raise EndToEndError(f"Only one result was expected during this test. We found [{len(records)}]")
        if i % 1000 == 0:
            print(f"{i}\t{elapsed / _NS_PER_MS}", flush=True)
        total_ns += elapsed
        latencies_ms.append(elapsed / _NS_PER_MS)
    print(f"Avg latency: {total_ns / max(args.num_records, 1) / _NS_PER_MS:.4f} ms\n")
    p50, p99, p999 = percentiles(latencies_ms, 0.5, 0.99, 0.999)
    print(f"Percentiles: 50th = {p50}, 99th = {p99}, 99.9th = {p999}")
    return 0

"""The workload: writers and readers on one topic, every outcome recorded in the history.

Writers are idempotent acks=all producers, one per writer (each its own producer id), sending
"<writer>-<seq>" with seq rising from 0, round-robin over the partitions at a steady rate; every
send's invoke and complete time and outcome go to the history when it completes. An optional
acks=1 writer does the same without idempotence: its losses are reported, not failed.
Readers are consumers assigned every partition from the beginning, recording each poll. Writers and
readers use the client library the run names (chaos/clients/: minibroker's own, confluent-kafka or
kafka-python). At the end the readers read on up to the final end offsets, and final_read() reads every
partition again from the beginning with a fresh consumer of minibroker's own client, over gRPC: the
ground truth comes through the other front door than a Kafka client's writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import grpc

from chaos.clients import ClientLibrary, Delivery, ProducerSettings
from chaos.cluster import ChaosError
from chaos.history import INFO, FinalRead, HistoryWriter, Poll, Send
from client import Admin, Consumer, NewTopic
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition


@dataclass(frozen=True)
class WorkloadConfig:
    topic: str = "chaos"
    partitions: int = 6
    replication_factor: int = 3
    min_insync_replicas: int = 2
    writers: int = 3
    rate: float = 100.0  # records per second per writer
    acks1_writer: bool = True
    readers: int = 2
    max_pending: int = 2000  # per writer: stop sending while this many sends are unanswered
    request_timeout_ms: int = 5000
    delivery_timeout_ms: int = 30000
    group_members: int = 0  # members of a consumer group sharing the topic (chaos/group_workload.py)
    group: str = "chaos-group"
    session_timeout_ms: int = 6000
    txn_processors: int = 0  # consume-transform-produce processors, exactly once (chaos/txn_workload.py)
    txn_records: int = 100  # at most this many records a transaction
    # How minibroker's client reaches the gRPC listeners: TLS as the admin on a `cluster up --security` cluster.
    channel_factory: Callable[..., grpc.aio.Channel] = grpc.aio.insecure_channel


def create_topic(bootstrap: str, config: WorkloadConfig) -> None:
    """RF=3, min.insync.replicas=2, unclean election off: the configuration under which nothing acked may go."""
    with Admin(bootstrap_servers=bootstrap, channel_factory=config.channel_factory) as admin:
        try:
            admin.create_topics([NewTopic(config.topic, config.partitions, config.replication_factor,
                                          topic_configs={"min.insync.replicas": str(config.min_insync_replicas),
                                                         "unclean.leader.election.enable": "false"})],
                                timeout_ms=30_000)
        except KafkaError as e:
            # An earlier run's values would read as this run's duplicates: every run writes a topic of its own.
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            raise ChaosError(f"topic {config.topic!r} exists already (an earlier run's?): give another"
                             " --topic") from None


class Writer:
    def __init__(self, name: str, client: ClientLibrary, bootstrap: str, config: WorkloadConfig,
                 history: HistoryWriter, acks: str = "all") -> None:
        self.name = name
        self.acks = acks
        self._config = config
        self._history = history
        self._producer = client.producer(bootstrap, ProducerSettings(
            f"chaos-{name}", acks, idempotent=acks == "all", request_timeout_ms=config.request_timeout_ms,
            delivery_timeout_ms=config.delivery_timeout_ms, channel_factory=config.channel_factory))
        self._pending: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"writer-{name}", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        config = self._config
        period = 1.0 / config.rate
        next_at = time.monotonic()
        seq = 0
        try:
            while not self._stop.is_set():
                with self._room:
                    while len(self._pending) >= config.max_pending and not self._stop.is_set():
                        self._room.wait(0.1)
                if self._stop.is_set():
                    return
                value = f"{self.name}-{seq}"
                partition = seq % config.partitions
                with self._lock:
                    self._pending[value] = (time.time(), partition)
                self._producer.send(config.topic, partition, value.encode(), self._completer(value, partition))
                seq += 1
                next_at += period
                # Behind schedule (a blocked send): do not burst to catch up, keep the rate from now on.
                next_at = max(next_at, time.monotonic() - period)
                self._stop.wait(max(next_at - time.monotonic(), 0.0))
        except BaseException as e:
            self.error = e

    def _completer(self, value: str, partition: int) -> Callable[[Delivery], None]:
        def complete(delivery: Delivery) -> None:
            now = time.time()
            with self._room:
                invoke, _ = self._pending.pop(value, (now, partition))
                self._room.notify()
            self._history.write(Send(self.name, value, self.acks, partition, invoke, now, delivery.outcome,
                                     delivery.offset, delivery.error))

        return complete

    def stop(self, flush_timeout: float) -> None:
        """Stop sending, wait up to `flush_timeout` for answers, and record what has none as unknown."""
        self._stop.set()
        self._thread.join()
        self._producer.flush(flush_timeout)
        self._producer.close()
        now = time.time()
        with self._lock:
            left = dict(self._pending)
            self._pending.clear()
        for value, (invoke, partition) in left.items():
            self._history.write(Send(self.name, value, self.acks, partition, invoke, now, INFO,
                                     error="no answer before the run ended"))


class Reader:
    """A consumer reading every partition from the beginning, recording each poll."""

    def __init__(self, name: str, client: ClientLibrary, bootstrap: str, config: WorkloadConfig,
                 history: HistoryWriter) -> None:
        self.name = name
        self._config = config
        self._history = history
        grpc_only = {} if client.kafka_protocol else {"channel_factory": config.channel_factory}
        self._consumer = client.consumer(bootstrap, f"chaos-{name}", config.topic, config.partitions,
                                         config.request_timeout_ms, **grpc_only)
        self._next: dict[int, int] = {}  # partition -> the offset after the last record polled
        self._targets: Mapping[int, int] | None = None
        self._deadline = float("inf")
        self._finish = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"reader-{name}", daemon=True)
        self.errors: list[str] = []
        self.caught_up = False

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                if self._finish.is_set():
                    targets = self._targets or {}
                    if all(self._next.get(p, 0) >= end for p, end in targets.items()):
                        self.caught_up = True
                        return
                    if time.monotonic() >= self._deadline:
                        return
                polled, errors = self._consumer.poll(0.2)
                # Faults make polls fail now and then; what matters is what the consumer hands out.
                self.errors.extend(errors[:100 - len(self.errors)])
                for partition, offset, _ in polled:
                    self._next[partition] = max(self._next.get(partition, 0), offset + 1)
                if polled:
                    self._history.write(Poll(self.name, time.time(),
                                             tuple((p, o, v.decode()) for p, o, v in polled)))
                elif errors:
                    time.sleep(0.1)
        finally:
            self._consumer.close()

    def finish(self, targets: Mapping[int, int], timeout: float) -> None:
        """Read on until every partition's `targets` end offset, then stop (or after `timeout` seconds)."""
        self._targets = dict(targets)
        self._deadline = time.monotonic() + timeout
        self._finish.set()
        self._thread.join(timeout + 10)


def end_offsets(bootstrap: str, config: WorkloadConfig, timeout_ms: float = 30_000) -> dict[int, int]:
    with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                  channel_factory=config.channel_factory) as consumer:
        found = consumer.end_offsets([TopicPartition(config.topic, p) for p in range(config.partitions)], timeout_ms)
    return {tp.partition: offset for tp, offset in found.items()}


def final_read(bootstrap: str, config: WorkloadConfig, targets: Mapping[int, int], history: HistoryWriter,
               timeout: float) -> list[int]:
    """Read every partition from the beginning up to `targets`, one FinalRead each; returns the partitions that
    could not be read to the end before `timeout`."""
    deadline = time.monotonic() + timeout
    records: dict[int, list[tuple[int, str]]] = {p: [] for p in targets}
    with Consumer(bootstrap_servers=bootstrap, client_id="chaos-final-read", auto_offset_reset="earliest",
                  enable_auto_commit=False, request_timeout_ms=config.request_timeout_ms,
                  channel_factory=config.channel_factory) as consumer:
        tps = [TopicPartition(config.topic, p) for p in targets]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)

        def remaining() -> list[int]:
            return [p for p, end in targets.items() if (records[p][-1][0] + 1 if records[p] else 0) < end]

        while remaining() and time.monotonic() < deadline:
            try:
                polled = consumer.poll(timeout_ms=500)
            except KafkaError:
                time.sleep(0.1)
                continue
            for tp, batch in polled.items():
                records[tp.partition].extend((r.offset, r.value.decode()) for r in batch
                                             if r.offset < targets[tp.partition])
    now = time.time()
    for partition, read in sorted(records.items()):
        history.write(FinalRead(partition, now, tuple(read)))
    return remaining()

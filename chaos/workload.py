"""The workload: writers and readers on one topic, every outcome recorded in the history.

Writers are idempotent acks=all Producers, one per writer (each its own producer id), sending
"<writer>-<seq>" with seq rising from 0, round-robin over the partitions at a steady rate; every
send's invoke and complete time and outcome go to the history when it completes. An optional
acks=1 writer does the same without idempotence: its losses are reported, not failed.
Readers are Consumers assigned every partition from the beginning, recording each poll. At the end
the readers read on up to the final end offsets, and final_read() reads every partition again from
the beginning with a fresh consumer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from chaos.cluster import ChaosError
from chaos.history import FAIL, INFO, OK, FinalRead, HistoryWriter, Poll, Send
from client import Admin, Consumer, NewTopic, Producer
from client.errors import KafkaTimeoutError
from client.future import FutureRecordMetadata
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition

# An error after which the record may still have been written: the request may have reached the leader.
_UNKNOWN_OUTCOME = frozenset({ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION,
                              ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.UNKNOWN_SERVER_ERROR})


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


def create_topic(bootstrap: str, config: WorkloadConfig) -> None:
    """RF=3, min.insync.replicas=2, unclean election off: the configuration under which nothing acked may go."""
    with Admin(bootstrap_servers=bootstrap) as admin:
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


def outcome_of(error: BaseException) -> str:
    """"fail" only when the record cannot have been written; otherwise "info" (indeterminate)."""
    if isinstance(error, KafkaTimeoutError):
        return INFO
    if isinstance(error, KafkaError) and (error.retriable or error.code in _UNKNOWN_OUTCOME):
        return INFO
    return FAIL if isinstance(error, KafkaError) else INFO


class Writer:
    def __init__(self, name: str, bootstrap: str, config: WorkloadConfig, history: HistoryWriter,
                 acks: str = "all") -> None:
        self.name = name
        self.acks = acks
        self._config = config
        self._history = history
        idempotent = acks == "all"
        self._producer = Producer(bootstrap_servers=bootstrap, client_id=f"chaos-{name}", acks=acks,
                                  enable_idempotence=idempotent, request_timeout_ms=config.request_timeout_ms,
                                  delivery_timeout_ms=config.delivery_timeout_ms, linger_ms=5)
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
                self._producer.send(config.topic, value.encode(), partition=partition,
                                    callback=self._completer(value, partition))
                seq += 1
                next_at += period
                # Behind schedule (a blocked send): do not burst to catch up, keep the rate from now on.
                next_at = max(next_at, time.monotonic() - period)
                self._stop.wait(max(next_at - time.monotonic(), 0.0))
        except BaseException as e:
            self.error = e

    def _completer(self, value: str, partition: int) -> Callable[[FutureRecordMetadata], None]:
        def complete(future: FutureRecordMetadata) -> None:
            now = time.time()
            with self._room:
                invoke, _ = self._pending.pop(value, (now, partition))
                self._room.notify()
            error = future.exception(0)
            if error is None:
                offset = future.get(0).offset
                send = Send(self.name, value, self.acks, partition, invoke, now, OK, offset)
            else:
                send = Send(self.name, value, self.acks, partition, invoke, now, outcome_of(error), error=str(error))
            self._history.write(send)

        return complete

    def stop(self, flush_timeout: float) -> None:
        """Stop sending, wait up to `flush_timeout` for answers, and record what has none as unknown."""
        self._stop.set()
        self._thread.join()
        try:
            self._producer.flush(flush_timeout)
        except KafkaTimeoutError:
            pass
        self._producer.close(0)
        now = time.time()
        with self._lock:
            left = dict(self._pending)
            self._pending.clear()
        for value, (invoke, partition) in left.items():
            self._history.write(Send(self.name, value, self.acks, partition, invoke, now, INFO,
                                     error="no answer before the run ended"))


class Reader:
    """A consumer reading every partition from the beginning, recording each poll."""

    def __init__(self, name: str, bootstrap: str, config: WorkloadConfig, history: HistoryWriter) -> None:
        self.name = name
        self._config = config
        self._history = history
        self._consumer = Consumer(bootstrap_servers=bootstrap, client_id=f"chaos-{name}",
                                  auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=200,
                                  request_timeout_ms=config.request_timeout_ms)
        self._consumer.assign([TopicPartition(config.topic, p) for p in range(config.partitions)])
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
                try:
                    polled = self._consumer.poll(timeout_ms=200)
                except KafkaError as e:
                    # Faults make polls fail now and then; what matters is what the consumer hands out.
                    if len(self.errors) < 100:
                        self.errors.append(str(e))
                    time.sleep(0.1)
                    continue
                records = []
                for tp, batch in polled.items():
                    for r in batch:
                        records.append((tp.partition, r.offset, r.value.decode()))
                    if batch:
                        self._next[tp.partition] = batch[-1].offset + 1
                if records:
                    self._history.write(Poll(self.name, time.time(), tuple(records)))
        finally:
            self._consumer.close(autocommit=False)

    def finish(self, targets: Mapping[int, int], timeout: float) -> None:
        """Read on until every partition's `targets` end offset, then stop (or after `timeout` seconds)."""
        self._targets = dict(targets)
        self._deadline = time.monotonic() + timeout
        self._finish.set()
        self._thread.join(timeout + 10)


def end_offsets(bootstrap: str, config: WorkloadConfig, timeout_ms: float = 30_000) -> dict[int, int]:
    with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as consumer:
        found = consumer.end_offsets([TopicPartition(config.topic, p) for p in range(config.partitions)], timeout_ms)
    return {tp.partition: offset for tp, offset in found.items()}


def final_read(bootstrap: str, config: WorkloadConfig, targets: Mapping[int, int], history: HistoryWriter,
               timeout: float) -> list[int]:
    """Read every partition from the beginning up to `targets`, one FinalRead each; returns the partitions that
    could not be read to the end before `timeout`."""
    deadline = time.monotonic() + timeout
    records: dict[int, list[tuple[int, str]]] = {p: [] for p in targets}
    with Consumer(bootstrap_servers=bootstrap, client_id="chaos-final-read", auto_offset_reset="earliest",
                  enable_auto_commit=False, request_timeout_ms=config.request_timeout_ms) as consumer:
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

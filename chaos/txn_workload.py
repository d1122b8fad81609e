"""The transactional workload: consume-transform-produce, exactly once (KIP-98, KIP-447), on confluent-kafka.

Processors form one consumer group (`<group>-txn`) on the workload's topic, read it with read_committed and copy
each record they get to the output topic `<topic>-out` (the same partition) inside a transaction that also
commits the group's offsets (send_offsets_to_transaction): up to `txn_records` records a transaction. An output
value says where it came from and which transaction wrote it:

    "<input value>@<input partition>:<input offset>#<processor>:<transaction number>"

and every transaction's outcome goes to the history (`txn` events): ok (commit_transaction returned), fail (it
was aborted: abort_transaction returned, or the producer was fenced or failed before it committed, so the
coordinator aborts it), info (commit_transaction failed in a way that leaves its fate open). After an abort the
processor rewinds its consumer to the group's committed offsets; after a fatal error (fenced, a coordinator that
lost the transaction) it starts again with a new producer on the same transactional id, which fences the old one.

librdkafka's send_offsets_to_transaction can block for good, past its timeout, when the group coordinator it has
cached is a broker that left the cluster's metadata while it was down, as a SIGKILLed broker does
(confluentinc/librdkafka#5456 and #5511, open in 2.16). So the processor makes its two calls that wait on a
coordinator on a watchdog thread: one that has not returned well after its timeout counts as failed (ClientHung),
and the processor goes on with a new producer, whose init fences the stuck one and has its transaction aborted.

At the end the processors run on until the group has committed the run's end offsets; then the output topic is
read from the beginning with read_committed and with read_uncommitted (`txn-output` events) and the group's
committed offsets are read back. chaos/txn_checker.py judges it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from chaos.clients.confluent import _LOG, committed, consume
from chaos.history import FAIL, INFO, OK, FinalCommitted, HistoryWriter, Txn, TxnOutput
from chaos.workload import WorkloadConfig, create_topic

READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"
_TIMEOUT_S = 30.0
# How much longer than its own timeout a librdkafka call may take before the processor gives its producer up.
_HUNG_AFTER_S = _TIMEOUT_S + 15
_TRANSACTION_TIMEOUT_MS = 60_000


class ClientHung(Exception):
    """A librdkafka call that did not return within _HUNG_AFTER_S, though its timeout was _TIMEOUT_S."""


def call_watched(call: Callable[..., None], *args: object, limit: float = _HUNG_AFTER_S) -> None:
    """`call(*args)` on a daemon thread (one that never returns must not hold up the process' exit), waited for
    `limit` seconds: returns or raises what it did, or raises ClientHung."""
    raised: list[BaseException] = []

    def target() -> None:
        try:
            call(*args)
        except BaseException as e:
            raised.append(e)

    thread = threading.Thread(target=target, name=f"watched-{getattr(call, '__name__', 'call')}", daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        raise ClientHung(f"{getattr(call, '__name__', call)} did not return within {limit:g} s"
                         f" (its timeout {_TIMEOUT_S:g} s; confluentinc/librdkafka#5511)")
    if raised:
        raise raised[0]


def output_topic(topic: str) -> str:
    return f"{topic}-out"


def txn_group(group: str) -> str:
    return f"{group}-txn"


def transactional_id(process: str) -> str:
    return f"chaos-{process}"


def output_value(value: bytes, partition: int, offset: int, process: str, txn: int) -> bytes:
    return b"%s@%d:%d#%s:%d" % (value, partition, offset, process.encode(), txn)


class TxnProgress:
    """The group's committed offsets as the processors' acknowledged commits left them: the run is over once
    they reach the end offsets."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._committed: dict[int, int] = {}

    def committed(self, offsets: Mapping[int, int]) -> None:
        with self._lock:
            for partition, offset in offsets.items():
                self._committed[partition] = max(self._committed.get(partition, 0), offset)

    def done(self, targets: Mapping[int, int]) -> bool:
        with self._lock:
            return all(self._committed.get(p, 0) >= end for p, end in targets.items())


class TxnProcessor:
    """One processor's thread: poll, transform into a transaction with the group's offsets, commit or abort."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str, txn_records: int, session_timeout_ms: int,
                 progress: TxnProgress, history: HistoryWriter) -> None:
        self.name = name
        self._bootstrap = bootstrap
        self._topic = topic
        self._group = group
        self._txn_records = txn_records
        self._session_timeout_ms = session_timeout_ms
        self._progress = progress
        self._history = history
        self._txn = 0
        self._targets: Mapping[int, int] | None = None
        self._deadline = float("inf")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"txn-{name}", daemon=True)
        self.error: BaseException | None = None
        self.hung: list[str] = []  # what each ClientHung said
        self._consumer = self._new_consumer()
        self._producer: Producer | None = None

    def _new_consumer(self) -> Consumer:
        return Consumer({"bootstrap.servers": self._bootstrap, "logger": _LOG, "client.id": f"chaos-{self.name}",
                         "group.id": self._group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": READ_COMMITTED, "fetch.wait.max.ms": 200,
                         "session.timeout.ms": self._session_timeout_ms,
                         "heartbeat.interval.ms": max(self._session_timeout_ms // 5, 100)})

    def _new_producer(self) -> Producer:
        producer = Producer({"bootstrap.servers": self._bootstrap, "logger": _LOG, "client.id": f"chaos-{self.name}",
                             "transactional.id": transactional_id(self.name), "linger.ms": 5,
                             "transaction.timeout.ms": _TRANSACTION_TIMEOUT_MS})
        producer.init_transactions(_TIMEOUT_S)
        return producer

    def start(self) -> None:
        self._consumer.subscribe([self._topic])
        self._thread.start()

    def _finished(self) -> bool:
        if self._stop.is_set():
            return True
        if self._targets is None:
            return False
        return self._progress.done(self._targets) or time.monotonic() >= self._deadline

    def _run(self) -> None:
        try:
            while not self._finished():
                if self._producer is None:
                    try:
                        self._producer = self._new_producer()
                    except KafkaException:
                        time.sleep(0.5)  # no coordinator yet (failing over): ask again
                        continue
                # No more than a transaction takes: the consumer's position moves past everything it hands out.
                records, _ = consume(self._consumer, 0.2, self._txn_records)
                if records:
                    self._transaction(self._producer, records)
        except BaseException as e:
            self.error = e

    def _transaction(self, producer: Producer, records: list[tuple[int, int, bytes]]) -> None:
        """One transaction over `records`: its outcome goes to the history."""
        self._txn += 1
        inputs = tuple((p, o) for p, o, _ in records)
        invoke = time.time()
        positions: dict[int, int] = {}
        committing = False
        try:
            producer.begin_transaction()
            for partition, offset, value in records:
                self._produce(producer, partition, output_value(value, partition, offset, self.name, self._txn))
                positions[partition] = offset + 1
            call_watched(producer.send_offsets_to_transaction,
                         [TopicPartition(self._topic, p, o) for p, o in sorted(positions.items())],
                         self._consumer.consumer_group_metadata(), _TIMEOUT_S)
            committing = True
            self._commit(producer)
        except KafkaException as e:
            error: KafkaError = e.args[0]
            outcome = self._recover(producer, error, committing)
            self._history.write(Txn(self.name, self._txn, invoke, time.time(), outcome, inputs, str(error)))
            return
        except ClientHung as e:
            # The stuck producer is left to its thread; the next one's init fences it. Its transaction is aborted
            # by that, unless the stuck call was commit_transaction, whose EndTxn may have reached the coordinator.
            self.hung.append(str(e))
            self._producer = None
            self._rewind()
            self._history.write(Txn(self.name, self._txn, invoke, time.time(), INFO if committing else FAIL,
                                    inputs, str(e)))
            return
        self._progress.committed(positions)
        self._history.write(Txn(self.name, self._txn, invoke, time.time(), OK, inputs))

    def _produce(self, producer: Producer, partition: int, value: bytes) -> None:
        while True:
            try:
                producer.produce(output_topic(self._topic), value, partition=partition)
                return
            except BufferError:
                producer.poll(0.05)

    @staticmethod
    def _commit(producer: Producer) -> None:
        """commit_transaction, retried while librdkafka says a retry may still commit it, for as long as the
        transaction may live (transaction.timeout.ms): after that the coordinator aborts it itself."""
        deadline = time.monotonic() + _TRANSACTION_TIMEOUT_MS / 1000
        while True:
            try:
                call_watched(producer.commit_transaction, _TIMEOUT_S)
                return
            except KafkaException as e:
                if not e.args[0].retriable() or time.monotonic() >= deadline:
                    raise

    def _recover(self, producer: Producer, error: KafkaError, committing: bool) -> str:
        """After a failed transaction. An abortable error (librdkafka's txn_requires_abort: nothing was committed)
        is aborted (FAIL; if the abort fails too, the next producer's init aborts it). Any other drops the producer,
        whose successor fences it on init: the coordinator then aborts an open transaction of the old epoch (FAIL),
        but completes one whose EndTxn(commit) it may have received, so a failure inside commit_transaction leaves
        the outcome open (INFO). Then read again where the group committed."""
        if error.txn_requires_abort():
            try:
                producer.abort_transaction(_TIMEOUT_S)
            except KafkaException:
                self._producer = None
            outcome = FAIL
        else:
            outcome = INFO if committing else FAIL
            self._producer = None
        self._rewind()
        return outcome

    def _rewind(self) -> None:
        """Seek every held partition back to the group's committed offset (or its start)."""
        try:
            held = self._consumer.assignment()
            for tp in self._consumer.committed(held, timeout=_TIMEOUT_S):
                self._consumer.seek(TopicPartition(tp.topic, tp.partition,
                                                   tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
        except KafkaException:
            # The partitions moved meanwhile: whoever holds them next starts at the group's committed offsets.
            pass

    def finish(self, targets: Mapping[int, int], deadline: float) -> None:
        """Run on until the group has committed `targets` or time.monotonic() reaches `deadline`."""
        self._targets = dict(targets)
        self._deadline = deadline

    def join(self) -> None:
        """Wait for the thread: once it is past its deadline, no call it makes waits longer than _HUNG_AFTER_S."""
        self._thread.join(max(self._deadline - time.monotonic(), 0) + _HUNG_AFTER_S)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(_TIMEOUT_S + 10)
        self._consumer.close()
        if self._producer is not None:
            self._producer.flush(5)


class TxnStage:
    """The processors of one run, start to finish (chaos/runner.py imports this module only for a run that has
    them: confluent-kafka is an extra)."""

    def __init__(self, bootstrap: str, kafka_bootstrap: str, workload: WorkloadConfig,
                 history: HistoryWriter) -> None:
        self._bootstrap = kafka_bootstrap
        self._workload = workload
        self._history = history
        self.group = txn_group(workload.group)
        create_topic(bootstrap, replace(workload, topic=output_topic(workload.topic)))
        self._progress = TxnProgress()
        self._processors = [TxnProcessor(f"t{i}", kafka_bootstrap, workload.topic, self.group, workload.txn_records,
                                         workload.session_timeout_ms, self._progress, history)
                            for i in range(workload.txn_processors)]

    @property
    def transactional_ids(self) -> list[str]:
        return [transactional_id(p.name) for p in self._processors]

    def start(self) -> None:
        for processor in self._processors:
            processor.start()

    def finish(self, targets: Mapping[int, int], timeout: float = 120) -> tuple[list[str], list[BaseException]]:
        """The processors run on until their group has committed `targets`; then the output is read both ways and
        the group's committed offsets read back. Returns notes on what did not happen, and the processors'
        errors."""
        deadline = time.monotonic() + timeout
        for processor in self._processors:
            processor.finish(targets, deadline)
        for processor in self._processors:
            processor.join()
        errors: list[BaseException] = [p.error for p in self._processors if p.error is not None]
        notes = [] if not errors and self._progress.done(targets) else [
            f"the transactional processors did not commit up to the end offsets within {timeout:g} s"]
        notes += [f"{p.name} gave up a producer: {hung}" for p in self._processors for hung in p.hung]
        self.close()
        workload = self._workload
        for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
            read_output(self._bootstrap, workload.topic, workload.partitions, isolation, self._history, timeout=60)
        read_txn_committed(self._bootstrap, workload.topic, workload.group, workload.partitions, self._history)
        return notes, errors

    def close(self) -> None:
        for processor in self._processors:
            processor.close()
        self._processors.clear()


def read_output(bootstrap: str, topic: str, partitions: int, isolation: str, history: HistoryWriter,
                timeout: float) -> None:
    """The output topic from its start to its end (its last stable offset, read_committed), one TxnOutput per
    partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "logger": _LOG, "group.id": f"chaos-final-{isolation}",
                         "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True})
    records: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(output_topic(topic), p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                partition, error = message.partition(), message.error()
                if partition is None:
                    continue
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(partition)
                    continue
                at_end.discard(partition)
                offset = message.offset()
                if offset is not None:
                    records[partition].append((offset, (message.value() or b"").decode()))
    finally:
        consumer.close()
    now = time.time()
    for partition, read in sorted(records.items()):
        history.write(TxnOutput(isolation, partition, now, tuple(read)))


def read_txn_committed(bootstrap: str, topic: str, group: str, partitions: int, history: HistoryWriter) -> None:
    offsets = committed(bootstrap, txn_group(group), topic, partitions, _TIMEOUT_S)
    history.write(FinalCommitted(txn_group(group), time.time(), tuple(sorted(offsets.items()))))

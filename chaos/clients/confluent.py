"""The chaos workload on confluent-kafka (librdkafka), over the brokers' Kafka listeners.

librdkafka answers sends only inside poll()/flush(): a thread of the adapter polls for them. Its own
retries, idempotence and leader following are the library's; the adapter only reads the outcome.
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from chaos.client_logs import LIBRDKAFKA_LOGGER
from chaos.clients import (
    ClientLibrary,
    Delivery,
    Done,
    GroupPolled,
    GroupSettings,
    ProducerSettings,
    Record,
    broker_error_outcome,
)
from chaos.history import ASSIGNED, FAIL, OK, REVOKED, Assignment, Commit

# librdkafka logs here, not on stderr (chaos/client_logs.py routes it into the run's clients.log).
_LOG = logging.getLogger(LIBRDKAFKA_LOGGER)


def outcome_of(error: KafkaError) -> str:
    """librdkafka's codes are Kafka's where positive (the broker's answer); negative ones are the client's own
    (a message timed out, a transport failure, a purge): whether the record reached the leader is unknown."""
    code = error.code()
    return broker_error_outcome(code if code > 0 else None)


class ConfluentProducer:
    def __init__(self, bootstrap: str, settings: ProducerSettings) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "logger": _LOG, "client.id": settings.client_id,
                                   "acks": settings.acks, "enable.idempotence": settings.idempotent,
                                   "request.timeout.ms": settings.request_timeout_ms,
                                   "delivery.timeout.ms": settings.delivery_timeout_ms,
                                   "linger.ms": settings.linger_ms})
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._poll, name=f"poll-{settings.client_id}", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.1)

    def send(self, topic: str, partition: int, value: bytes, done: Done) -> None:
        def report(error: KafkaError | None, message: Message) -> None:
            if self._closed.is_set():
                return  # the workload has recorded it as unanswered already
            # No offset (negative) for an implicit ack: a later batch's ack proved this message persisted.
            offset = message.offset()
            done(Delivery(OK, offset if offset is not None and offset >= 0 else -1) if error is None
                 else Delivery(outcome_of(error), error=str(error)))

        while True:
            try:
                self._producer.produce(topic, value, partition=partition, on_delivery=report)
                return
            except BufferError:  # the local queue is full: wait for room, as a blocking send would
                time.sleep(0.05)
            except KafkaException as e:  # refused before it was queued (a fatal idempotence error): never sent
                done(Delivery(FAIL, error=str(e)))
                return

    def flush(self, timeout: float) -> None:
        self._producer.flush(timeout)

    def close(self) -> None:
        self._closed.set()
        self._poller.join()


def consume(consumer: Consumer, timeout: float, max_records: int = 1000) -> tuple[list[Record], list[str]]:
    """What one consume() call hands out (at most `max_records`): its records, and its error events as text."""
    records: list[Record] = []
    errors: list[str] = []
    for message in consumer.consume(max_records, timeout):
        error = message.error()
        if error is not None:
            errors.append(str(error))
            continue
        partition, offset = message.partition(), message.offset()
        if partition is not None and offset is not None:
            records.append((partition, offset, message.value() or b""))
    return records, errors


class ConfluentConsumer:
    def __init__(self, bootstrap: str, client_id: str, topic: str, partitions: int, request_timeout_ms: int) -> None:
        # group.id is required by the library; with assign() and no commits no group API is used.
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "logger": _LOG, "client.id": client_id,
                                   "group.id": client_id, "enable.auto.commit": False, "fetch.wait.max.ms": 200,
                                   "socket.timeout.ms": request_timeout_ms})
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])

    def poll(self, timeout: float) -> tuple[list[Record], list[str]]:
        return consume(self._consumer, timeout)

    def close(self) -> None:
        self._consumer.close()


class ConfluentGroupMember:
    """A librdkafka group consumer (subscribe, eager rebalances by default), committing by hand: the offsets
    it commits are those of the records it handed out, so everything below a commit was seen."""

    def __init__(self, bootstrap: str, settings: GroupSettings) -> None:
        self._settings = settings
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "logger": _LOG, "client.id": settings.client_id,
                                   "group.id": settings.group, "enable.auto.commit": False,
                                   "auto.offset.reset": "earliest", "fetch.wait.max.ms": 200,
                                   "session.timeout.ms": settings.session_timeout_ms,
                                   "heartbeat.interval.ms": max(settings.session_timeout_ms // 5, 100),
                                   "socket.timeout.ms": settings.request_timeout_ms})
        self._positions: dict[int, int] = {}  # partition -> the offset after the last record handed out
        self._committed: dict[int, int] = {}
        self._events: list[Assignment | Commit] = []
        self._closing = False
        self._consumer.subscribe([settings.topic], on_assign=self._assigned, on_revoke=self._revoked,
                                 on_lost=self._lost)

    def _change(self, event: str, partitions: list[TopicPartition]) -> tuple[int, ...]:
        numbers = tuple(sorted(tp.partition for tp in partitions))
        for p in numbers:  # a partition held again starts where the group committed, not where we were
            self._positions.pop(p, None)
            self._committed.pop(p, None)
        if not self._closing:
            self._events.append(Assignment(self._settings.client_id, self._settings.group, time.time(), event,
                                           numbers))
        return numbers

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._change(ASSIGNED, partitions)

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if not self._closing:
            held = {tp.partition for tp in partitions}
            done = self._commit({p: o for p, o in self._positions.items() if p in held})
            if done is not None:
                self._events.append(done)
        self._change(REVOKED, partitions)

    def _lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Taken away without a rebalance (the session expired): another member may hold them already.
        self._change(REVOKED, partitions)

    def poll(self, timeout: float) -> GroupPolled:
        records, errors = consume(self._consumer, timeout)
        for partition, offset, _ in records:
            self._positions[partition] = offset + 1
        events, self._events = self._events, []
        return GroupPolled(records, errors, events)

    def commit(self) -> Commit | None:
        return self._commit(self._positions)

    def _commit(self, positions: dict[int, int]) -> Commit | None:
        offsets = {p: o for p, o in positions.items() if self._committed.get(p) != o}
        if not offsets:
            return None
        invoke = time.time()
        try:
            answered = self._consumer.commit(offsets=[TopicPartition(self._settings.topic, p, o)
                                                      for p, o in sorted(offsets.items())], asynchronous=False)
        except KafkaException as e:
            error = e.args[0]
            return Commit(self._settings.client_id, self._settings.group, invoke, time.time(), outcome_of(error),
                          tuple(sorted(offsets.items())), str(error))
        complete = time.time()
        failed = [tp.error for tp in answered or [] if tp.error is not None]
        if failed:  # per partition errors: none of it counts as acknowledged
            return Commit(self._settings.client_id, self._settings.group, invoke, complete, outcome_of(failed[0]),
                          tuple(sorted(offsets.items())), str(failed[0]))
        self._committed.update(offsets)
        return Commit(self._settings.client_id, self._settings.group, invoke, complete, OK,
                      tuple(sorted(offsets.items())))

    def close(self) -> None:
        self._closing = True
        self._consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int, timeout: float) -> dict[int, int]:
    """The group's committed offsets, through librdkafka's OffsetFetch (no join: committed() needs none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "logger": _LOG, "group.id": group,
                         "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=timeout)
    finally:
        consumer.close()
    return {tp.partition: tp.offset if tp.offset >= 0 else -1 for tp in found}


LIBRARY = ClientLibrary("confluent-kafka", kafka_protocol=True, producer=ConfluentProducer, consumer=ConfluentConsumer,
                        group_member=ConfluentGroupMember, committed=committed)

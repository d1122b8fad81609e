"""The chaos workload on confluent-kafka (librdkafka), over the brokers' Kafka listeners.

librdkafka answers sends only inside poll()/flush(): a thread of the adapter polls for them. Its own
retries, idempotence and leader following are the library's; the adapter only reads the outcome.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from chaos.clients import (
    ClientLibrary,
    Delivery,
    Done,
    ProducerSettings,
    Record,
    broker_error_outcome,
)
from chaos.history import FAIL, OK


def outcome_of(error: KafkaError) -> str:
    """librdkafka's codes are Kafka's where positive (the broker's answer); negative ones are the client's own
    (a message timed out, a transport failure, a purge): whether the record reached the leader is unknown."""
    code = error.code()
    return broker_error_outcome(code if code > 0 else None)


class ConfluentProducer:
    def __init__(self, bootstrap: str, settings: ProducerSettings) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "client.id": settings.client_id,
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


class ConfluentConsumer:
    def __init__(self, bootstrap: str, client_id: str, topic: str, partitions: int, request_timeout_ms: int) -> None:
        # group.id is required by the library; with assign() and no commits no group API is used.
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
                                   "enable.auto.commit": False, "fetch.wait.max.ms": 200,
                                   "socket.timeout.ms": request_timeout_ms})
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])

    def poll(self, timeout: float) -> tuple[list[Record], list[str]]:
        records: list[Record] = []
        errors: list[str] = []
        for message in self._consumer.consume(1000, timeout):
            error = message.error()
            if error is not None:
                errors.append(str(error))
                continue
            partition, offset = message.partition(), message.offset()
            if partition is not None and offset is not None:
                records.append((partition, offset, message.value() or b""))
        return records, errors

    def close(self) -> None:
        self._consumer.close()


LIBRARY = ClientLibrary("confluent-kafka", kafka_protocol=True, producer=ConfluentProducer, consumer=ConfluentConsumer)

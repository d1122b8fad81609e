"""The chaos workload on kafka-python, over the brokers' Kafka listeners."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError
from kafka.producer.future import RecordMetadata

from chaos.clients import (
    ClientLibrary,
    Delivery,
    Done,
    ProducerSettings,
    Record,
    broker_error_outcome,
)
from chaos.history import FAIL, OK


def outcome_of(error: BaseException) -> str:
    """A broker's code (errno) as the other libraries' are read; an error of the client's own (no errno: a
    timeout, a closed producer, a lost connection) leaves the record's fate unknown."""
    return broker_error_outcome(getattr(error, "errno", None))


class KafkaPythonProducer:
    def __init__(self, bootstrap: str, settings: ProducerSettings) -> None:
        self._producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), client_id=settings.client_id,
                                       acks="all" if settings.acks == "all" else int(settings.acks),
                                       enable_idempotence=settings.idempotent,
                                       request_timeout_ms=settings.request_timeout_ms,
                                       delivery_timeout_ms=settings.delivery_timeout_ms,
                                       linger_ms=settings.linger_ms)

    def send(self, topic: str, partition: int, value: bytes, done: Done) -> None:
        try:
            future = self._producer.send(topic, value, partition=partition)
        except KafkaError as e:  # refused before it was queued (no metadata in max.block.ms): never sent
            done(Delivery(FAIL, error=str(e)))
            return

        def acked(metadata: RecordMetadata) -> None:
            done(Delivery(OK, metadata.offset))

        def failed(error: BaseException) -> None:
            done(Delivery(outcome_of(error), error=str(error)))

        future.add_callback(acked)
        future.add_errback(failed)

    def flush(self, timeout: float) -> None:
        try:
            self._producer.flush(timeout=timeout)
        except KafkaTimeoutError:
            pass

    def close(self) -> None:
        self._producer.close(timeout=0)


class KafkaPythonConsumer:
    def __init__(self, bootstrap: str, client_id: str, topic: str, partitions: int, request_timeout_ms: int) -> None:
        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), client_id=client_id,
                                       enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=200,
                                       request_timeout_ms=request_timeout_ms)
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        self._consumer.assign(tps)
        self._consumer.seek_to_beginning(*tps)

    def poll(self, timeout: float) -> tuple[list[Record], list[str]]:
        try:
            polled = self._consumer.poll(timeout_ms=int(timeout * 1000))
        except KafkaError as e:
            return [], [str(e)]
        return [(tp.partition, r.offset, r.value or b"") for tp, batch in polled.items() for r in batch], []

    def close(self) -> None:
        self._consumer.close(autocommit=False)


LIBRARY = ClientLibrary("kafka-python", kafka_protocol=True, producer=KafkaPythonProducer, consumer=KafkaPythonConsumer)

"""The chaos workload on minibroker's own client (client/), over the brokers' gRPC listeners."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from chaos.clients import (
    ClientLibrary,
    Delivery,
    Done,
    ProducerSettings,
    Record,
    broker_error_outcome,
)
from chaos.history import INFO, OK
from client import Consumer, Producer
from client.errors import KafkaTimeoutError
from client.future import FutureRecordMetadata
from proto.errors import KafkaError
from proto.types import TopicPartition


def outcome_of(error: BaseException) -> str:
    """"fail" only when the record cannot have been written; otherwise "info" (indeterminate)."""
    return broker_error_outcome(error.code) if isinstance(error, KafkaError) else INFO


class MinibrokerProducer:
    def __init__(self, bootstrap: str, settings: ProducerSettings) -> None:
        self._producer = Producer(bootstrap_servers=bootstrap, client_id=settings.client_id, acks=settings.acks,
                                  enable_idempotence=settings.idempotent,
                                  request_timeout_ms=settings.request_timeout_ms,
                                  delivery_timeout_ms=settings.delivery_timeout_ms, linger_ms=settings.linger_ms,
                                  channel_factory=settings.channel_factory)

    def send(self, topic: str, partition: int, value: bytes, done: Done) -> None:
        def complete(future: FutureRecordMetadata) -> None:
            error = future.exception(0)
            done(Delivery(OK, future.get(0).offset) if error is None
                 else Delivery(outcome_of(error), error=str(error)))

        self._producer.send(topic, value, partition=partition, callback=complete)

    def flush(self, timeout: float) -> None:
        try:
            self._producer.flush(timeout)
        except KafkaTimeoutError:
            pass

    def close(self) -> None:
        self._producer.close(0)


class MinibrokerConsumer:
    def __init__(self, bootstrap: str, client_id: str, topic: str, partitions: int, request_timeout_ms: int,
                 channel_factory: Callable[..., grpc.aio.Channel] = grpc.aio.insecure_channel) -> None:
        self._consumer = Consumer(bootstrap_servers=bootstrap, client_id=client_id, auto_offset_reset="earliest",
                                  enable_auto_commit=False, fetch_max_wait_ms=200,
                                  request_timeout_ms=request_timeout_ms, channel_factory=channel_factory)
        self._consumer.assign([TopicPartition(topic, p) for p in range(partitions)])

    def poll(self, timeout: float) -> tuple[list[Record], list[str]]:
        try:
            polled = self._consumer.poll(timeout_ms=timeout * 1000)
        except KafkaError as e:
            return [], [str(e)]
        return [(tp.partition, r.offset, r.value or b"") for tp, batch in polled.items() for r in batch], []

    def close(self) -> None:
        self._consumer.close(autocommit=False)


LIBRARY = ClientLibrary("minibroker", kafka_protocol=False, producer=MinibrokerProducer, consumer=MinibrokerConsumer)

"""Futures for sent records.

One ProduceRequestResult per batch carries the outcome (base offset or
error) and the only Event; each record's FutureRecordMetadata is a small object
pointing at it with the record's position in the batch, as in Kafka. So send()
creates no lock, event or condition per record.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from client.errors import KafkaTimeoutError
from client.structs import RecordMetadata
from proto.errors import KafkaError
from proto.types import TopicPartition

log = logging.getLogger(__name__)


class ProduceRequestResult:
    """The outcome of one batch, shared by the futures of all its records."""

    __slots__ = ("_callbacks", "_done", "_lock", "_record_callbacks", "_record_futures", "base_offset", "error",
                 "log_append_time", "log_start_offset", "topic_partition")

    def __init__(self, topic_partition: TopicPartition) -> None:
        self.topic_partition = topic_partition
        self.base_offset = -1
        self.log_append_time = -1
        self.log_start_offset = -1
        self.error: KafkaError | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] | None = []
        # send()'s callbacks and the futures they are called with, in two lists: no object per record.
        self._record_callbacks: list[Callable[[FutureRecordMetadata], Any]] = []
        self._record_futures: list[FutureRecordMetadata] = []

    def complete(self, base_offset: int = -1, log_append_time: int = -1, log_start_offset: int = -1,
                 error: KafkaError | None = None) -> None:
        """Settle the batch once (later calls are ignored) and run the callbacks waiting on it."""
        with self._lock:
            callbacks = self._callbacks
            if callbacks is None:
                return
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.log_start_offset = log_start_offset
            self.error = error
            self._callbacks = None
            self._done.set()
        if self._record_callbacks:
            # Inline rather than through _run: this is a callback per record.
            for record_callback, future in zip(self._record_callbacks, self._record_futures, strict=True):
                try:
                    record_callback(future)
                except Exception:
                    log.exception("producer callback raised")
            self._record_callbacks = []
            self._record_futures = []
        for callback in callbacks:
            _run(callback)

    def is_done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout_s: float | None = None) -> bool:
        return self._done.wait(timeout_s)

    def add_record_callback(self, callback: Callable[[FutureRecordMetadata], Any],
                            future: FutureRecordMetadata) -> None:
        """`callback(future)` on completion, before the add_callback ones; without the lock, so only for a
        result that cannot settle meanwhile: its batch is still open and the caller holds the accumulator's
        lock (send()'s `callback`)."""
        assert self._callbacks is not None, "the batch of an unsettled result cannot have completed"
        self._record_callbacks.append(callback)
        self._record_futures.append(future)

    def add_callback(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if self._callbacks is not None:
                self._callbacks.append(callback)
                return
        _run(callback)


def _run(callback: Callable[[], None]) -> None:
    # A user callback runs on the producer's I/O thread: its failure must not stop that thread.
    try:
        callback()
    except Exception:
        log.exception("producer callback raised")


class FutureRecordMetadata:
    """The future send() returns: `.get(timeout)` gives RecordMetadata or raises the KafkaError.

    Mirrors kafka-python's FutureRecordMetadata (get, succeeded, failed,
    add_callback, add_errback) and concurrent.futures.Future (result,
    exception, done, add_done_callback).
    """

    __slots__ = ("_relative_offset", "_result", "_timestamp", "header_size", "key_size", "value_size")

    def __init__(self, result: ProduceRequestResult, relative_offset: int, timestamp: int, key_size: int,
                 value_size: int, header_size: int) -> None:
        self._result = result
        self._relative_offset = relative_offset
        self._timestamp = timestamp
        self.key_size = key_size
        self.value_size = value_size
        self.header_size = header_size

    @classmethod
    def failed_with(cls, topic_partition: TopicPartition, error: KafkaError, key_size: int = -1,
                    value_size: int = -1, header_size: int = -1) -> FutureRecordMetadata:
        """A future that has already failed: how send() reports errors found before batching. It keeps the
        record's sizes, which an error callback names (Kafka's ErrorLoggingCallback)."""
        result = ProduceRequestResult(topic_partition)
        result.complete(error=error)
        return cls(result, 0, -1, key_size, value_size, header_size)

    def done(self) -> bool:
        return self._result.is_done()

    def succeeded(self) -> bool:
        return self._result.is_done() and self._result.error is None

    def failed(self) -> bool:
        # The error is set once, when the result completes: no need to look at the event.
        return self._result.error is not None

    def _value(self) -> RecordMetadata:
        r = self._result
        tp = r.topic_partition
        offset = r.base_offset + self._relative_offset if r.base_offset >= 0 else -1
        timestamp = r.log_append_time if r.log_append_time >= 0 else self._timestamp
        return RecordMetadata(tp.topic, tp.partition, offset, timestamp, r.log_start_offset, self.key_size,
                              self.value_size, self.header_size)

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Wait up to `timeout` seconds (None: for ever); raise KafkaTimeoutError if still pending."""
        if not self._result.wait(timeout):
            raise KafkaTimeoutError(f"record not acknowledged after {timeout} s")
        if self._result.error is not None:
            raise self._result.error
        return self._value()

    result = get

    def exception(self, timeout: float | None = None) -> KafkaError | None:
        if not self._result.wait(timeout):
            raise KafkaTimeoutError(f"record not acknowledged after {timeout} s")
        return self._result.error

    def add_done_callback(self, fn: Callable[[FutureRecordMetadata], Any]) -> None:
        """`fn(future)` when done, on the producer's I/O thread (now, if already done)."""
        self._result.add_callback(functools.partial(fn, self))

    def add_callback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> FutureRecordMetadata:
        """kafka-python style: `fn(*args, record_metadata, **kwargs)` on success."""
        def on_done() -> None:
            if self._result.error is None:
                fn(*args, self._value(), **kwargs)
        self._result.add_callback(on_done)
        return self

    def add_errback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> FutureRecordMetadata:
        """kafka-python style: `fn(*args, exception, **kwargs)` on failure."""
        def on_done() -> None:
            if self._result.error is not None:
                fn(*args, self._result.error, **kwargs)
        self._result.add_callback(on_done)
        return self

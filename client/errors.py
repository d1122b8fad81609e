"""Every error a client raises: Kafka's error codes (proto.errors) plus the client-side ones.

All are KafkaError, so one `except KafkaError` covers a client call, and each
says whether it is worth retrying (`retriable`) and whether cluster metadata is
stale (`invalid_metadata`).
"""

from __future__ import annotations

from proto.errors import (
    CorruptMessageError,
    ErrorCode,
    InvalidRecordError,
    KafkaError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    UnsupportedCompressionTypeError,
    error_for,
    invalidates_metadata,
    is_retriable,
)


class KafkaTimeoutError(KafkaError):
    """A blocking call ran out of time (kafka-python's KafkaTimeoutError, Java's TimeoutException)."""

    code = ErrorCode.REQUEST_TIMED_OUT


class IllegalStateError(KafkaError):
    """A call the client's state does not allow, e.g. send() after close() (Java's IllegalStateException,
    kafka-python's IllegalStateError). A mistake in the caller, not a broker's answer: no error code shown."""

    def __str__(self) -> str:
        return self.message


class CommitFailedError(KafkaError):
    """A group member's commit the coordinator refused because the group rebalanced past the member's
    generation (Kafka's CommitFailedException, kafka-python's CommitFailedError): not retriable, the
    partitions may belong to another member by now."""

    code = ErrorCode.ILLEGAL_GENERATION


class NoOffsetForPartitionError(KafkaError):
    """auto_offset_reset='none' and the partition has no committed offset (Kafka's NoOffsetForPartitionException)."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


__all__ = [
    "CommitFailedError",
    "CorruptMessageError",
    "ErrorCode",
    "IllegalStateError",
    "InvalidRecordError",
    "KafkaError",
    "KafkaStorageError",
    "KafkaTimeoutError",
    "MessageTooLargeError",
    "NoOffsetForPartitionError",
    "OffsetOutOfRangeError",
    "RecordListTooLargeError",
    "UnsupportedCompressionTypeError",
    "error_for",
    "invalidates_metadata",
    "is_retriable",
]

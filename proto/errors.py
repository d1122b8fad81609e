"""Kafka's error codes: part of the wire contract, shared by broker, controller and client.

Numbers and names are Kafka's (org.apache.kafka.common.protocol.Errors), so an
operator's habits and grep patterns carry over. `retriable` and
`invalid_metadata` follow Kafka's RetriableException / InvalidMetadataException
split: a client retries the first kind and refreshes metadata for the second.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    CLUSTER_AUTHORIZATION_FAILED = 31
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    FETCH_SESSION_ID_NOT_FOUND = 70
    LISTENER_NOT_FOUND = 72
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    INVALID_RECORD = 87


_RETRIABLE = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,  # Kafka retries it: the bytes may have been damaged in flight
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.LISTENER_NOT_FOUND,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.BROKER_NOT_AVAILABLE,
    }
)

_INVALID_METADATA = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.LISTENER_NOT_FOUND,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.BROKER_NOT_AVAILABLE,
    }
)


def is_retriable(code: ErrorCode) -> bool:
    return code in _RETRIABLE


def invalidates_metadata(code: ErrorCode) -> bool:
    return code in _INVALID_METADATA


class KafkaError(Exception):
    """An error that travels as a Kafka error code.

    Raised inside the broker where a request must fail with a precise code, and
    by the client when a broker answered with one.
    """

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", code: ErrorCode | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(message or self.code.name)

    @property
    def message(self) -> str:
        """The message alone, as Kafka's ApiException carries it on the wire (str() adds the code's name)."""
        return str(self.args[0]) if self.args else self.code.name

    @property
    def retriable(self) -> bool:
        return is_retriable(self.code)

    @property
    def invalid_metadata(self) -> bool:
        return invalidates_metadata(self.code)

    def __str__(self) -> str:
        text = super().__str__()
        name = self.code.name
        return text if text.startswith(name) else f"{name}: {text}"


def _error_class(code: ErrorCode) -> type[KafkaError]:
    return type(code.name.title().replace("_", "") + "Error", (KafkaError,), {"code": code})


# One exception class per code (CorruptMessageError, OffsetOutOfRangeError, ...),
# so callers can `except OffsetOutOfRangeError` as they would in a Kafka client.
CorruptMessageError = _error_class(ErrorCode.CORRUPT_MESSAGE)
InvalidRecordError = _error_class(ErrorCode.INVALID_RECORD)
MessageTooLargeError = _error_class(ErrorCode.MESSAGE_TOO_LARGE)
RecordListTooLargeError = _error_class(ErrorCode.RECORD_LIST_TOO_LARGE)
OffsetOutOfRangeError = _error_class(ErrorCode.OFFSET_OUT_OF_RANGE)
UnsupportedCompressionTypeError = _error_class(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
UnsupportedForMessageFormatError = _error_class(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT)
KafkaStorageError = _error_class(ErrorCode.KAFKA_STORAGE_ERROR)
InvalidTimestampError = _error_class(ErrorCode.INVALID_TIMESTAMP)


def error_for(code: int, message: str = "") -> KafkaError:
    """The exception a client raises for an error code a broker answered with."""
    try:
        known = ErrorCode(code)
    except ValueError:
        return KafkaError(f"unknown error code {code}: {message}")
    return KafkaError(message, known)

"""proto/errors.py: every Kafka error code has its own exception class, which `error_for` returns, with the
`retriable` and `invalid_metadata` flags of the exception Kafka's Errors.java maps the code to."""

from __future__ import annotations

import pytest

import proto.errors as errors
from proto.errors import ErrorCode, KafkaError, error_class, error_for

# Errors.java: the codes whose exception is a RetriableException (InvalidMetadataException included) ...
KAFKA_RETRIABLE = {
    "CORRUPT_MESSAGE", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER",
    "REQUEST_TIMED_OUT", "REPLICA_NOT_AVAILABLE", "NETWORK_EXCEPTION", "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "NOT_CONTROLLER", "KAFKA_STORAGE_ERROR", "LISTENER_NOT_FOUND", "FETCH_SESSION_ID_NOT_FOUND",
    "INVALID_FETCH_SESSION_EPOCH", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "UNSTABLE_OFFSET_COMMIT",
    "OFFSET_NOT_AVAILABLE", "PREFERRED_LEADER_NOT_AVAILABLE", "ELIGIBLE_LEADERS_NOT_AVAILABLE",
}
# ... and an InvalidMetadataException.
KAFKA_INVALID_METADATA = {
    "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER", "REPLICA_NOT_AVAILABLE",
    "NETWORK_EXCEPTION", "KAFKA_STORAGE_ERROR", "LISTENER_NOT_FOUND", "FENCED_LEADER_EPOCH",
    "PREFERRED_LEADER_NOT_AVAILABLE", "ELIGIBLE_LEADERS_NOT_AVAILABLE",
}
# The module docstring's two departures: an unreachable broker (gRPC UNAVAILABLE) and a broker behind the client.
RETRIABLE = KAFKA_RETRIABLE | {"BROKER_NOT_AVAILABLE"}
INVALID_METADATA = KAFKA_INVALID_METADATA | {"BROKER_NOT_AVAILABLE", "UNKNOWN_LEADER_EPOCH"}

CODES = [code for code in ErrorCode if code is not ErrorCode.NONE]


@pytest.mark.parametrize("code", CODES, ids=lambda c: c.name)
def test_error_for_returns_the_codes_own_class(code: ErrorCode) -> None:
    error = error_for(code, "details")
    cls = error_class(code)
    assert type(error) is cls and cls is not KafkaError and issubclass(cls, KafkaError)
    assert getattr(errors, cls.__name__) is cls  # exported under its own name
    assert cls.__name__.endswith("Error")
    assert error.code == cls.code == code
    assert str(error) == f"{code.name}: details" and error.message == "details"
    assert (error.retriable, error.invalid_metadata) == (code.name in RETRIABLE, code.name in INVALID_METADATA)
    # The flags are the class's, as aiokafka's are: readable without an instance.
    assert (cls.retriable, cls.invalid_metadata) == (error.retriable, error.invalid_metadata)
    with pytest.raises(cls):
        raise error


def test_every_class_is_distinct() -> None:
    assert len({error_class(code) for code in CODES}) == len(CODES)


@pytest.mark.parametrize(("code", "name"), [
    (ErrorCode.MESSAGE_TOO_LARGE, "MessageTooLargeError"),
    (ErrorCode.INVALID_TOPIC_EXCEPTION, "InvalidTopicError"),
    (ErrorCode.KAFKA_STORAGE_ERROR, "KafkaStorageError"),
    (ErrorCode.UNKNOWN_SERVER_ERROR, "UnknownServerError"),
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, "NotLeaderOrFollowerError"),
])
def test_class_names_are_kafka_clients_names(code: ErrorCode, name: str) -> None:
    assert error_class(code).__name__ == name


def test_invalid_metadata_errors_are_retriable() -> None:
    assert INVALID_METADATA <= RETRIABLE


def test_an_unknown_code_is_a_plain_kafka_error() -> None:
    error = error_for(12345, "what")
    assert type(error) is KafkaError and error.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "12345" in str(error) and not error.retriable


def test_a_kafka_error_raised_with_a_code_takes_that_codes_flags() -> None:
    error = KafkaError("moved", ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert (error.retriable, error.invalid_metadata) == (True, True)
    assert not KafkaError("boom").retriable

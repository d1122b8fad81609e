"""Kafka's error codes: part of the wire contract, shared by broker, controller and client.

Numbers and names are Kafka's (org.apache.kafka.common.protocol.Errors), so an
operator's habits and grep patterns carry over. `retriable` and
`invalid_metadata` follow Kafka's RetriableException / InvalidMetadataException
split (the exception class of each code in Errors.java): a client retries the
first kind and refreshes metadata for the second. Two deliberate departures,
both about a broker that cannot be reached or has not caught up:
BROKER_NOT_AVAILABLE is what a client makes of gRPC's UNAVAILABLE (Kafka's
DisconnectException, retriable and a reason to refresh metadata), and
UNKNOWN_LEADER_EPOCH also refreshes metadata, so a consumer that raced ahead
of a broker looks again at who leads.

Every code has its own exception class (`MessageTooLargeError`, ...), which is
what `error_for` returns, so a caller can `except NotLeaderOrFollowerError` as
with kafka-python or aiokafka; each class carries `code`, `retriable` and
`invalid_metadata`.
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
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
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
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    TRANSACTIONAL_ID_NOT_FOUND = 105


# Kafka's RetriableException subclasses (InvalidMetadataException ones included).
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
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ErrorCode.BROKER_NOT_AVAILABLE,  # see the module's docstring
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
    }
)

# Kafka's InvalidMetadataException subclasses.
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
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_LEADER_EPOCH,  # see the module's docstring
        ErrorCode.BROKER_NOT_AVAILABLE,  # see the module's docstring
    }
)


def is_retriable(code: ErrorCode) -> bool:
    return code in _RETRIABLE


def invalidates_metadata(code: ErrorCode) -> bool:
    return code in _INVALID_METADATA


class KafkaError(Exception):
    """An error that travels as a Kafka error code.

    Raised inside the broker where a request must fail with a precise code, and
    by the client when a broker answered with one (as the code's own subclass).
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


_CLASS_BY_CODE: dict[ErrorCode, type[KafkaError]] = {}


def _error_class(code: ErrorCode) -> type[KafkaError]:
    """The class of one code: MESSAGE_TOO_LARGE -> MessageTooLargeError, INVALID_TOPIC_EXCEPTION ->
    InvalidTopicError, KAFKA_STORAGE_ERROR -> KafkaStorageError; its flags as class attributes."""
    stem = code.name.removesuffix("_ERROR").removesuffix("_EXCEPTION")
    name = stem.title().replace("_", "") + "Error"
    cls = type(name, (KafkaError,), {
        "__doc__": f"Kafka's {code.name} ({int(code)}).", "__module__": __name__, "code": code,
        "retriable": is_retriable(code), "invalid_metadata": invalidates_metadata(code),
    })
    _CLASS_BY_CODE[code] = cls
    return cls


# One exception class per code, so callers can `except OffsetOutOfRangeError` as they would in a Kafka client.
UnknownServerError = _error_class(ErrorCode.UNKNOWN_SERVER_ERROR)
OffsetOutOfRangeError = _error_class(ErrorCode.OFFSET_OUT_OF_RANGE)
CorruptMessageError = _error_class(ErrorCode.CORRUPT_MESSAGE)
UnknownTopicOrPartitionError = _error_class(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
InvalidFetchSizeError = _error_class(ErrorCode.INVALID_FETCH_SIZE)
LeaderNotAvailableError = _error_class(ErrorCode.LEADER_NOT_AVAILABLE)
NotLeaderOrFollowerError = _error_class(ErrorCode.NOT_LEADER_OR_FOLLOWER)
RequestTimedOutError = _error_class(ErrorCode.REQUEST_TIMED_OUT)
BrokerNotAvailableError = _error_class(ErrorCode.BROKER_NOT_AVAILABLE)
ReplicaNotAvailableError = _error_class(ErrorCode.REPLICA_NOT_AVAILABLE)
MessageTooLargeError = _error_class(ErrorCode.MESSAGE_TOO_LARGE)
StaleControllerEpochError = _error_class(ErrorCode.STALE_CONTROLLER_EPOCH)
OffsetMetadataTooLargeError = _error_class(ErrorCode.OFFSET_METADATA_TOO_LARGE)
NetworkError = _error_class(ErrorCode.NETWORK_EXCEPTION)
CoordinatorLoadInProgressError = _error_class(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
CoordinatorNotAvailableError = _error_class(ErrorCode.COORDINATOR_NOT_AVAILABLE)
NotCoordinatorError = _error_class(ErrorCode.NOT_COORDINATOR)
InvalidTopicError = _error_class(ErrorCode.INVALID_TOPIC_EXCEPTION)
RecordListTooLargeError = _error_class(ErrorCode.RECORD_LIST_TOO_LARGE)
NotEnoughReplicasError = _error_class(ErrorCode.NOT_ENOUGH_REPLICAS)
NotEnoughReplicasAfterAppendError = _error_class(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
InvalidRequiredAcksError = _error_class(ErrorCode.INVALID_REQUIRED_ACKS)
IllegalGenerationError = _error_class(ErrorCode.ILLEGAL_GENERATION)
InconsistentGroupProtocolError = _error_class(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
InvalidGroupIdError = _error_class(ErrorCode.INVALID_GROUP_ID)
UnknownMemberIdError = _error_class(ErrorCode.UNKNOWN_MEMBER_ID)
InvalidSessionTimeoutError = _error_class(ErrorCode.INVALID_SESSION_TIMEOUT)
RebalanceInProgressError = _error_class(ErrorCode.REBALANCE_IN_PROGRESS)
InvalidCommitOffsetSizeError = _error_class(ErrorCode.INVALID_COMMIT_OFFSET_SIZE)
TopicAuthorizationFailedError = _error_class(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
GroupAuthorizationFailedError = _error_class(ErrorCode.GROUP_AUTHORIZATION_FAILED)
ClusterAuthorizationFailedError = _error_class(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
TransactionalIdAuthorizationFailedError = _error_class(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
SecurityDisabledError = _error_class(ErrorCode.SECURITY_DISABLED)
InvalidTimestampError = _error_class(ErrorCode.INVALID_TIMESTAMP)
UnsupportedSaslMechanismError = _error_class(ErrorCode.UNSUPPORTED_SASL_MECHANISM)
IllegalSaslStateError = _error_class(ErrorCode.ILLEGAL_SASL_STATE)
UnsupportedVersionError = _error_class(ErrorCode.UNSUPPORTED_VERSION)
TopicAlreadyExistsError = _error_class(ErrorCode.TOPIC_ALREADY_EXISTS)
InvalidPartitionsError = _error_class(ErrorCode.INVALID_PARTITIONS)
InvalidReplicationFactorError = _error_class(ErrorCode.INVALID_REPLICATION_FACTOR)
InvalidReplicaAssignmentError = _error_class(ErrorCode.INVALID_REPLICA_ASSIGNMENT)
InvalidConfigError = _error_class(ErrorCode.INVALID_CONFIG)
NotControllerError = _error_class(ErrorCode.NOT_CONTROLLER)
InvalidRequestError = _error_class(ErrorCode.INVALID_REQUEST)
UnsupportedForMessageFormatError = _error_class(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT)
PolicyViolationError = _error_class(ErrorCode.POLICY_VIOLATION)
OutOfOrderSequenceNumberError = _error_class(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
DuplicateSequenceNumberError = _error_class(ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
InvalidProducerEpochError = _error_class(ErrorCode.INVALID_PRODUCER_EPOCH)
InvalidTxnStateError = _error_class(ErrorCode.INVALID_TXN_STATE)
InvalidProducerIdMappingError = _error_class(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
InvalidTransactionTimeoutError = _error_class(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
ConcurrentTransactionsError = _error_class(ErrorCode.CONCURRENT_TRANSACTIONS)
TransactionCoordinatorFencedError = _error_class(ErrorCode.TRANSACTION_COORDINATOR_FENCED)
OperationNotAttemptedError = _error_class(ErrorCode.OPERATION_NOT_ATTEMPTED)
KafkaStorageError = _error_class(ErrorCode.KAFKA_STORAGE_ERROR)
LogDirNotFoundError = _error_class(ErrorCode.LOG_DIR_NOT_FOUND)
SaslAuthenticationFailedError = _error_class(ErrorCode.SASL_AUTHENTICATION_FAILED)
UnknownProducerIdError = _error_class(ErrorCode.UNKNOWN_PRODUCER_ID)
ReassignmentInProgressError = _error_class(ErrorCode.REASSIGNMENT_IN_PROGRESS)
NonEmptyGroupError = _error_class(ErrorCode.NON_EMPTY_GROUP)
GroupIdNotFoundError = _error_class(ErrorCode.GROUP_ID_NOT_FOUND)
FetchSessionIdNotFoundError = _error_class(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
InvalidFetchSessionEpochError = _error_class(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
ListenerNotFoundError = _error_class(ErrorCode.LISTENER_NOT_FOUND)
FencedLeaderEpochError = _error_class(ErrorCode.FENCED_LEADER_EPOCH)
UnknownLeaderEpochError = _error_class(ErrorCode.UNKNOWN_LEADER_EPOCH)
UnsupportedCompressionTypeError = _error_class(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
StaleBrokerEpochError = _error_class(ErrorCode.STALE_BROKER_EPOCH)
OffsetNotAvailableError = _error_class(ErrorCode.OFFSET_NOT_AVAILABLE)
MemberIdRequiredError = _error_class(ErrorCode.MEMBER_ID_REQUIRED)
GroupMaxSizeReachedError = _error_class(ErrorCode.GROUP_MAX_SIZE_REACHED)
FencedInstanceIdError = _error_class(ErrorCode.FENCED_INSTANCE_ID)
PreferredLeaderNotAvailableError = _error_class(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
EligibleLeadersNotAvailableError = _error_class(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
ElectionNotNeededError = _error_class(ErrorCode.ELECTION_NOT_NEEDED)
NoReassignmentInProgressError = _error_class(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
GroupSubscribedToTopicError = _error_class(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
InvalidRecordError = _error_class(ErrorCode.INVALID_RECORD)
UnstableOffsetCommitError = _error_class(ErrorCode.UNSTABLE_OFFSET_COMMIT)
ProducerFencedError = _error_class(ErrorCode.PRODUCER_FENCED)
ResourceNotFoundError = _error_class(ErrorCode.RESOURCE_NOT_FOUND)
DuplicateResourceError = _error_class(ErrorCode.DUPLICATE_RESOURCE)
UnacceptableCredentialError = _error_class(ErrorCode.UNACCEPTABLE_CREDENTIAL)
TransactionalIdNotFoundError = _error_class(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)


def error_class(code: ErrorCode) -> type[KafkaError]:
    """The exception class of an error code (KafkaError itself for NONE, which is no error)."""
    return _CLASS_BY_CODE.get(code, KafkaError)


def error_for(code: int, message: str = "") -> KafkaError:
    """The exception a client raises for an error code a broker answered with: the code's own class."""
    try:
        known = ErrorCode(code)
    except ValueError:
        return KafkaError(f"unknown error code {code}: {message}")
    if known not in _CLASS_BY_CODE:
        return KafkaError(message, known)
    return _CLASS_BY_CODE[known](message)

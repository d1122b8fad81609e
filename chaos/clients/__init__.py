"""The chaos workload's client libraries: one adapter each, behind one interface (chaos/workload.py drives them).

    minibroker_client.py  the project's own Producer / Consumer, on the brokers' gRPC listeners
    confluent.py          confluent-kafka (librdkafka), on the brokers' Kafka listeners
    kafka_python.py       kafka-python, on the brokers' Kafka listeners

A producer adapter sends one value to one partition and reports its outcome once through a Delivery (the
acknowledged offset, or "fail" when the record cannot have been written, or "info" when nobody can tell);
a consumer adapter is assigned every partition from the beginning and hands out (partition, offset, value)
records plus the errors its poll met. The workload records both in the history, so the checker judges every
library by the same rules. A library with a group consumer also offers a group member adapter: it subscribes to
the topic in a consumer group, hands out records with the rebalances and commits its poll went through, commits
the positions of the records it handed out when asked and when its partitions are revoked, and reads a group's
committed offsets back (OffsetFetch).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import grpc

from chaos.history import FAIL, INFO, Assignment, Commit
from proto.errors import ErrorCode, is_retriable

CLIENTS = ("minibroker", "confluent-kafka", "kafka-python")
_MODULES = {"minibroker": "chaos.clients.minibroker_client", "confluent-kafka": "chaos.clients.confluent",
            "kafka-python": "chaos.clients.kafka_python"}

# A broker's answer after which the record may still have been written: the request may have reached the leader.
_UNKNOWN_OUTCOME = frozenset({ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION,
                              ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.UNKNOWN_SERVER_ERROR})


@dataclass(frozen=True)
class Delivery:
    outcome: str  # chaos.history's OK, FAIL or INFO
    offset: int = -1  # where the record was acknowledged (OK only)
    error: str = ""


Done = Callable[[Delivery], None]
Record = tuple[int, int, bytes]  # (partition, offset, value)


@dataclass(frozen=True)
class ProducerSettings:
    client_id: str
    acks: str  # "all" or "1"
    idempotent: bool
    request_timeout_ms: int
    delivery_timeout_ms: int
    linger_ms: int = 5
    # minibroker's client only (the Kafka clients connect in plaintext): its gRPC channels.
    channel_factory: Callable[..., grpc.aio.Channel] = grpc.aio.insecure_channel


class ChaosProducer(Protocol):
    def send(self, topic: str, partition: int, value: bytes, done: Done) -> None:
        """Hand the value to the client (blocking while its buffer is full); `done` is called once, from any
        thread, unless the producer is closed first."""

    def flush(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for every send's answer; never raises for the time running out."""

    def close(self) -> None:
        """Stop at once: sends still unanswered may get no `done` at all."""


class ChaosConsumer(Protocol):
    def poll(self, timeout: float) -> tuple[list[Record], list[str]]:
        """The records the client hands out within `timeout` seconds, and the errors it met meanwhile."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class GroupSettings:
    client_id: str  # also the member's name in the history
    group: str
    topic: str
    session_timeout_ms: int
    request_timeout_ms: int


@dataclass(frozen=True)
class GroupPolled:
    records: list[Record]
    errors: list[str]
    events: list[Assignment | Commit]  # the rebalances (and the commits on revocation) the poll went through


class ChaosGroupMember(Protocol):
    def poll(self, timeout: float) -> GroupPolled:
        """What the member hands out within `timeout` seconds."""

    def commit(self) -> Commit | None:
        """Commit (synchronously) the positions of the records handed out so far on the partitions it holds;
        None when there is nothing new to commit."""

    def close(self) -> None:
        """Leave the group (without a last commit: the workload commits before it closes)."""


# (bootstrap, group, topic, partitions, timeout s) -> partition -> committed offset (-1: none)
Committed = Callable[[str, str, str, int, float], dict[int, int]]


@dataclass(frozen=True)
class ClientLibrary:
    name: str
    kafka_protocol: bool  # connects to the Kafka listeners (else to the gRPC ones)
    producer: Callable[[str, ProducerSettings], ChaosProducer]
    # (bootstrap, client id, topic, partitions, request timeout ms): assigned every partition from the beginning
    # minibroker's also takes channel_factory=..., as its producer takes ProducerSettings.channel_factory.
    consumer: Callable[..., ChaosConsumer]
    # A member of a consumer group, and how to read a group's committed offsets (None: the library has no group
    # consumer behind an adapter yet)
    group_member: Callable[[str, GroupSettings], ChaosGroupMember] | None = None
    committed: Committed | None = None


def library(name: str) -> ClientLibrary:
    """The adapter of a name from CLIENTS (imported only when chosen: the others' libraries may be missing)."""
    module = importlib.import_module(_MODULES[name])
    found: ClientLibrary = module.LIBRARY
    return found


def broker_error_outcome(code: int | None) -> str:
    """FAIL for a broker's error code that means the record was not written; INFO for one after which it may
    have been (retriable, a timeout), for a code this broker does not know, and for a client-side error (None)."""
    if code is None:
        return INFO
    try:
        error = ErrorCode(code)
    except ValueError:
        return INFO
    return INFO if is_retriable(error) or error in _UNKNOWN_OUTCOME else FAIL

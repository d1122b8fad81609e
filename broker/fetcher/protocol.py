"""What the follower's fetcher layers exchange: the leader as a fetcher sees it, and the values on the way.

`LeaderEndPoint` is the three calls a follower makes to its leader (Fetch,
OffsetsForLeaderEpoch, ListOffsets); the real one is gRPC
(broker/fetcher/blocking_send.py), unit tests put a leader Partition behind it.
`FollowerPartition` is the local partition as a fetcher drives it: broker/replication's Partition is the
real one, so the fetcher needs no import of the layer above it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from broker.log.log import LogAppendInfo
from proto.errors import ErrorCode
from proto.types import TopicPartition

EARLIEST_TIMESTAMP = -2  # ListOffsets' special timestamps
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3  # KIP-734 (ListOffsets v7): the record with the largest timestamp


@dataclass(frozen=True, slots=True)
class BrokerEndPoint:
    """A leader as LeaderAndIsr names it (Kafka's kafka.cluster.BrokerEndPoint)."""

    id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"BrokerEndPoint(id={self.id}, host={self.host}:{self.port})"


@dataclass(frozen=True, slots=True)
class InitialFetchState:
    """Where a partition's fetching starts when it is handed to a fetcher (Kafka's InitialFetchState)."""

    leader: BrokerEndPoint
    current_leader_epoch: int
    init_offset: int  # the follower's high watermark: the truncation fallback when epochs cannot decide


@dataclass(frozen=True, slots=True)
class ReplicaFetcherConfig:
    """The replica.* keys a fetcher reads."""

    fetch_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes, per partition
    fetch_response_max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    fetch_wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    fetch_min_bytes: int = 1  # replica.fetch.min.bytes
    fetch_backoff_ms: int = 1000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30_000  # replica.socket.timeout.ms
    num_replica_fetchers: int = 1  # num.replica.fetchers


@dataclass(frozen=True, slots=True)
class FetchRequestPartition:
    topic_partition: TopicPartition
    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchPartitions:
    """What one fetch is for: every partition's entry, in fetch order, and which partitions changed (their entry
    built again, added or dropped) since the thread's previous fetch. A fetch session names only those
    (broker/fetcher/fetch_session_handler.py): with thousands of idle partitions a round's work is per change."""

    entries: Mapping[TopicPartition, FetchRequestPartition]
    changed: Collection[TopicPartition]


@dataclass(frozen=True, slots=True)
class FetchResponsePartition:
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """The leader's OffsetsForLeaderEpoch answer for one partition."""

    error: ErrorCode
    leader_epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True, slots=True)
class EpochRequest:
    current_leader_epoch: int  # fences the request (KIP-320)
    leader_epoch: int  # the follower's latest epoch, whose end it asks for


class LeaderEndPoint(Protocol):
    def fetch(self, partitions: FetchPartitions) -> dict[TopicPartition, FetchResponsePartition]:
        """One replica Fetch for all `partitions.entries`; raises on a transport failure or a request-level
        error."""
        ...

    def offsets_for_leader_epoch(self, partitions: dict[TopicPartition, EpochRequest]
                                 ) -> dict[TopicPartition, EpochEndOffset]: ...

    def list_offset(self, tp: TopicPartition, current_leader_epoch: int, timestamp: int) -> int:
        """The leader's log end (LATEST_TIMESTAMP) or start (EARLIEST_TIMESTAMP) offset; raises KafkaError."""
        ...

    def close(self) -> None:
        """Release the connection; a call in flight fails at once (how a fetcher thread is woken to stop)."""
        ...


class FollowerPartition(Protocol):
    """A local follower partition, each call checked against the leader epoch the fetcher follows in
    (broker/replication/partition.py's Partition; raises KafkaError when the epoch or role moved)."""

    def follower_offsets(self, leader_epoch: int) -> tuple[int, int]:
        """(log start offset, log end offset) of the follower's log, for the next fetch."""
        ...

    def latest_epoch(self, leader_epoch: int) -> int | None: ...

    def end_offset_for_epoch(self, leader_epoch: int, epoch: int) -> tuple[int, int] | None: ...

    def truncate_to(self, leader_epoch: int, offset: int) -> int: ...

    def truncate_fully_and_start_at(self, leader_epoch: int, offset: int) -> None: ...

    def append_records_to_follower(self, leader_epoch: int, fetch_offset: int, records: bytes,
                                   leader_high_watermark: int, leader_log_start_offset: int) -> LogAppendInfo: ...

"""DelayedFetch: a fetch long-polling for min_bytes (Kafka's server/DelayedFetch.scala).

Woken by appends (a follower reads to the log end) and high watermark moves
(a consumer reads to the HW), it counts the bytes now readable from each
partition's fetch position by file positions alone, without reading. It
answers early when a partition changed under it (leadership moved, the log
rolled past or was truncated below the fetch position), and at max_wait_ms with
whatever there is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from broker.log.file_slice import FileSlice
from broker.log.log import AbortedTxn, LogOffsetMetadata
from broker.purgatory.purgatory import DelayedOperation
from broker.replication.offset_metadata import UNKNOWN_OFFSET, on_older_segment, position_diff, position_known
from broker.replication.partition import FetchIsolation, Partition
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition


@dataclass(frozen=True, slots=True)
class FetchParams:
    replica_id: int  # -1: a consumer; otherwise the follower's broker id
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: FetchIsolation
    fetch_only_from_leader: bool

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(frozen=True, slots=True)
class PartitionFetchInfo:
    """One partition of a fetch request."""

    topic_partition: TopicPartition
    fetch_offset: int
    log_start_offset: int  # the follower's; -1 from consumers
    max_bytes: int
    current_leader_epoch: int


@dataclass(frozen=True, slots=True)
class LogReadResult:
    error: ErrorCode
    records: FileSlice | None = None
    high_watermark: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    leader_log_end_offset: int = UNKNOWN_OFFSET
    fetch_offset_metadata: LogOffsetMetadata | None = None
    error_message: str = ""
    last_stable_offset: int = UNKNOWN_OFFSET
    # READ_COMMITTED fetches only (None otherwise): the aborted transactions of the fetched range.
    aborted_transactions: list[AbortedTxn] | None = None

    @property
    def size(self) -> int:
        return 0 if self.records is None else self.records.size


FetchResults = list[tuple[PartitionFetchInfo, LogReadResult]]
FetchResponseCallback = Callable[[FetchResults], None]


class FetchSource(Protocol):
    """What a delayed fetch needs from the ReplicaManager."""

    def get_partition_or_error(self, tp: TopicPartition) -> Partition: ...

    def read_from_local_log(self, params: FetchParams, infos: Sequence[PartitionFetchInfo]) -> FetchResults: ...


class SessionChanges(Protocol):
    """A fetch session's partitions that changed while its fetch waits (broker/replication/fetch_session.py)."""

    def take_changed(self) -> list[PartitionFetchInfo]: ...


class DelayedFetch(DelayedOperation):
    def __init__(self, params: FetchParams, fetch_status: Sequence[tuple[PartitionFetchInfo, LogOffsetMetadata]],
                 source: FetchSource, response_callback: FetchResponseCallback,
                 session: SessionChanges | None = None) -> None:
        super().__init__(params.max_wait_ms)
        self._params = params
        self._fetch_status = list(fetch_status)  # each partition with where its first read started
        self._infos = [info for info, _ in fetch_status]  # what the answer reads
        self._reading = {info.topic_partition for info in self._infos}
        self._source = source
        self._response_callback = response_callback
        self._session = session

    def _add_session_changes(self) -> bool:
        """The session's partitions that changed since the fetch was parked join it, each from where a read
        starts now; True if one of them cannot be read (the answer then reports it at once)."""
        changed = [] if self._session is None else self._session.take_changed()
        # A partition the fetch already reads (it named it) is not read twice.
        changed = [info for info in changed if info.topic_partition not in self._reading]
        if not changed:
            return False
        errored = False
        for info, result in self._source.read_from_local_log(self._params, changed):
            self._reading.add(info.topic_partition)
            self._infos.append(info)
            if result.fetch_offset_metadata is None or result.error is not ErrorCode.NONE:
                errored = True
            else:
                self._fetch_status.append((info, result.fetch_offset_metadata))
        return errored

    def try_complete(self) -> bool:
        if self._add_session_changes():
            return self.force_complete()
        accumulated = 0
        for info, start in self._fetch_status:
            try:
                snapshot = self._source.get_partition_or_error(info.topic_partition).fetch_offset_snapshot(
                    info.current_leader_epoch, self._params.fetch_only_from_leader)
            except KafkaError:
                # Not the leader any more, unknown, or fenced: the re-read reports the error at once.
                return self.force_complete()
            end = {FetchIsolation.LOG_END: snapshot.log_end_offset,
                   FetchIsolation.TXN_COMMITTED: snapshot.last_stable_offset}.get(self._params.isolation,
                                                                                   snapshot.high_watermark)
            if end.message_offset == start.message_offset:
                continue
            if not position_known(end) or not position_known(start):
                return self.force_complete()
            if on_older_segment(end, start) or on_older_segment(start, end):
                # Truncated below the fetch position, or the log rolled past its segment.
                return self.force_complete()
            if start.message_offset < end.message_offset:
                accumulated += min(position_diff(end, start), info.max_bytes)
                # Enough already: a follower's poll names every partition it follows, and every append to any
                # of them checks it; the rest would be asked for nothing (the answer reads them all anyway).
                if accumulated >= self._params.min_bytes:
                    return self.force_complete()
        if accumulated >= self._params.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self._response_callback(self._source.read_from_local_log(self._params, self._infos))

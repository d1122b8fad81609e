"""DelayedFetch: a fetch long-polling for min_bytes (Kafka's server/DelayedFetch.scala).

Woken by appends (a follower reads to the log end) and high watermark moves
(a consumer reads to the HW), it counts the bytes now readable from each
partition's fetch position by file positions alone, without reading. It
answers early when a partition changed under it (leadership moved, the log
rolled past or was truncated below the fetch position), and at max_wait_ms with
whatever there is.

Beyond Kafka, whose tryComplete walks every partition of the fetch at every
wake-up: a check looks only at the partitions whose key woke it (all of them at
the first checks), keeping each partition's readable bytes from its last look.
A follower's poll names hundreds of partitions when a producer spreads records
thin, each woken once by its own append or high watermark move, and most sit at
their log end (nothing to count, so no early stop): walking them all each time
was quadratic, three quarters of the leader's event loop (issue 27).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
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

    def read_and_answer(self, params: FetchParams, infos: Sequence[PartitionFetchInfo],
                        response_callback: FetchResponseCallback) -> None:
        """`response_callback` with the read of `infos`, perhaps later, in chunks (local_log_read.py)."""


class SessionChanges(Protocol):
    """A fetch session's partitions that changed while its fetch waits (broker/replication/fetch_session.py)."""

    def take_changed(self) -> list[PartitionFetchInfo]: ...


class DelayedFetch(DelayedOperation):
    def __init__(self, params: FetchParams, fetch_status: Sequence[tuple[PartitionFetchInfo, LogOffsetMetadata]],
                 source: FetchSource, response_callback: FetchResponseCallback,
                 session: SessionChanges | None = None) -> None:
        super().__init__(params.max_wait_ms)
        self._params = params
        # Each partition with where its first read started.
        self._fetch_status = {info.topic_partition: (info, start) for info, start in fetch_status}
        self._infos = [info for info, _ in fetch_status]  # what the answer reads
        self._reading = {info.topic_partition for info in self._infos}
        self._source = source
        self._response_callback = response_callback
        self._session = session
        # Bytes readable from each partition at its last look (only those with some), and their sum.
        self._readable: dict[TopicPartition, int] = {}
        self._accumulated = 0
        # What the next check looks at: every partition, or only those woken since the last check.
        self._woken_lock = threading.Lock()
        self._check_all = True
        self._woken: set[TopicPartition] = set()

    def wake(self, key: Hashable | None) -> None:
        """A partition's key: look at it at the next check. The session's key needs nothing: the session's
        changes are taken at every check."""
        with self._woken_lock:
            if key is None:
                self._check_all = True
            elif isinstance(key, TopicPartition):
                self._woken.add(key)

    def _add_session_changes(self) -> tuple[bool, list[TopicPartition]]:
        """The session's partitions that changed since the fetch was parked join it, each from where a read
        starts now: (whether one of them cannot be read, so the answer reports it at once; those that joined)."""
        changed = [] if self._session is None else self._session.take_changed()
        # A partition the fetch already reads (it named it) is not read twice.
        changed = [info for info in changed if info.topic_partition not in self._reading]
        if not changed:
            return False, []
        errored = False
        joined = []
        for info, result in self._source.read_from_local_log(self._params, changed):
            self._reading.add(info.topic_partition)
            self._infos.append(info)
            if result.fetch_offset_metadata is None or result.error is not ErrorCode.NONE:
                errored = True
            else:
                self._fetch_status[info.topic_partition] = (info, result.fetch_offset_metadata)
                joined.append(info.topic_partition)
        return errored, joined

    def _to_check(self, joined: list[TopicPartition]) -> list[TopicPartition]:
        with self._woken_lock:
            check_all, woken = self._check_all, self._woken
            self._check_all, self._woken = False, set()
        if check_all:
            return list(self._fetch_status)
        return [tp for tp in (*woken, *joined) if tp in self._fetch_status]

    def try_complete(self) -> bool:
        errored, joined = self._add_session_changes()
        if errored:
            return self.force_complete()
        for tp in self._to_check(joined):
            info, start = self._fetch_status[tp]
            try:
                snapshot = self._source.get_partition_or_error(info.topic_partition).fetch_offset_snapshot(
                    info.current_leader_epoch, self._params.fetch_only_from_leader)
            except KafkaError:
                # Not the leader any more, unknown, or fenced: the re-read reports the error at once.
                return self.force_complete()
            end = {FetchIsolation.LOG_END: snapshot.log_end_offset,
                   FetchIsolation.TXN_COMMITTED: snapshot.last_stable_offset}.get(self._params.isolation,
                                                                                   snapshot.high_watermark)
            readable = 0
            if end.message_offset != start.message_offset:
                if not position_known(end) or not position_known(start):
                    return self.force_complete()
                if on_older_segment(end, start) or on_older_segment(start, end):
                    # Truncated below the fetch position, or the log rolled past its segment.
                    return self.force_complete()
                if start.message_offset < end.message_offset:
                    readable = min(position_diff(end, start), info.max_bytes)
            self._accumulated += readable - self._readable.pop(tp, 0)
            if readable:
                self._readable[tp] = readable
            # Enough already: the rest would be looked at for nothing (the answer reads them all anyway).
            if self._accumulated >= self._params.min_bytes:
                return self.force_complete()
        if self._accumulated >= self._params.min_bytes:  # min_bytes 0, or nothing left to look at
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        # Read in chunks: a session's fetch may name thousands of partitions, all read again here.
        self._source.read_and_answer(self._params, self._infos, self._response_callback)

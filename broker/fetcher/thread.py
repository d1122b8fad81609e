"""ReplicaFetcherThread: one follower thread replicating a set of partitions from one leader (Kafka 2.x's
AbstractFetcherThread + ReplicaFetcherThread).

Each round: truncate the partitions that need it (OffsetsForLeaderEpoch,
broker/fetcher/truncation.py for the rules), then one Fetch for every partition
ready to fetch, appended with the leader's offsets. The fetch long-polls at the
leader (replica.fetch.wait.max.ms), so an idle partition costs one request per
wait, not a busy loop; with nothing to fetch the thread sleeps until a
partition is added or replica.fetch.backoff.ms passes.

A round's work is per change, not per partition: each partition's request
entry is kept from round to round and built again only when its state changed
(added, answered, truncated, delayed, or its local log start moved), and only
the partitions still truncating are looked at for truncation, and the fetch
session is told only which entries changed. Building every
entry every round (the local log's offsets under the partition's lock, for each
of hundreds of partitions) held the GIL for most of a round at 1,000
partitions, starving the event loop that answers produces (issue 27).

Partition states live under `_cond` (Kafka's partitionMapLock); requests to
the leader are made without it, so LeaderAndIsr can add and remove partitions
meanwhile, and a response is only applied to a partition still in the state
it was requested in (same leader epoch and fetch offset). A partition whose
fetch or truncation fails is delayed by the backoff; a storage error or
anything unexpected marks it failed (it stays out until the next
LeaderAndIsr re-adds it), without stopping the others.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from typing import TypeVar

from broker.fetcher.protocol import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    BrokerEndPoint,
    EpochRequest,
    FetchPartitions,
    FetchRequestPartition,
    FetchResponsePartition,
    FollowerPartition,
    InitialFetchState,
    LeaderEndPoint,
    ReplicaFetcherConfig,
)
from broker.fetcher.truncation import OutOfRangeAction, offset_truncation_state, out_of_range_reset
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition

logger = logging.getLogger(__name__)


class FetchState(enum.Enum):
    TRUNCATING = "Truncating"
    FETCHING = "Fetching"


@dataclass(frozen=True, slots=True)
class PartitionFetchState:
    """Kafka's PartitionFetchState: where to fetch next, in which epoch, and whether it must truncate first."""

    fetch_offset: int
    current_leader_epoch: int
    state: FetchState
    delayed_until_ms: float = 0.0
    lag: int | None = None

    def is_ready(self, state: FetchState, now_ms: float) -> bool:
        return self.state is state and self.delayed_until_ms <= now_ms


PartitionLookup = Callable[[TopicPartition], FollowerPartition | None]
_T = TypeVar("_T")


# Bound as partials while iterating: a lambda there would close over the loop's variable.
def _latest_epoch(partition: FollowerPartition, leader_epoch: int) -> int | None:
    return partition.latest_epoch(leader_epoch)


def _follower_offsets(partition: FollowerPartition, leader_epoch: int) -> tuple[int, int]:
    return partition.follower_offsets(leader_epoch)


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


class ReplicaFetcherThread(threading.Thread):
    def __init__(self, name: str, broker_id: int, fetcher_id: int, source_broker: BrokerEndPoint,
                 leader: LeaderEndPoint,
                 partitions: PartitionLookup, config: ReplicaFetcherConfig,
                 mark_failed: Callable[[TopicPartition], None],
                 time_ms: Callable[[], float] = _monotonic_ms) -> None:
        super().__init__(name=name, daemon=True)
        self.fetcher_id = fetcher_id
        self.source_broker = source_broker
        self._leader = leader
        self._partitions = partitions
        self._config = config
        self._mark_failed = mark_failed
        self._time_ms = time_ms
        self._cond = threading.Condition()
        self._states: dict[TopicPartition, PartitionFetchState] = {}
        # The next fetch's entries, in fetch order (fairness under max bytes), and the state each was built
        # from. Only the fetcher thread touches them; other threads mark a partition in _changed instead.
        self._requests: dict[TopicPartition, FetchRequestPartition] = {}
        self._requested: dict[TopicPartition, PartitionFetchState] = {}
        self._changed: set[TopicPartition] = set()  # whose entry is to be built again
        self._unsent: set[TopicPartition] = set()  # whose entry was built again (or dropped) since the last fetch
        self._truncating: set[TopicPartition] = set()
        self._delayed: dict[TopicPartition, float] = {}  # a backed-off partition: until when
        self._running = True
        self._log_prefix = f"[ReplicaFetcher replicaId={broker_id}, leaderId={source_broker.id}," \
                           f" fetcherId={fetcher_id}] "

    # ------------------------------------------------------------------ partitions (any thread)

    def add_partitions(self, initial: dict[TopicPartition, InitialFetchState]) -> None:
        """Start (or keep) fetching these; a new leader epoch always starts with truncation."""
        with self._cond:
            for tp, init in initial.items():
                current = self._states.get(tp)
                if current is None or current.current_leader_epoch != init.current_leader_epoch:
                    self._put(tp, PartitionFetchState(init.init_offset, init.current_leader_epoch,
                                                      FetchState.TRUNCATING))
            self._cond.notify_all()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        with self._cond:
            for tp in tps:
                if tp in self._states:
                    self._drop(tp)

    def log_start_offset_moved(self, tp: TopicPartition) -> None:
        """The local log's start moved outside a fetch (retention): the next fetch tells the leader."""
        with self._cond:
            if tp in self._states:
                self._changed.add(tp)

    def partition_states(self) -> dict[TopicPartition, PartitionFetchState]:
        with self._cond:
            return dict(self._states)

    @property
    def partition_count(self) -> int:
        with self._cond:
            return len(self._states)

    def max_lag(self) -> int:
        with self._cond:
            return max((s.lag for s in self._states.values() if s.lag is not None), default=0)

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> None:
        logger.info("%sStarting", self._log_prefix)
        while self._running:
            try:
                self.do_work()
            except Exception:
                if self._running:
                    logger.exception("%sError in fetcher loop", self._log_prefix)
                    self._sleep(self._config.fetch_backoff_ms)
        logger.info("%sStopped", self._log_prefix)

    def initiate_shutdown(self) -> None:
        self._running = False
        # Cuts a fetch long-polling at the leader short.
        self._leader.close()
        with self._cond:
            self._cond.notify_all()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        logger.info("%sShutting down", self._log_prefix)
        self.initiate_shutdown()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout_s)

    def _sleep(self, ms: float) -> None:
        with self._cond:
            if self._running:
                self._cond.wait(ms / 1000)

    def do_work(self) -> None:
        """One round (Kafka's doWork): truncate where needed, then fetch."""
        self._maybe_truncate()
        self._maybe_fetch()

    # ------------------------------------------------------------------ state changes (under _cond)

    def _put(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        """Every change of a partition's state comes through here (or _drop): its fetch entry is built again."""
        self._states[tp] = state
        self._changed.add(tp)
        if state.state is FetchState.TRUNCATING:
            self._truncating.add(tp)
        else:
            self._truncating.discard(tp)
        if state.delayed_until_ms > 0:
            self._delayed[tp] = state.delayed_until_ms
        else:
            self._delayed.pop(tp, None)

    def _drop(self, tp: TopicPartition) -> None:
        self._states.pop(tp, None)
        self._changed.add(tp)
        self._truncating.discard(tp)
        self._delayed.pop(tp, None)

    def _delay(self, tps: Iterable[TopicPartition]) -> None:
        until = self._time_ms() + self._config.fetch_backoff_ms
        for tp in tps:
            state = self._states.get(tp)
            if state is not None:
                self._put(tp, replace(state, delayed_until_ms=until))

    def _fail(self, tp: TopicPartition) -> None:
        self._drop(tp)
        self._mark_failed(tp)
        logger.warning("%sPartition %s marked as failed", self._log_prefix, tp)

    def _on_partition_fenced(self, tp: TopicPartition, request_epoch: int) -> None:
        """FENCED_LEADER_EPOCH: our epoch is older than the leader's; wait for the LeaderAndIsr that tells us."""
        state = self._states.get(tp)
        if state is None:
            return
        if state.current_leader_epoch == request_epoch:
            logger.info("%sPartition %s has an older epoch (%d) than the current leader. Will await the new"
                        " LeaderAndIsr state before resuming fetching.", self._log_prefix, tp, request_epoch)
            self._fail(tp)
        else:
            self._delay([tp])

    def _still(self, tp: TopicPartition, expected: PartitionFetchState) -> bool:
        """The partition is where it was when the request went out (not removed, re-added or moved)."""
        state = self._states.get(tp)
        return (state is not None and state.current_leader_epoch == expected.current_leader_epoch
                and state.fetch_offset == expected.fetch_offset and state.state is expected.state)

    # ------------------------------------------------------------------ truncation

    def _maybe_truncate(self) -> None:
        with_epochs: dict[TopicPartition, EpochRequest] = {}
        requested: dict[TopicPartition, PartitionFetchState] = {}
        with self._cond:
            now = self._time_ms()
            for tp in list(self._truncating):
                state = self._states[tp]
                if not state.is_ready(FetchState.TRUNCATING, now):
                    continue
                epoch = self._call_partition(tp, state,
                                             partial(_latest_epoch, leader_epoch=state.current_leader_epoch))
                if isinstance(epoch, _Failed):
                    continue
                if epoch is None:
                    # No epoch known locally (an empty log, or written before epochs): Kafka 2.x's fallback.
                    logger.info("%sTruncating partition %s to local high watermark %d", self._log_prefix, tp,
                                state.fetch_offset)
                    self._truncate(tp, state, state.fetch_offset, completed=True)
                else:
                    with_epochs[tp] = EpochRequest(state.current_leader_epoch, epoch)
                    requested[tp] = state
        if not with_epochs:
            return
        try:
            answers = self._leader.offsets_for_leader_epoch(with_epochs)
        except Exception as e:
            if self._running:
                logger.warning("%sError when sending leader epoch request for %s: %s", self._log_prefix,
                               [str(tp) for tp in with_epochs], e)
                with self._cond:
                    self._delay(with_epochs)
            return
        with self._cond:
            for tp, state in requested.items():
                answer = answers.get(tp)
                if answer is None or not self._still(tp, state):
                    continue
                if answer.error is ErrorCode.NONE:
                    self._truncate_to_epoch_end_offset(tp, state, answer.leader_epoch, answer.end_offset)
                elif answer.error is ErrorCode.FENCED_LEADER_EPOCH:
                    self._on_partition_fenced(tp, state.current_leader_epoch)
                else:
                    logger.info("%sRetrying leaderEpoch request for partition %s as the leader reported an error:"
                                " %s", self._log_prefix, tp, answer.error.name)
                    self._delay([tp])

    def _truncate_to_epoch_end_offset(self, tp: TopicPartition, state: PartitionFetchState, leader_epoch: int,
                                      leader_end_offset: int) -> None:
        epoch = state.current_leader_epoch

        def decide(partition: FollowerPartition) -> tuple[int, bool]:
            _, replica_end = partition.follower_offsets(epoch)
            decision = offset_truncation_state(
                tp, leader_epoch, leader_end_offset, state.fetch_offset, replica_end,
                lambda e: partition.end_offset_for_epoch(epoch, e))
            return decision.offset, decision.truncation_completed

        decided = self._call_partition(tp, state, decide)
        if not isinstance(decided, _Failed):
            offset, completed = decided
            self._truncate(tp, state, offset, completed)

    def _truncate(self, tp: TopicPartition, state: PartitionFetchState, offset: int, completed: bool) -> None:
        new_end = self._call_partition(tp, state, lambda p: p.truncate_to(state.current_leader_epoch, offset))
        if not isinstance(new_end, _Failed):
            self._put(tp, PartitionFetchState(
                new_end, state.current_leader_epoch, FetchState.FETCHING if completed else FetchState.TRUNCATING))

    # ------------------------------------------------------------------ fetch

    def _maybe_fetch(self) -> None:
        with self._cond:
            self._build_changed_requests()
            if not self._requests:
                # Nothing to fetch now: sleep until a partition is added or a delay may have passed.
                if self._running:
                    self._cond.wait(self._config.fetch_backoff_ms / 1000)
                return
            changed, self._unsent = self._unsent, set()
        # _requests is read during the call without _cond: only this thread changes it.
        try:
            response = self._leader.fetch(FetchPartitions(self._requests, changed))
        except Exception as e:
            if self._running:
                logger.warning("%sError in response for fetch request to broker %d: %s", self._log_prefix,
                               self.source_broker.id, e)
                with self._cond:
                    self._delay(list(self._requests))
                self._sleep(self._config.fetch_backoff_ms)
            return
        out_of_range = []
        with self._cond:
            for tp, data in response.items():
                state = self._requested.get(tp)
                if state is None or not self._still(tp, state):
                    continue
                if data.error is ErrorCode.OFFSET_OUT_OF_RANGE:
                    out_of_range.append((tp, state))
                else:
                    self._process_partition_data(tp, state, data)
        for tp, state in out_of_range:
            self._handle_out_of_range(tp, state)

    def _build_changed_requests(self) -> None:
        """The fetch entries of the partitions changed since the last round (and of those whose backoff ended)
        built again: in if ready to fetch, out otherwise. Under _cond."""
        now = self._time_ms()
        for tp, until in list(self._delayed.items()):
            if until <= now:
                del self._delayed[tp]
                self._changed.add(tp)
        # Building may delay or fail a partition, which marks it changed again: for the next round.
        changed, self._changed = self._changed, set()
        self._unsent |= changed
        for tp in changed:
            state = self._states.get(tp)
            if state is None or not state.is_ready(FetchState.FETCHING, now):
                self._unrequest(tp)
                continue
            offsets = self._call_partition(tp, state,
                                           partial(_follower_offsets, leader_epoch=state.current_leader_epoch))
            if isinstance(offsets, _Failed):
                self._unrequest(tp)
                continue
            self._requested[tp] = state
            self._requests[tp] = FetchRequestPartition(tp, state.fetch_offset, offsets[0],
                                                       self._config.fetch_max_bytes, state.current_leader_epoch)

    def _unrequest(self, tp: TopicPartition) -> None:
        self._requests.pop(tp, None)
        self._requested.pop(tp, None)

    def _process_partition_data(self, tp: TopicPartition, state: PartitionFetchState,
                                data: FetchResponsePartition) -> None:
        error = data.error
        if error is ErrorCode.NONE:
            info = self._call_partition(tp, state, lambda p: p.append_records_to_follower(
                state.current_leader_epoch, state.fetch_offset, data.records, data.high_watermark,
                data.log_start_offset))
            if isinstance(info, _Failed):
                return
            next_offset = info.last_offset + 1 if info.valid_bytes > 0 else state.fetch_offset
            if info.valid_bytes > 0:
                # To the back of the queue: the next fetch's byte budget goes to the others first.
                self._unrequest(tp)
            # Built again even when no record came: the leader's log start offset may have moved this one's.
            self._put(tp, replace(state, fetch_offset=next_offset, lag=max(0, data.high_watermark - next_offset)))
        elif error is ErrorCode.FENCED_LEADER_EPOCH:
            self._on_partition_fenced(tp, state.current_leader_epoch)
        else:
            # NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION...: leadership is moving;
            # the LeaderAndIsr that follows re-adds the partition with the new leader.
            logger.info("%sError for partition %s at offset %d: %s", self._log_prefix, tp, state.fetch_offset,
                        error.name)
            self._delay([tp])

    def _handle_out_of_range(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        """Kafka's handleOutOfRangeError; the leader is asked for its offsets without the lock held."""
        epoch = state.current_leader_epoch
        try:
            leader_end = self._leader.list_offset(tp, epoch, LATEST_TIMESTAMP)
            leader_start = self._leader.list_offset(tp, epoch, EARLIEST_TIMESTAMP)
        except KafkaError as e:
            with self._cond:
                if e.code is ErrorCode.FENCED_LEADER_EPOCH:
                    self._on_partition_fenced(tp, epoch)
                else:
                    logger.info("%sCould not fetch offset for %s due to error: %s", self._log_prefix, tp, e)
                    self._delay([tp])
            return
        except Exception as e:
            logger.warning("%sError getting offset for partition %s: %s", self._log_prefix, tp, e)
            with self._cond:
                self._delay([tp])
            return
        with self._cond:
            if not self._still(tp, state):
                return

            def reset(partition: FollowerPartition) -> int:
                _, replica_end = partition.follower_offsets(epoch)
                decision = out_of_range_reset(replica_end, leader_end, leader_start)
                if decision.action is OutOfRangeAction.TRUNCATE_TO:
                    logger.warning("%sReset fetch offset for partition %s from %d to current leader %d's latest"
                                   " offset %d", self._log_prefix, tp, replica_end, self.source_broker.id,
                                   leader_end)
                    return partition.truncate_to(epoch, decision.offset)
                if decision.action is OutOfRangeAction.TRUNCATE_FULLY_AND_START_AT:
                    logger.warning("%sReset fetch offset for partition %s from %d to current leader %d's start"
                                   " offset %d", self._log_prefix, tp, replica_end, self.source_broker.id,
                                   leader_start)
                    partition.truncate_fully_and_start_at(epoch, decision.offset)
                return decision.offset

            new_offset = self._call_partition(tp, state, reset)
            if not isinstance(new_offset, _Failed):
                logger.info("%sCurrent offset %d for partition %s is out of range, which typically implies a leader"
                            " change. Reset fetch offset to %d", self._log_prefix, state.fetch_offset, tp,
                            new_offset)
                self._put(tp, PartitionFetchState(new_offset, epoch, FetchState.FETCHING, lag=0))

    # ------------------------------------------------------------------ the local partition

    def _call_partition(self, tp: TopicPartition, state: PartitionFetchState, work: Callable[[FollowerPartition], _T]
                        ) -> _T | _Failed:
        """Run `work` on the local partition (lock held); on failure delay or fail the partition and return
        _FAILED. A partition that no longer follows in this epoch is left for LeaderAndIsr to move."""
        partition = self._partitions(tp)
        if partition is None:
            self._drop(tp)
            return _FAILED
        try:
            return work(partition)
        except KafkaError as e:
            if e.code in _RETRIABLE_LOCAL_ERRORS:
                # Corrupt or unexpected data from the leader: transient (a truncation racing the read); retry.
                logger.error("%sFound invalid messages during fetch for partition %s offset %d: %s",
                             self._log_prefix, tp, state.fetch_offset, e)
                self._delay([tp])
            elif e.code is ErrorCode.NOT_LEADER_OR_FOLLOWER:
                self._delay([tp])
            else:
                logger.error("%sUnexpected error occurred while processing data for partition %s at offset %d: %s",
                             self._log_prefix, tp, state.fetch_offset, e)
                self._fail(tp)
        except OSError as e:
            logger.error("%sError while processing data for partition %s at offset %d: %s", self._log_prefix, tp,
                         state.fetch_offset, e)
            self._fail(tp)
        except Exception:
            logger.exception("%sUnexpected error occurred while processing data for partition %s at offset %d",
                             self._log_prefix, tp, state.fetch_offset)
            self._fail(tp)
        return _FAILED


class _Failed:
    """Marks a local-partition call that failed (None is a legitimate result)."""


_FAILED = _Failed()
_RETRIABLE_LOCAL_ERRORS = frozenset({ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD})

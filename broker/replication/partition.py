"""Partition: one topic partition's replication state on this broker (Kafka 2.x's kafka.cluster.Partition).

Plain code with an injected clock and no I/O of its own beyond the partition's
Log: the gRPC adapter, the purgatories and the ZooKeeper client live
elsewhere. Methods that can move the high watermark say so in their result,
and the ReplicaManager completes the delayed requests waiting on it.

- Leader: owns the ISR and the high watermark, min LEO over the ISR, which
  only ever moves forward. Followers' LEOs are learnt from their fetches.
  Every rule that decides is a plain function in broker/replication/rules.py.
- Leader ISR changes (shrink on lag, expand on catching up, broker/replication/rules.py
  for the rules) are conditional writes of the state znode through a
  PartitionStateStore. Unlike Kafka 2.x the write runs outside `_lock`, so a
  slow ZooKeeper never stalls the event loop's reads and appends: the change
  is pending meanwhile, one at a time, and the high watermark is computed over
  the larger of the two ISRs (Kafka 2.7's "maximal ISR"), so no record counts
  as committed by a replica set that ZooKeeper might not hold.
- Follower: appends what its fetcher brings from the leader with the
  leader's offsets, takes min(own LEO, leader HW) as its high watermark, and
  truncates where the fetcher's OffsetsForLeaderEpoch exchange says.
- The isr-expiration task looks only at leaders with an in-sync follower behind
  their log end, the only ones whose ISR can shrink (Kafka's Replica.isCaughtUp):
  each partition keeps itself in that shared set as its role, ISR, log end and
  followers' fetches change, so an idle broker's timer looks at nothing.

`_lock` is Kafka's leaderIsrUpdateLock: role changes take it against appends,
reads, fetcher appends and follower fetch updates, which come from other threads.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from broker.config.topic_config import TopicConfig
from broker.fetcher.protocol import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from broker.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEntry, LeaderEpochFileCache
from broker.log.log import (
    AbortedTxn,
    AppendOrigin,
    FetchDataInfo,
    Log,
    LogAppendInfo,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from broker.log.manager import LogManager
from broker.log.producer_state import ActiveProducer
from broker.replication.offset_metadata import offset_only, position_known
from broker.replication.partition_state_store import IsrUpdateResult, PartitionStateStore
from broker.replication.replica import Replica
from broker.replication.rules import (
    acks_all_append_allowed,
    acks_all_completion,
    any_isr_follower_behind,
    describe_isr,
    follower_high_watermark,
    is_follower_in_sync,
    leader_high_watermark,
    maximal_isr,
    out_of_sync_replicas,
)
from common.event_ring import EVENTS, ISR_EXPAND, ISR_SHRINK, LEADER_EPOCH, TRUNCATION
from common.record import NO_TIMESTAMP
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from zk.paths import LeaderIsrAndControllerEpoch

logger = logging.getLogger(__name__)

UNKNOWN_LEADER_EPOCH = -1  # also the "skip the fencing check" value of current_leader_epoch (KIP-320)
READ_COMMITTED = 1  # Fetch's and ListOffsets' isolation_level (IsolationLevel.READ_COMMITTED)


class FetchIsolation(enum.Enum):
    """How far a read may go (Kafka's FetchIsolation): replicas read to the log end, READ_UNCOMMITTED
    consumers to the high watermark, READ_COMMITTED ones to the last stable offset."""

    LOG_END = "log end"
    HIGH_WATERMARK = "high watermark"
    TXN_COMMITTED = "last stable offset"

    @classmethod
    def for_consumer(cls, isolation_level: int) -> FetchIsolation:
        """A consumer's Fetch or ListOffsets isolation_level: 0 READ_UNCOMMITTED, 1 READ_COMMITTED."""
        return cls.TXN_COMMITTED if isolation_level == READ_COMMITTED else cls.HIGH_WATERMARK


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartitionState:
    """The controller's decision for one partition, as LeaderAndIsr carries it."""

    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    is_new: bool = False


@dataclass(frozen=True, slots=True)
class LogReadInfo:
    """A read and the partition's offsets just before it (Kafka's LogReadInfo)."""

    fetched_data: FetchDataInfo
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    # READ_COMMITTED reads only: the aborted transactions overlapping the fetched range.
    aborted_transactions: list[AbortedTxn] | None = None


@dataclass(frozen=True, slots=True)
class LogOffsetSnapshot:
    log_start_offset: int
    log_end_offset: LogOffsetMetadata
    high_watermark: LogOffsetMetadata
    last_stable_offset: LogOffsetMetadata


@dataclass(frozen=True, slots=True)
class FollowerFetchUpdate:
    """What a follower's fetch changed at the leader."""

    high_watermark_moved: bool
    needs_isr_expand: bool
    # The follower's log start offset changed: a DeleteRecords waiting for the low watermark may complete.
    log_start_offset_moved: bool = False


# DeleteRecords' offset meaning "the high watermark" (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
DELETE_TO_HIGH_WATERMARK = -1


@dataclass(frozen=True, slots=True)
class _PendingIsrUpdate:
    """An ISR write in flight: the proposed ISR and the state it is written as."""

    isr: frozenset[int]
    state: LeaderIsrAndControllerEpoch
    # What the event ring records once ZooKeeper took the write (common/event_ring.py).
    event_kind: str
    reason: str


@dataclass(frozen=True, slots=True)
class FollowerState:
    """What a leader knows of a follower: learnt from its fetches (Kafka's Replica)."""

    broker_id: int
    log_end_offset: int
    log_start_offset: int
    last_caught_up_time_ms: int
    last_fetch_time_ms: int


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One replica's view of its partition at one moment, for DescribeReplicaState (`minibroker console`).
    Followers and the ISR are the leader's knowledge: empty on a follower."""

    topic_partition: TopicPartition
    leader: int
    leader_epoch: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    last_stable_offset: int  # READ_COMMITTED reads stop here: the first offset of the oldest open transaction
    isr: tuple[int, ...]
    followers: tuple[FollowerState, ...]
    epoch_entries: tuple[EpochEntry, ...]  # the leader-epoch-checkpoint's entries


# A partition's checkpointed high watermark, if the replication-offset-checkpoint has one.
HighWatermarkCheckpoints = Callable[[TopicPartition], "int | None"]


class Partition:
    def __init__(self, topic_partition: TopicPartition, *, local_broker_id: int, log_manager: LogManager,
                 topic_config: TopicConfig, time_ms: Callable[[], int],
                 followers_behind: set[Partition] | None = None) -> None:
        self.topic_partition = topic_partition
        self.local_broker_id = local_broker_id
        self.topic_config = topic_config
        self._log_manager = log_manager
        self._time_ms = time_ms
        self._lock = threading.RLock()
        self.log: Log | None = None
        self.assignment: tuple[int, ...] = ()
        self.in_sync_replica_ids: frozenset[int] = frozenset()
        self.remote_replicas: dict[int, Replica] = {}
        self.leader_replica_id: int | None = None
        self.leader_epoch = UNKNOWN_LEADER_EPOCH
        self.leader_epoch_start_offset: int | None = None
        self.controller_epoch = 0
        self.zk_version = 0
        self._pending_isr_update: _PendingIsrUpdate | None = None
        self._high_watermark = offset_only(0)
        # (the log's truncation count, the LSO's metadata): a truncation may move what sits at that offset.
        self._last_stable_offset_cache: tuple[int, LogOffsetMetadata] | None = None
        self._log_prefix = f"[Partition {topic_partition} broker={local_broker_id}] "
        # The ReplicaManager's leaders with an in-sync follower behind (the isr-expiration task's partitions).
        self._followers_behind: set[Partition] = set() if followers_behind is None else followers_behind

    def __repr__(self) -> str:
        return (f"Partition({self.topic_partition}, leader={self.leader_replica_id}, epoch={self.leader_epoch},"
                f" isr={sorted(self.in_sync_replica_ids)}, hw={self.high_watermark})")

    # ------------------------------------------------------------------ state

    @property
    def is_leader(self) -> bool:
        return self.leader_replica_id == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self._high_watermark.message_offset

    @property
    def min_insync_replicas(self) -> int:
        return self.topic_config.min_insync_replicas

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR the high watermark must respect: the current one plus any member a pending write adds."""
        pending = self._pending_isr_update
        return maximal_isr(self.in_sync_replica_ids, None if pending is None else pending.isr)

    @property
    def is_under_replicated(self) -> bool:
        return self.is_leader and len(self.in_sync_replica_ids) < len(self.assignment)

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.in_sync_replica_ids) < self.min_insync_replicas

    def replica_state(self) -> ReplicaState | None:
        """This replica's state, None while it has no log (offline or not created yet)."""
        with self._lock:
            log = self.log
            if log is None:
                return None
            is_leader = self.is_leader
            followers = tuple(
                FollowerState(r.broker_id, r.log_end_offset, r.log_start_offset, r.last_caught_up_time_ms,
                              r.last_fetch_time_ms)
                for _, r in sorted(self.remote_replicas.items())) if is_leader else ()
            cache = log.leader_epoch_cache
            epochs = tuple(cache.entries) if isinstance(cache, LeaderEpochFileCache) else ()
            return ReplicaState(
                self.topic_partition, -1 if self.leader_replica_id is None else self.leader_replica_id,
                self.leader_epoch, log.log_start_offset, log.log_end_offset, self.high_watermark,
                log.last_stable_offset(self.high_watermark),
                tuple(b for b in self.assignment if b in self.in_sync_replica_ids) if is_leader else (), followers,
                epochs)

    def update_topic_config(self, config: TopicConfig) -> None:
        """The topic's config changed live: min.insync.replicas and the log's settings apply from now on."""
        with self._lock:
            self.topic_config = config
            if self.log is not None:
                self.log.update_config(config.log)

    # ------------------------------------------------------------------ role changes

    def make_leader(self, state: LeaderAndIsrPartitionState,
                    checkpoints: HighWatermarkCheckpoints) -> tuple[bool, bool]:
        """Become (or stay) leader in `state.leader_epoch`; returns (is new leader, high watermark moved)."""
        with self._lock:
            self.controller_epoch = state.controller_epoch
            self._update_assignment_and_isr(state.replicas, state.isr)
            log = self._create_log_if_not_exists(checkpoints, state.is_new)
            start_offset = log.log_end_offset
            logger.info("Leader %s starts at leader epoch %d from offset %d with high watermark %d ISR %s."
                        " Previous leader epoch was %d.", self.topic_partition, state.leader_epoch, start_offset,
                        self.high_watermark, list(state.isr), self.leader_epoch)
            is_new_leader = not self.is_leader
            # Kafka 3.x's isNewLeaderEpoch: a leader handed a later epoch directly (paused through the epochs in
            # between, when followers may have truncated) must not trust positions learnt before.
            is_new_leader_epoch = is_new_leader or state.leader_epoch > self.leader_epoch
            self.leader_epoch = state.leader_epoch
            self.leader_epoch_start_offset = start_offset
            self.zk_version = state.zk_version
            self._pending_isr_update = None
            # KAFKA-7415: record the epoch before the first write in it, so a follower holding
            # records of a later, failed epoch can still find where to truncate.
            if log.leader_epoch_cache is not None:
                log.leader_epoch_cache.assign(state.leader_epoch, start_offset, log_end_offset=start_offset)
            now = self._time_ms()
            for replica in self.remote_replicas.values():
                caught_up = now if replica.broker_id in self.in_sync_replica_ids else 0
                replica.reset_last_caught_up_time(start_offset, now, caught_up)
                if is_new_leader_epoch:
                    replica.forget_log_end_offset()
            self.leader_replica_id = self.local_broker_id
            self._track_followers_behind()
            if is_new_leader_epoch:
                EVENTS.record(LEADER_EPOCH, f"broker {self.local_broker_id} leads epoch {state.leader_epoch} from"
                              f" offset {start_offset}, ISR {sorted(state.isr)}", *self.topic_partition)
            # The ISR may be down to this broker alone.
            return is_new_leader, self._maybe_increment_leader_hw(log)

    def make_follower(self, state: LeaderAndIsrPartitionState, checkpoints: HighWatermarkCheckpoints) -> bool:
        """Follow `state.leader`; True if the leader or epoch changed (the fetcher must restart)."""
        with self._lock:
            old_leader_epoch = self.leader_epoch
            self.controller_epoch = state.controller_epoch
            # Only the leader keeps the ISR.
            self._update_assignment_and_isr(state.replicas, ())
            self._create_log_if_not_exists(checkpoints, state.is_new)
            self.leader_epoch = state.leader_epoch
            self.leader_epoch_start_offset = None
            self.zk_version = state.zk_version
            self._pending_isr_update = None
            if self.leader_replica_id == state.leader and self.leader_epoch == old_leader_epoch:
                return False
            self.leader_replica_id = state.leader
            self._track_followers_behind()
            EVENTS.record(LEADER_EPOCH, f"broker {self.local_broker_id} follows leader {state.leader} in epoch"
                          f" {state.leader_epoch}", *self.topic_partition)
            return True

    def create_log_if_not_exists(self, checkpoints: HighWatermarkCheckpoints, is_new: bool) -> None:
        """Host the replica without a role (its leader is not alive yet)."""
        with self._lock:
            self._create_log_if_not_exists(checkpoints, is_new)

    def delete(self) -> None:
        """StopReplica with delete: forget every role and the log (Kafka's Partition.delete). The ReplicaManager
        deletes the logs of a whole StopReplica together (`LogManager.delete_logs`)."""
        with self._lock:
            self.remote_replicas.clear()
            self.assignment = ()
            self.in_sync_replica_ids = frozenset()
            self.leader_replica_id = None
            self.leader_epoch_start_offset = None
            self._pending_isr_update = None
            self.log = None
            self._followers_behind.discard(self)

    def _update_assignment_and_isr(self, assignment: Iterable[int], isr: Iterable[int]) -> None:
        self.assignment = tuple(assignment)
        self.remote_replicas = {
            broker_id: self.remote_replicas.get(broker_id) or Replica(broker_id)
            for broker_id in self.assignment if broker_id != self.local_broker_id
        }
        self.in_sync_replica_ids = frozenset(isr)

    def _create_log_if_not_exists(self, checkpoints: HighWatermarkCheckpoints, is_new: bool) -> Log:
        if self.log is not None:
            return self.log
        log = self._log_manager.get_or_create_log(self.topic_partition, self.topic_config.log, is_new)
        checkpointed = checkpoints(self.topic_partition)
        if checkpointed is None:
            logger.info("No checkpointed highwatermark is found for partition %s", self.topic_partition)
            checkpointed = 0
        self.log = log
        self._high_watermark = offset_only(min(max(checkpointed, log.log_start_offset), log.log_end_offset))
        return log

    # ------------------------------------------------------------------ leader: appends and the high watermark

    def append_records_to_leader(self, records: bytes, required_acks: int,
                                 origin: AppendOrigin = AppendOrigin.CLIENT) -> tuple[LogAppendInfo, bool]:
        """Append a producer's batches (or the coordinator's markers); returns the append and whether the high
        watermark moved."""
        with self._lock:
            log = self._leader_log_or_error()
            min_isr = self.min_insync_replicas
            # Refuse before writing: an acks=all write the ISR cannot make safe must not land at all.
            if not acks_all_append_allowed(required_acks, len(self.in_sync_replica_ids), min_isr):
                raise KafkaError(
                    f"The size of the current ISR {sorted(self.in_sync_replica_ids)} is insufficient to satisfy"
                    f" the min.isr requirement of {min_isr} for partition {self.topic_partition}",
                    ErrorCode.NOT_ENOUGH_REPLICAS,
                )
            info = log.append_as_leader(records, self.leader_epoch, origin)
            self._track_followers_behind()
            return info, self._maybe_increment_leader_hw(log)

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For a waiting acks=all produce: (done, error) once the high watermark reaches `required_offset`."""
        with self._lock:
            if not self.is_leader or self.log is None:
                return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
            return acks_all_completion(self.high_watermark, required_offset, len(self.in_sync_replica_ids),
                                       self.min_insync_replicas)

    def update_follower_fetch_state(self, replica_id: int, fetch_offset_metadata: LogOffsetMetadata,
                                    follower_start_offset: int, fetch_time_ms: int,
                                    leader_end_offset: int) -> FollowerFetchUpdate:
        """Record what a follower's fetch says about its log (Kafka's updateFollowerFetchState).

        Nothing changes for a broker that is not a replica of this partition
        (Kafka's NotAssignedReplica): its fetch counts for nothing. Whether the
        follower may rejoin the ISR is only reported: the write is the caller's
        to schedule (maybe_expand_isr), off the request path.
        """
        with self._lock:
            replica = self.remote_replicas.get(replica_id)
            if replica is None or self.log is None or not self.is_leader:
                return FollowerFetchUpdate(False, False)
            old_start_offset = replica.log_start_offset
            replica.update_fetch_state(fetch_offset_metadata, follower_start_offset, fetch_time_ms,
                                       leader_end_offset)
            self._track_followers_behind()
            return FollowerFetchUpdate(self._maybe_increment_leader_hw(self.log), self._needs_expand_isr(replica_id),
                                       replica.log_start_offset != old_start_offset)

    def follower_fetched_unchanged(self, replica_id: int, fetch_time_ms: int) -> None:
        """A follower's fetch session held this partition, unread, at `fetch_time_ms`: nothing had changed
        since its last read (broker/replication/fetch_session.py), so it counts as a fetch at the same offset,
        with the same leader log end, then, as Kafka's read of every session partition would have."""
        with self._lock:
            replica = self.remote_replicas.get(replica_id)
            if replica is None or not self.is_leader or fetch_time_ms <= replica.last_fetch_time_ms:
                return
            replica.update_fetch_state(replica.log_end_offset_metadata, replica.log_start_offset, fetch_time_ms,
                                       replica.last_fetch_leader_log_end_offset)

    # ------------------------------------------------------------------ leader: DeleteRecords

    def delete_records_on_leader(self, offset: int) -> tuple[int, int]:
        """Kafka's deleteRecordsOnLeader: move the leader's log start offset to `offset` (-1: the high
        watermark), never past the high watermark; returns (the offset, the low watermark). The followers
        follow through their fetches."""
        with self._lock:
            log = self._leader_log_or_error()
            if not log.config.delete:
                # A compacted log keeps the newest record per key: deleting below an offset is not its policy.
                raise KafkaError(f"Records of partition {self.topic_partition} can not be deleted due to the"
                                 " configured policy", ErrorCode.POLICY_VIOLATION)
            requested = self.high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
            if requested < 0:
                raise KafkaError(f"The offset {requested} for partition {self.topic_partition} is not valid",
                                 ErrorCode.OFFSET_OUT_OF_RANGE)
            if requested > self.high_watermark:
                raise KafkaError(f"Cannot increment the log start offset to {requested} of partition"
                                 f" {self.topic_partition} since it is larger than the high watermark"
                                 f" {self.high_watermark}", ErrorCode.OFFSET_OUT_OF_RANGE)
            log.maybe_increment_log_start_offset(requested)
            return requested, self._low_watermark(log)

    def low_watermark_if_leader(self) -> int:
        with self._lock:
            return self._low_watermark(self._leader_log_or_error())

    def _low_watermark(self, log: Log) -> int:
        """The lowest log start offset among the leader and its in-sync followers (-1 while a follower has not
        said). Kafka counts every replica on a live broker; a replica out of the ISR cannot reach the offset
        before it catches up, and the ISR is what a new leader comes from."""
        isr = self.maximal_isr
        return min([log.log_start_offset, *(r.log_start_offset for r in self.remote_replicas.values()
                                            if r.broker_id in isr)])

    # ------------------------------------------------------------------ leader: the ISR

    def maybe_shrink_isr(self, replica_max_lag_ms: int, store: PartitionStateStore) -> bool:
        """Drop followers not caught up for `replica_max_lag_ms`; True if the high watermark moved."""
        with self._lock:
            log = self.log
            if not self.is_leader or log is None or self._pending_isr_update is not None:
                return False
            out_of_sync = out_of_sync_replicas(self.in_sync_replica_ids, self.local_broker_id, self.remote_replicas,
                                               log.log_end_offset, self._time_ms(), replica_max_lag_ms)
            if not out_of_sync:
                return False
            logger.info("%sShrinking ISR from %s to %s. Leader: (highWatermark: %d, endOffset: %d). Out of sync"
                        " replicas: %s.", self._log_prefix, describe_isr(self.in_sync_replica_ids),
                        describe_isr(self.in_sync_replica_ids - out_of_sync), self.high_watermark,
                        log.log_end_offset, " ".join(
                            f"(brokerId: {b}, endOffset: {self.remote_replicas[b].log_end_offset})"
                            for b in sorted(out_of_sync)))
            now = self._time_ms()
            lagging = ", ".join(f"{b} not caught up for {now - self.remote_replicas[b].last_caught_up_time_ms} ms"
                                f" (endOffset {self.remote_replicas[b].log_end_offset})" for b in sorted(out_of_sync))
            update = self._begin_isr_update(
                self.in_sync_replica_ids - out_of_sync, ISR_SHRINK,
                f"{lagging} > replica.lag.time.max.ms {replica_max_lag_ms}; leader endOffset {log.log_end_offset}")
        return self._write_isr_update(update, store.shrink_isr)

    def maybe_expand_isr(self, replica_id: int, store: PartitionStateStore) -> bool:
        """Add a follower that caught up (see broker/replication/rules.py); True if the high watermark moved."""
        with self._lock:
            if not self._needs_expand_isr(replica_id):
                return False
            new_isr = self.in_sync_replica_ids | {replica_id}
            logger.info("%sExpanding ISR from %s to %s", self._log_prefix, describe_isr(self.in_sync_replica_ids),
                        describe_isr(new_isr))
            update = self._begin_isr_update(
                new_isr, ISR_EXPAND, f"{replica_id} caught up to the high watermark {self.high_watermark}")
        return self._write_isr_update(update, store.expand_isr)

    def _track_followers_behind(self) -> None:
        """Under `_lock`, after a change to the role, the ISR, the leader's log end or a follower's: in the shared
        set exactly while this is a leader with an in-sync follower behind its log end (rules.py says why only
        those can shrink). A follower fetching nothing new changes none of these."""
        log = self.log
        if self.is_leader and log is not None and any_isr_follower_behind(
                self.in_sync_replica_ids, self.local_broker_id, self.remote_replicas, log.log_end_offset):
            self._followers_behind.add(self)
        else:
            self._followers_behind.discard(self)

    def _needs_expand_isr(self, replica_id: int) -> bool:
        replica = self.remote_replicas.get(replica_id)
        return (self.is_leader and self.log is not None and self._pending_isr_update is None
                and replica is not None and replica_id not in self.in_sync_replica_ids
                and is_follower_in_sync(replica.log_end_offset, self.high_watermark, self.leader_epoch_start_offset))

    def _begin_isr_update(self, new_isr: frozenset[int], event_kind: str, reason: str) -> _PendingIsrUpdate:
        # Kept in assignment order, as the controller writes it.
        isr = tuple(b for b in self.assignment if b in new_isr)
        update = _PendingIsrUpdate(new_isr, LeaderIsrAndControllerEpoch(
            self.local_broker_id, self.leader_epoch, isr, self.controller_epoch, self.zk_version), event_kind,
            f"ISR {describe_isr(self.in_sync_replica_ids)} -> {describe_isr(new_isr)}: {reason}")
        self._pending_isr_update = update
        return update

    def _write_isr_update(self, update: _PendingIsrUpdate,
                          write: Callable[[TopicPartition, LeaderIsrAndControllerEpoch], IsrUpdateResult]) -> bool:
        try:
            result = write(self.topic_partition, update.state)
        except BaseException:
            # The write failed (ZooKeeper session expired...): left pending, it would block every later shrink and
            # expand and hold the HW to the maximal ISR until the next LeaderAndIsr. The next attempt re-reads.
            with self._lock:
                if self._pending_isr_update is update:
                    self._pending_isr_update = None
            raise
        return self._complete_isr_update(update, result)

    def _complete_isr_update(self, update: _PendingIsrUpdate, result: IsrUpdateResult) -> bool:
        with self._lock:
            if self._pending_isr_update is not update or self.log is None:
                # A LeaderAndIsr came in meanwhile: its state wins over whatever this write did.
                return False
            self._pending_isr_update = None
            current = result.current
            if result.new_zk_version is not None:
                EVENTS.record(update.event_kind, update.reason, *self.topic_partition)
                self.in_sync_replica_ids = update.isr
                self.zk_version = result.new_zk_version
                logger.info("%sISR updated to [%s] and zkVersion updated to [%d]", self._log_prefix,
                            describe_isr(update.isr), self.zk_version)
            elif (current is not None and current.leader == self.local_broker_id
                    and current.leader_epoch == self.leader_epoch):
                # Someone else rewrote the ISR without taking leadership away: adopt theirs, never clobber it.
                logger.info("%sCached zkVersion %d not equal to that in zookeeper (%d), adopting its ISR [%s]",
                            self._log_prefix, update.state.zk_version, current.zk_version, describe_isr(current.isr))
                self.in_sync_replica_ids = frozenset(current.isr)
                self.zk_version = current.zk_version
            else:
                # Leadership moved on in ZooKeeper: the controller's LeaderAndIsr will say what to do.
                logger.info("%sCached zkVersion %d not equal to that in zookeeper, skip updating ISR",
                            self._log_prefix, update.state.zk_version)
            self._track_followers_behind()
            return self._maybe_increment_leader_hw(self.log)

    def _maybe_increment_leader_hw(self, log: Log) -> bool:
        """HW = min LEO over the ISR; it only moves forward (or learns its position at the same offset)."""
        old_hw = self._high_watermark
        new_hw = leader_high_watermark(old_hw, log.log_end_offset_metadata, self.remote_replicas.values(),
                                       self.maximal_isr)
        if new_hw is None:
            return False
        self._high_watermark = new_hw
        moved = new_hw.message_offset > old_hw.message_offset
        if moved:
            log.on_high_watermark_updated(new_hw.message_offset)
        return moved

    def _high_watermark_metadata(self, log: Log) -> LogOffsetMetadata:
        """The high watermark with its place in the log, found by a read when only the offset is known."""
        hw = self._high_watermark
        if position_known(hw):
            return hw
        if hw.message_offset == log.log_end_offset:
            full = log.log_end_offset_metadata
        else:
            full = log.read(hw.message_offset, 1, min_one_message=False).fetch_offset_metadata
        self._high_watermark = full
        return full

    def _last_stable_offset_metadata(self, log: Log) -> LogOffsetMetadata:
        """The last stable offset with its place in the log (a delayed READ_COMMITTED fetch measures bytes up
        to it): the high watermark's when they are equal, else found by a read (Kafka's
        fetchLastStableOffsetMetadata), remembered until the LSO moves."""
        high_watermark = self._high_watermark_metadata(log)
        offset = log.last_stable_offset(high_watermark.message_offset)
        if offset == high_watermark.message_offset:
            return high_watermark
        cached = self._last_stable_offset_cache
        if cached is not None and cached[0] == log.truncation_count and cached[1].message_offset == offset:
            return cached[1]
        found = log.read(offset, 1, min_one_message=False).fetch_offset_metadata
        self._last_stable_offset_cache = (log.truncation_count, found)
        return found

    # ------------------------------------------------------------------ follower: what the fetcher does

    def _follower_log_or_error(self, leader_epoch: int) -> Log:
        """The log, if this replica still follows in `leader_epoch`: a fetch begun before a LeaderAndIsr must
        not write into the state that LeaderAndIsr made."""
        if self.is_leader or self.log is None or self.leader_epoch != leader_epoch:
            raise KafkaError(f"Replica {self.local_broker_id} no longer follows {self.topic_partition} in leader"
                             f" epoch {leader_epoch} (now {self.leader_epoch}, leader {self.leader_replica_id})",
                             ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return self.log

    def follower_offsets(self, leader_epoch: int) -> tuple[int, int]:
        """(log start offset, log end offset) of the follower's log, for the next fetch."""
        with self._lock:
            log = self._follower_log_or_error(leader_epoch)
            return log.log_start_offset, log.log_end_offset

    def latest_epoch(self, leader_epoch: int) -> int | None:
        """The epoch of the follower's latest records, None if it knows none (truncate to the HW instead)."""
        with self._lock:
            cache = self._follower_log_or_error(leader_epoch).leader_epoch_cache
            epoch = cache.latest_epoch if isinstance(cache, LeaderEpochFileCache) else UNDEFINED_EPOCH
            return None if epoch == UNDEFINED_EPOCH else epoch

    def end_offset_for_epoch(self, leader_epoch: int, epoch: int) -> tuple[int, int] | None:
        """Kafka's Log.endOffsetForEpoch: (largest known epoch <= `epoch`, its end offset) in the follower's log."""
        with self._lock:
            log = self._follower_log_or_error(leader_epoch)
            cache = log.leader_epoch_cache
            if not isinstance(cache, LeaderEpochFileCache):
                return None
            found_epoch, end_offset = cache.end_offset_for(epoch, log.log_end_offset)
            return None if end_offset == UNDEFINED_EPOCH_OFFSET else (found_epoch, end_offset)

    def truncate_to(self, leader_epoch: int, offset: int) -> int:
        """Drop the follower's records from `offset` on; returns the new log end offset, which is below
        `offset` when a batch straddled it (batches go whole)."""
        with self._lock:
            log = self._follower_log_or_error(leader_epoch)
            if offset < self.high_watermark:
                logger.warning("%sTruncating to offset %d below high watermark %d", self._log_prefix, offset,
                               self.high_watermark)
            before = log.log_end_offset
            log.truncate_to(offset)
            if log.log_end_offset < before:
                EVENTS.record(TRUNCATION, f"follower {self.local_broker_id} truncated from {before} to"
                              f" {log.log_end_offset} (asked: {offset}, leader epoch {leader_epoch})",
                              *self.topic_partition)
            if self.high_watermark > log.log_end_offset:
                self._high_watermark = offset_only(log.log_end_offset)
            return log.log_end_offset

    def truncate_fully_and_start_at(self, leader_epoch: int, offset: int) -> None:
        with self._lock:
            log = self._follower_log_or_error(leader_epoch)
            before = log.log_end_offset
            log.truncate_fully_and_start_at(offset)
            self._high_watermark = offset_only(offset)
            EVENTS.record(TRUNCATION, f"follower {self.local_broker_id} emptied its log (endOffset {before}) to"
                          f" start at the leader's log start offset {offset}", *self.topic_partition)

    def append_records_to_follower(self, leader_epoch: int, fetch_offset: int, records: bytes,
                                   leader_high_watermark: int, leader_log_start_offset: int) -> LogAppendInfo:
        """Append the leader's batches with its offsets; follower HW = min(own LEO, leader HW); log start
        follows the leader's (Kafka's ReplicaFetcherThread.processPartitionData)."""
        with self._lock:
            log = self._follower_log_or_error(leader_epoch)
            if fetch_offset != log.log_end_offset:
                # The log moved under a fetch in flight: drop the response rather than write it at a wrong place.
                raise KafkaError(f"Offset mismatch for partition {self.topic_partition}: fetched offset ="
                                 f" {fetch_offset}, log end offset = {log.log_end_offset}.",
                                 ErrorCode.UNKNOWN_SERVER_ERROR)
            info = log.append_as_follower(records)
            self._high_watermark = offset_only(follower_high_watermark(leader_high_watermark, log.log_end_offset))
            log.on_high_watermark_updated(self.high_watermark)
            log.maybe_increment_log_start_offset(min(leader_log_start_offset, self.high_watermark))
            return info

    # ------------------------------------------------------------------ reads

    def _leader_log_or_error(self) -> Log:
        if not self.is_leader or self.log is None:
            raise KafkaError(f"Leader not local for partition {self.topic_partition} on broker"
                             f" {self.local_broker_id}", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return self.log

    def _local_log_with_epoch_or_error(self, current_leader_epoch: int, fetch_only_from_leader: bool) -> Log:
        """KIP-320 fencing, then the role check: a request from an older or newer epoch than ours fails."""
        if current_leader_epoch != UNKNOWN_LEADER_EPOCH:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError(f"The leader epoch in the request ({current_leader_epoch}) is older than the"
                                 f" current leader epoch {self.leader_epoch} of {self.topic_partition}",
                                 ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError(f"The leader epoch in the request ({current_leader_epoch}) is newer than the"
                                 f" current leader epoch {self.leader_epoch} of {self.topic_partition}",
                                 ErrorCode.UNKNOWN_LEADER_EPOCH)
        if fetch_only_from_leader:
            return self._leader_log_or_error()
        if self.log is None:
            raise KafkaError(f"Replica {self.local_broker_id} has no log for partition {self.topic_partition}",
                             ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return self.log

    def read_records(self, fetch_offset: int, current_leader_epoch: int, max_bytes: int,
                     isolation: FetchIsolation, fetch_only_from_leader: bool, min_one_message: bool) -> LogReadInfo:
        with self._lock:
            log = self._local_log_with_epoch_or_error(current_leader_epoch, fetch_only_from_leader)
            # Offsets as they were before the read: an append racing with it must not make the
            # response claim a high watermark past the records it carries.
            high_watermark = self.high_watermark
            log_start_offset = log.log_start_offset
            log_end_offset = log.log_end_offset
            last_stable_offset = log.last_stable_offset(high_watermark)
            max_offset = {FetchIsolation.HIGH_WATERMARK: high_watermark,
                          FetchIsolation.TXN_COMMITTED: last_stable_offset}.get(isolation)
            fetched = log.read(fetch_offset, max_bytes, max_offset, min_one_message)
            aborted = (log.collect_aborted_transactions(fetch_offset)
                       if isolation is FetchIsolation.TXN_COMMITTED else None)
            return LogReadInfo(fetched, high_watermark, log_start_offset, log_end_offset, last_stable_offset,
                               aborted)

    def active_producers(self) -> list[ActiveProducer]:
        """Kafka's Partition.activeProducerState: this replica's producers, a follower's as well as the leader's
        (kafka-transactions.sh describe-producers --broker-id reads a follower's); NOT_LEADER_OR_FOLLOWER
        without a local log."""
        log = self.log
        if log is None:
            raise KafkaError(f"Broker {self.local_broker_id} has no log of {self.topic_partition}",
                             ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return log.active_producers()

    def fetch_offset_snapshot(self, current_leader_epoch: int, fetch_only_from_leader: bool) -> LogOffsetSnapshot:
        with self._lock:
            log = self._local_log_with_epoch_or_error(current_leader_epoch, fetch_only_from_leader)
            return LogOffsetSnapshot(log.log_start_offset, log.log_end_offset_metadata,
                                     self._high_watermark_metadata(log), self._last_stable_offset_metadata(log))

    def fetch_offset_for_timestamp(self, timestamp: int, isolation: FetchIsolation | None,
                                   current_leader_epoch: int) -> TimestampAndOffset | None:
        """ListOffsets: EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP (the record with the largest
        timestamp, if below the last fetchable offset, as Kafka's Partition.fetchOffsetForTimestamp filters any
        lookup) or the first record at or after `timestamp`.

        `isolation` is None for a replica, which sees the log end; READ_UNCOMMITTED consumers see the high
        watermark, READ_COMMITTED ones the last stable offset.
        """
        with self._lock:
            log = self._local_log_with_epoch_or_error(current_leader_epoch, fetch_only_from_leader=True)
            last_fetchable = (log.log_end_offset if isolation is None
                              else log.last_stable_offset(self.high_watermark)
                              if isolation is FetchIsolation.TXN_COMMITTED else self.high_watermark)
            # A new leader whose HW has not caught up with its epoch's start would answer a consumer
            # with an offset lower than what it already acknowledged as leader before: Kafka's
            # OFFSET_NOT_AVAILABLE makes the client retry instead.
            lagging = (isolation is not None and self.leader_epoch_start_offset is not None
                       and self.leader_epoch_start_offset > self.high_watermark)
            if timestamp == LATEST_TIMESTAMP:
                if lagging:
                    raise self._offset_not_available()
                return TimestampAndOffset(NO_TIMESTAMP, last_fetchable, self.leader_epoch)
            if timestamp == EARLIEST_TIMESTAMP:
                cache = log.leader_epoch_cache
                earliest = cache.earliest_entry if isinstance(cache, LeaderEpochFileCache) else None
                epoch = (earliest.epoch if earliest is not None and earliest.start_offset <= log.log_start_offset
                         else UNDEFINED_EPOCH)
                return TimestampAndOffset(NO_TIMESTAMP, log.log_start_offset, epoch)
            found = (log.fetch_offset_of_max_timestamp() if timestamp == MAX_TIMESTAMP
                     else log.fetch_offset_by_timestamp(timestamp))
            if found is not None and found.offset < last_fetchable:
                return found
            if lagging:
                raise self._offset_not_available()
            return None

    def _offset_not_available(self) -> KafkaError:
        return KafkaError(
            f"Failed to fetch offsets for partition {self.topic_partition} with leader epoch {self.leader_epoch}"
            f" as its high watermark ({self.high_watermark}) is lagging behind the start offset from the"
            f" beginning of this epoch ({self.leader_epoch_start_offset})", ErrorCode.OFFSET_NOT_AVAILABLE)

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (epoch, end offset) from the leader's epoch cache (-1, -1 when unknown)."""
        with self._lock:
            log = self._local_log_with_epoch_or_error(current_leader_epoch, fetch_only_from_leader=True)
            cache = log.leader_epoch_cache
            if not isinstance(cache, LeaderEpochFileCache):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            return cache.end_offset_for(leader_epoch, log.log_end_offset)

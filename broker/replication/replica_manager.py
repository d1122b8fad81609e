"""ReplicaManager: the partitions this broker hosts and the requests that touch them (Kafka 2.x's
server/ReplicaManager.scala).

- LeaderAndIsr (becomeLeaderOrFollower): fenced by the controller epoch, then
  per partition by the leader epoch; makes partitions leaders or followers.
- StopReplica: stops hosting partitions, deleting their logs when asked.
- UpdateMetadata: stale-checked here, stored in the MetadataCache.
- DeleteRecords (delete_records): the leaders move their log start offsets
  and wait in a purgatory until their in-sync followers have moved theirs.
- Produce (append_records) and Fetch (fetch_messages), with acks=all produces
  and long-polling fetches parked in purgatories and completed by the events
  that satisfy them: appends, high watermark moves, ISR changes and
  leadership changes.
- Replication: become-follower hands partitions to the ReplicaFetcherManager
  (become-leader and StopReplica take them back); a follower's fetch updates
  its state at the leader, and may let it rejoin the ISR; the periodic
  maybe_shrink_isr drops followers that lag (replica.lag.time.max.ms).
- DescribeLogDirs (describe_log_dirs): each log dir's replicas, their sizes and lags (log_dirs.py).
- Log dir failure (handle_log_dir_failure): the partitions on a dir that went
  offline stop fetching and become Offline (Kafka's HostedPartition.Offline):
  every request for them, the controller's included, is KAFKA_STORAGE_ERROR
  until the broker restarts.

Requests run in the caller's thread without I/O other than the logs'; the
gRPC adapter (broker/api/grpc_apis.py) turns requests into these calls. LeaderAndIsr
and StopReplica create, fsync and delete files, so the adapter runs them, and the
UpdateMetadata that follows them, on one worker thread in arrival order (Kafka's
request handler threads: the network threads never wait on disk);
`_replica_state_change_lock` (Kafka's replicaStateChangeLock) applies them, and a
log dir failure, one at a time. ISR writes go
to ZooKeeper, so an expansion found on the request path is done on the
`isr_update_executor`, and shrinking runs on the scheduler's worker thread.
Answers go to callbacks, which may run inside the call (the common case) or
later, from whatever completes a delayed operation.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from broker.config.log_config import LogConfig
from broker.config.metadata_cache import LiveBroker, MetadataCache, UpdateMetadataPartitionState
from broker.config.metrics import BrokerMetrics
from broker.config.topic_config import TopicConfig
from broker.fetcher.protocol import BrokerEndPoint, InitialFetchState
from broker.fetcher.thread import PartitionLookup
from broker.log.log import AppendOrigin, TimestampAndOffset
from broker.log.log_dir_failure import LogDirFailedError
from broker.log.manager import LogManager
from broker.log.producer_state import ActiveProducer
from broker.purgatory.purgatory import DelayedOperationPurgatory
from broker.purgatory.timer import Timer
from broker.replication.delayed_delete_records import (
    DelayedDeleteRecords,
    DeleteRecordsPartitionStatus,
    DeleteRecordsResponseCallback,
)
from broker.replication.delayed_fetch import (
    DelayedFetch,
    FetchParams,
    FetchResponseCallback,
    FetchResults,
    LogReadResult,
    PartitionFetchInfo,
)
from broker.replication.delayed_produce import (
    DelayedProduce,
    ProducePartitionResponse,
    ProducePartitionStatus,
    ProduceResponseCallback,
)
from broker.replication.fetch_session import DEFAULT_MAX_SLOTS, FetchContext, FetchSessionCache
from broker.replication.local_log_read import ChunkedReader, LocalLogRead
from broker.replication.log_dirs import LogDirInfo, describe_log_dirs
from broker.replication.partition import FetchIsolation, HighWatermarkCheckpoints, LeaderAndIsrPartitionState, Partition
from broker.replication.partition_state_store import PartitionStateStore
from broker.replication.rules import is_valid_required_acks
from proto.errors import ErrorCode, KafkaError, KafkaStorageError
from proto.types import TopicPartition
from zk.paths import INITIAL_CONTROLLER_EPOCH, validate_topic

logger = logging.getLogger(__name__)
state_change_logger = logging.getLogger("state.change.logger")



@dataclass(frozen=True, slots=True)
class ControllerResponse:
    """The outcome of a LeaderAndIsr / StopReplica: a request-level error, then one per partition."""

    error: ErrorCode
    partition_errors: dict[TopicPartition, ErrorCode]


class FetcherManager(Protocol):
    """What the ReplicaManager asks of the follower side (broker/fetcher/manager.py)."""

    def add_fetcher_for_partitions(self, initial: Mapping[TopicPartition, InitialFetchState]) -> None: ...

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None: ...

    def shutdown_idle_fetcher_threads(self) -> None: ...

    def log_start_offset_moved(self, tp: TopicPartition) -> None: ...

    def shutdown(self) -> None: ...

    def max_lag(self) -> int: ...

    def failed_partitions_count(self) -> int: ...


class LeadershipListener(Protocol):
    """Told, after a LeaderAndIsr or StopReplica was applied, which partitions this broker now leads (with their
    leader epoch) and which it stopped leading (the epoch; None from a StopReplica, which carries none). Kafka's
    onLeadershipChange: the group coordinator loads or drops its __consumer_offsets partitions on it. The server
    injects it, so this package never imports a coordinator."""

    def __call__(self, became_leader: Sequence[tuple[TopicPartition, int]],
                 resigned: Sequence[tuple[TopicPartition, int | None]]) -> None: ...


class ReplicaManager:
    def __init__(self, broker_id: int, *, log_manager: LogManager, metadata_cache: MetadataCache,
                 default_topic_config: TopicConfig, timer: Timer, time_ms: Callable[[], int],
                 fetcher_manager: Callable[[PartitionLookup], FetcherManager], state_store: PartitionStateStore,
                 replica_lag_time_max_ms: int, isr_update_executor: Executor, metrics: BrokerMetrics,
                 fetch_session_cache_slots: int = DEFAULT_MAX_SLOTS) -> None:
        self.broker_id = broker_id
        self.controller_epoch = INITIAL_CONTROLLER_EPOCH
        self._log_manager = log_manager
        self._metadata_cache = metadata_cache
        self._default_topic_config = default_topic_config
        self._time_ms = time_ms
        self._partitions: dict[TopicPartition, Partition] = {}
        # The leaders with an in-sync follower behind their log end, kept by each Partition as it changes: the only
        # partitions the isr-expiration task looks at (at 10,000 idle partitions it walked all of them).
        self._followers_behind: set[Partition] = set()
        # Kafka's replicaStateChangeLock: one controller request (or log dir failure) changes partition states
        # at a time, whichever thread applies it.
        self._replica_state_change_lock = threading.RLock()
        # Partitions whose log dir went offline (Kafka's HostedPartition.Offline): hosted, but unusable.
        self._offline_partitions: set[TopicPartition] = set()
        self.replica_fetcher_manager = fetcher_manager(self._partitions.get)
        self._state_store = state_store
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._isr_update_executor = isr_update_executor
        metrics.bind_replica_manager(
            under_replicated=lambda: sum(p.is_under_replicated for p in self.hosted_partitions()),
            under_min_isr=lambda: sum(p.is_under_min_isr for p in self.hosted_partitions()),
            leader_count=lambda: sum(p.is_leader for p in self.hosted_partitions()),
            partition_count=lambda: len(self._partitions))
        metrics.bind_fetcher_manager(max_lag=self.replica_fetcher_manager.max_lag,
                                     failed_partitions_count=self.replica_fetcher_manager.failed_partitions_count)
        self.delayed_produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory(
            "Produce", timer)
        self.delayed_fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory(
            "Fetch", timer)
        # KIP-227: what each follower's session was last sent, and which of its partitions changed since.
        self.fetch_session_cache = FetchSessionCache(fetch_session_cache_slots, time_ms)
        metrics.bind_fetch_session_cache(sessions=self.fetch_session_cache.__len__,
                                         partitions_cached=self.fetch_session_cache.total_partitions)
        self.delayed_delete_records_purgatory: DelayedOperationPurgatory[DelayedDeleteRecords] = \
            DelayedOperationPurgatory("DeleteRecords", timer)
        metrics.bind_purgatories({purgatory.name: purgatory.watched for purgatory in (
            self.delayed_produce_purgatory, self.delayed_fetch_purgatory, self.delayed_delete_records_purgatory)})
        # Kafka starts checkpointing high watermarks at the first LeaderAndIsr: before it, no partition
        # is hosted, and a checkpoint would wipe the high watermarks of every log on disk.
        self._high_watermark_checkpointing = False
        self._leadership_listeners: list[LeadershipListener] = []
        # Where a fetch's read runs, a chunk at a time (the server's event loop); None: read in one go.
        self.chunked_reader: ChunkedReader | None = None

    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        self._leadership_listeners.append(listener)

    def _notify_leadership_change(self, became_leader: Sequence[tuple[TopicPartition, int]],
                                  resigned: Sequence[tuple[TopicPartition, int | None]]) -> None:
        if not became_leader and not resigned:
            return
        for listener in self._leadership_listeners:
            try:
                listener(became_leader, resigned)
            except Exception:
                logger.exception("A leadership listener failed on %d new leaders and %d resignations",
                                 len(became_leader), len(resigned))

    # ------------------------------------------------------------------ partitions

    def update_topic_config(self, topic: str, config: TopicConfig) -> None:
        """A topic's config changed live: every partition of it hosted here reads the new values from now on."""
        for partition in self.hosted_partitions():
            if partition.topic_partition.topic == topic:
                partition.update_topic_config(config)
                # A changed min.insync.replicas decides waiting acks=all produces now, not at their timeout.
                self._complete_delayed_requests(partition.topic_partition)

    def set_default_topic_config(self, config: TopicConfig) -> None:
        """The config of partitions of topics without overrides, after a dynamic broker default changed."""
        self._default_topic_config = config

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self._partitions.get(tp)

    def get_log_config(self, tp: TopicPartition) -> LogConfig | None:
        """The config of this broker's log of `tp`; None when it hosts none (Kafka's getLogConfig)."""
        partition = self._partitions.get(tp)
        log = None if partition is None else partition.log
        return None if log is None else log.config

    def hosted_partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def get_partition_or_error(self, tp: TopicPartition) -> Partition:
        partition = self._partitions.get(tp)
        if partition is not None:
            return partition
        if tp in self._offline_partitions:
            raise KafkaStorageError(f"Partition {tp} is in an offline log directory")
        if self._metadata_cache.contains(tp):
            # The topic exists but this broker is not a replica: the client's metadata is stale.
            raise KafkaError(f"Broker {self.broker_id} is not a replica of {tp}", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        raise KafkaError(f"This server does not host this topic-partition: {tp}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    # ------------------------------------------------------------------ controller requests

    def become_leader_or_follower(self, controller_id: int, controller_epoch: int,
                                  partition_states: Sequence[tuple[TopicPartition, LeaderAndIsrPartitionState]],
                                  live_leaders: Iterable[BrokerEndPoint],
                                  topic_configs: Mapping[str, TopicConfig]) -> ControllerResponse:
        """Apply a LeaderAndIsr. `topic_configs` holds the configs of topics whose partitions are new here;
        `live_leaders` are the leaders of its partitions that are alive, and where to fetch from them."""
        with self._replica_state_change_lock:
            return self._become_leader_or_follower(controller_id, controller_epoch, partition_states, live_leaders,
                                                   topic_configs)

    def _become_leader_or_follower(self, controller_id: int, controller_epoch: int,
                                   partition_states: Sequence[tuple[TopicPartition, LeaderAndIsrPartitionState]],
                                   live_leaders: Iterable[BrokerEndPoint],
                                   topic_configs: Mapping[str, TopicConfig]) -> ControllerResponse:
        if controller_epoch < self.controller_epoch:
            state_change_logger.warning(
                "Ignoring LeaderAndIsr request from controller %d with epoch %d since its controller epoch is"
                " older than the latest epoch %d", controller_id, controller_epoch, self.controller_epoch)
            return ControllerResponse(ErrorCode.STALE_CONTROLLER_EPOCH, {})
        self.controller_epoch = controller_epoch
        errors: dict[TopicPartition, ErrorCode] = {}
        to_apply: list[tuple[Partition, LeaderAndIsrPartitionState]] = []
        hosted_before = len(self._partitions)
        for tp, state in partition_states:
            error = _invalid_partition(tp)
            if error is not None:
                errors[tp] = error
                continue
            if tp in self._offline_partitions:
                state_change_logger.warning(
                    "Ignoring LeaderAndIsr request from controller %d with epoch %d for partition %s as the local"
                    " replica for the partition is in an offline log directory", controller_id, controller_epoch, tp)
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            partition = self._partitions.get(tp)
            if partition is None:
                partition = self._new_partition(tp, topic_configs.get(tp.topic, self._default_topic_config))
            if state.leader_epoch > partition.leader_epoch:
                if self.broker_id in state.replicas:
                    to_apply.append((partition, state))
                else:
                    state_change_logger.warning(
                        "Ignoring LeaderAndIsr request from controller %d with epoch %d for partition %s as itself"
                        " is not in assigned replica list %s", controller_id, controller_epoch, tp,
                        list(state.replicas))
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                # Kafka 2.x answers both an older and an equal leader epoch this way: the request is late.
                state_change_logger.warning(
                    "Ignoring LeaderAndIsr request from controller %d with epoch %d for partition %s since its"
                    " associated leader epoch %d is not higher than the current leader epoch %d", controller_id,
                    controller_epoch, tp, state.leader_epoch, partition.leader_epoch)
                errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
        checkpoints = self._lazy_high_watermark_checkpoints()
        live = {leader.id: leader for leader in live_leaders}
        to_fetch: dict[TopicPartition, InitialFetchState] = {}
        # Kafka's order: makeLeaders, then makeFollowers.
        to_apply.sort(key=lambda item: item[1].leader != self.broker_id)
        # The fetchers of every partition taking a role stop first, in one call (Kafka's makeLeaders and
        # makeFollowers): no fetcher may append a late response once its replica leads, and a follower fetches
        # again from its new state. A call per partition took every fetcher thread's lock and logged a line each,
        # thousands of times when a dead broker's partitions move here, all the while sharing the GIL with the loop.
        self.replica_fetcher_manager.remove_fetcher_for_partitions(
            partition.topic_partition for partition, state in to_apply
            if state.leader == self.broker_id or state.leader in live)
        became_leader: list[tuple[TopicPartition, int]] = []
        resigned: list[tuple[TopicPartition, int | None]] = []
        created = 0
        for partition, state in to_apply:
            tp = partition.topic_partition
            had_log = partition.log is not None
            errors[tp] = self._apply_state(partition, state, live, checkpoints, to_fetch)
            if errors[tp] is ErrorCode.NONE:
                (became_leader if state.leader == self.broker_id else resigned).append((tp, state.leader_epoch))
            if not had_log and partition.log is not None:
                created += 1
                if created % FREEZE_EVERY_CREATED == 0:
                    freeze_long_lived_objects()
        if to_fetch:
            self.replica_fetcher_manager.add_fetcher_for_partitions(to_fetch)
        self.replica_fetcher_manager.shutdown_idle_fetcher_threads()
        self._high_watermark_checkpointing = True
        if len(self._partitions) > hosted_before:
            freeze_long_lived_objects()
        self._notify_leadership_change(became_leader, resigned)
        return ControllerResponse(ErrorCode.NONE, errors)

    def _new_partition(self, tp: TopicPartition, topic_config: TopicConfig) -> Partition:
        partition = Partition(tp, local_broker_id=self.broker_id, log_manager=self._log_manager,
                              topic_config=topic_config, time_ms=self._time_ms,
                              followers_behind=self._followers_behind)
        self._partitions[tp] = partition
        return partition

    def _apply_state(self, partition: Partition, state: LeaderAndIsrPartitionState,
                     live_leaders: Mapping[int, BrokerEndPoint], checkpoints: HighWatermarkCheckpoints,
                     to_fetch: dict[TopicPartition, InitialFetchState]) -> ErrorCode:
        tp = partition.topic_partition
        try:
            if state.leader == self.broker_id:
                _, high_watermark_moved = partition.make_leader(state, checkpoints)
                if high_watermark_moved:
                    self._complete_delayed_requests(tp)
            elif (leader := live_leaders.get(state.leader)) is not None:
                if partition.make_follower(state, checkpoints):
                    # From the high watermark: where truncation falls back to when epochs cannot decide.
                    to_fetch[tp] = InitialFetchState(leader, state.leader_epoch, partition.high_watermark)
                # Requests waiting on this broker as leader will not be satisfied here any more.
                self._complete_delayed_requests(tp)
            else:
                # Kafka (KAFKA-1647): host the replica anyway, so its high watermark stays checkpointed.
                state_change_logger.error(
                    "Cannot make %s a follower of broker %d in leader epoch %d: the leader is not alive",
                    tp, state.leader, state.leader_epoch)
                partition.create_log_if_not_exists(checkpoints, state.is_new)
        except (KafkaError, OSError) as e:
            if isinstance(e, KafkaError) and e.code is not ErrorCode.KAFKA_STORAGE_ERROR:
                state_change_logger.error("Failed to apply the state of %s: %s", tp, e)
                return e.code
            self._on_storage_error(partition, e)
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    def _on_storage_error(self, partition: Partition, error: KafkaError | OSError) -> None:
        """Kafka's "the replica for the partition is offline due to disk error": the partition is Offline from now
        on, and its dir is reported if nothing below did (an epoch checkpoint written by the role change)."""
        tp = partition.topic_partition
        state_change_logger.error("Skipped the state change of %s since the replica for the partition is offline due"
                                  " to disk error %s", tp, error)
        if partition.log is not None and not isinstance(error, LogDirFailedError):
            self._log_manager.failure_channel.maybe_add_offline_log_dir(
                partition.log.dir.parent, f"Error while changing the state of {tp}", error)
        self.replica_fetcher_manager.remove_fetcher_for_partitions([tp])
        self._partitions.pop(tp, None)
        self._offline_partitions.add(tp)
        self._notify_leadership_change([], [(tp, None)])

    def _lazy_high_watermark_checkpoints(self) -> HighWatermarkCheckpoints:
        """Kafka's LazyOffsetCheckpoints: the files are read once, and only if a new log needs them."""
        cache: dict[TopicPartition, int] | None = None

        def lookup(tp: TopicPartition) -> int | None:
            nonlocal cache
            if cache is None:
                cache = self._log_manager.read_high_watermarks()
            return cache.get(tp)

        return lookup

    def stop_replicas(self, controller_id: int, controller_epoch: int, delete_partitions: bool,
                      partitions: Iterable[TopicPartition]) -> ControllerResponse:
        with self._replica_state_change_lock:
            return self._stop_replicas(controller_id, controller_epoch, delete_partitions, partitions)

    def _stop_replicas(self, controller_id: int, controller_epoch: int, delete_partitions: bool,
                       partitions: Iterable[TopicPartition]) -> ControllerResponse:
        if controller_epoch < self.controller_epoch:
            state_change_logger.warning(
                "Ignoring StopReplica request from controller %d with epoch %d since its controller epoch is"
                " older than the latest epoch %d", controller_id, controller_epoch, self.controller_epoch)
            return ControllerResponse(ErrorCode.STALE_CONTROLLER_EPOCH, {})
        self.controller_epoch = controller_epoch
        partitions = list(partitions)
        state_change_logger.info(
            "Handling StopReplica request from controller %d epoch %d for %d partitions (delete=%s): %s",
            controller_id, controller_epoch, len(partitions), str(delete_partitions).lower(),
            ",".join(map(str, partitions)))
        self.replica_fetcher_manager.remove_fetcher_for_partitions(partitions)
        errors: dict[TopicPartition, ErrorCode] = {}
        logs_to_delete: list[TopicPartition] = []
        for tp in partitions:
            error = _invalid_partition(tp)
            if error is None and tp in self._offline_partitions:
                error = ErrorCode.KAFKA_STORAGE_ERROR
            elif error is None:
                if delete_partitions and self._stop_replica_for_deletion(tp):
                    logs_to_delete.append(tp)
                # Waiting requests fail now (not leader / unknown) instead of at their timeout.
                self._complete_delayed_requests(tp)
                error = ErrorCode.NONE
            errors[tp] = error
        for tp, e in self._log_manager.delete_logs(logs_to_delete).items():
            state_change_logger.error("Storage error stopping replica %s: %s", tp, e)
            errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
        self.replica_fetcher_manager.shutdown_idle_fetcher_threads()
        if delete_partitions:
            # The deleted replicas' cycles (frozen with them) are left to the next full collection to find.
            gc.unfreeze()
        self._notify_leadership_change([], [(tp, None) for tp in partitions if errors[tp] is ErrorCode.NONE])
        return ControllerResponse(ErrorCode.NONE, errors)

    def _stop_replica_for_deletion(self, tp: TopicPartition) -> bool:
        """Forget the partition; whether it has a log to delete (also one of a topic deleted while this broker was
        down, which no partition hosts)."""
        partition = self._partitions.pop(tp, None)
        if partition is not None:
            partition.delete()
        return self._log_manager.get_log(tp) is not None

    def maybe_update_metadata_cache(self, controller_id: int, controller_epoch: int,
                                    partition_states: Iterable[tuple[TopicPartition, UpdateMetadataPartitionState]],
                                    live_brokers: Iterable[LiveBroker]) -> ErrorCode:
        with self._replica_state_change_lock:
            return self._maybe_update_metadata_cache(controller_id, controller_epoch, partition_states, live_brokers)

    def _maybe_update_metadata_cache(self, controller_id: int, controller_epoch: int,
                                     partition_states: Iterable[tuple[TopicPartition, UpdateMetadataPartitionState]],
                                     live_brokers: Iterable[LiveBroker]) -> ErrorCode:
        if controller_epoch < self.controller_epoch:
            state_change_logger.warning(
                "Ignoring UpdateMetadata request from controller %d with epoch %d since its controller epoch is"
                " older than the latest epoch %d", controller_id, controller_epoch, self.controller_epoch)
            return ErrorCode.STALE_CONTROLLER_EPOCH
        deleted = self._metadata_cache.update_metadata(controller_id, partition_states, live_brokers)
        self.controller_epoch = controller_epoch
        if deleted:
            logger.info("Deleted partitions from the metadata cache: %s", [str(tp) for tp in deleted])
        return ErrorCode.NONE

    # ------------------------------------------------------------------ produce

    def append_records(self, timeout_ms: int, required_acks: int, entries: Sequence[tuple[TopicPartition, bytes]],
                       response_callback: ProduceResponseCallback,
                       origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
        """Append to the leader logs; answer now, or once the high watermark passes the appends (acks=-1).
        `origin` COORDINATOR: the transaction coordinator's markers."""
        if not is_valid_required_acks(required_acks):
            response_callback({tp: ProducePartitionResponse(ErrorCode.INVALID_REQUIRED_ACKS)
                               for tp, _ in entries})
            return
        status: dict[TopicPartition, ProducePartitionStatus] = {}
        for tp, records in entries:
            status[tp] = self._append_to_local_log(tp, records, required_acks, origin)
        any_appended = any(s.response.error is ErrorCode.NONE for s in status.values())
        if required_acks == -1 and any_appended:
            delayed = DelayedProduce(timeout_ms, status, self.get_partition_or_error, response_callback)
            self.delayed_produce_purgatory.try_complete_else_watch(delayed, status)
        else:
            response_callback({tp: s.response for tp, s in status.items()})

    def _append_to_local_log(self, tp: TopicPartition, records: bytes, required_acks: int,
                             origin: AppendOrigin) -> ProducePartitionStatus:
        try:
            if not records:
                raise KafkaError("Produce requests must have at least one record batch", ErrorCode.INVALID_RECORD)
            partition = self.get_partition_or_error(tp)
            info, high_watermark_moved = partition.append_records_to_leader(records, required_acks, origin)
            log_start_offset = partition.log.log_start_offset if partition.log is not None else -1
        except KafkaError as e:
            return ProducePartitionStatus(-1, ProducePartitionResponse(e.code, error_message=str(e)))
        except Exception as e:
            logger.exception("Error processing append operation on partition %s", tp)
            return ProducePartitionStatus(-1, ProducePartitionResponse(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                                       error_message=repr(e)))
        if high_watermark_moved:
            self._complete_delayed_requests(tp)
        else:
            # Followers long-polling at the old log end can read now.
            self._wake_fetches(tp)
        return ProducePartitionStatus(
            info.last_offset + 1,
            ProducePartitionResponse(ErrorCode.NONE, info.first_offset, info.log_append_time, log_start_offset),
        )

    def _complete_delayed_requests(self, tp: TopicPartition) -> None:
        self.delayed_produce_purgatory.check_and_complete(tp)
        self._wake_fetches(tp)
        self.delayed_delete_records_purgatory.check_and_complete(tp)

    def _wake_fetches(self, tp: TopicPartition) -> None:
        """Something a fetch of `tp` would answer changed: fetches waiting on it, and the fetch sessions that
        hold it (the next fetch in each reads it), are told. Every such change comes through here."""
        self.delayed_fetch_purgatory.check_and_complete(tp)
        changed = self.fetch_session_cache.mark_changed(tp)
        partition = self._partitions.get(tp) if changed else None
        for session in changed:
            if partition is not None and session.replica_id >= 0 and session.unchanged_at_ms is not None:
                partition.follower_fetched_unchanged(session.replica_id, int(session.unchanged_at_ms))
            self.delayed_fetch_purgatory.check_and_complete(session.key)

    def log_start_offset_moved(self, tp: TopicPartition) -> None:
        """Retention or DeleteRecords moved `tp`'s log start: its followers and waiting fetches learn it, and
        so does its leader if this broker follows it (its fetcher builds a partition's entry only on a change)."""
        self._wake_fetches(tp)
        self.replica_fetcher_manager.log_start_offset_moved(tp)

    # ------------------------------------------------------------------ delete records

    def delete_records(self, timeout_ms: int, offsets: Mapping[TopicPartition, int],
                       response_callback: DeleteRecordsResponseCallback) -> None:
        """Kafka's deleteRecords: each leader moves its log start offset to the offset (-1: its high
        watermark); the answer waits until the low watermark reaches it on every in-sync replica. Writes the
        log-start-offset-checkpoint (an fsync) before returning: call it off an event loop."""
        status: dict[TopicPartition, DeleteRecordsPartitionStatus] = {}
        for tp, offset in offsets.items():
            try:
                requested, low_watermark = self.get_partition_or_error(tp).delete_records_on_leader(offset)
                status[tp] = DeleteRecordsPartitionStatus(requested, low_watermark, ErrorCode.NONE)
                self.log_start_offset_moved(tp)  # the followers' sessions answer it, and their low watermarks follow
            except KafkaError as e:
                status[tp] = DeleteRecordsPartitionStatus(-1, -1, e.code)
            except OSError as e:
                logger.error("Storage error deleting records of %s: %s", tp, e)
                status[tp] = DeleteRecordsPartitionStatus(-1, -1, ErrorCode.KAFKA_STORAGE_ERROR)
        if any(s.error is ErrorCode.NONE for s in status.values()):
            # Kafka leaves this to the periodic checkpoint; written now, a leader restarted at once does not
            # bring the deleted records back.
            self._log_manager.checkpoint_log_offsets()
            delayed = DelayedDeleteRecords(timeout_ms, status, self.get_partition_or_error, response_callback)
            self.delayed_delete_records_purgatory.try_complete_else_watch(delayed, status)
        else:
            response_callback(status)

    # ------------------------------------------------------------------ fetch

    def fetch_messages(self, params: FetchParams, infos: Sequence[PartitionFetchInfo],
                       response_callback: FetchResponseCallback, context: FetchContext | None = None) -> None:
        """Read now, or park the fetch until min_bytes are readable or max_wait_ms passes. In a fetch session
        (`context`), `infos` are the partitions it named or that changed since its previous fetch; the session's
        other partitions wake the parked fetch through its key (`_wake_fetches`). With a `chunked_reader`, a
        read of many partitions goes on in later callbacks of the loop (local_log_read.py)."""
        if context is not None and params.is_from_follower:
            response_callback = self._reading_again_out_of_isr(params.replica_id, context, response_callback)

        def answer_or_park(results: FetchResults) -> None:
            self._answer_or_park(params, infos, results, response_callback, context)

        self.read_and_answer(params, infos, answer_or_park)

    def _answer_or_park(self, params: FetchParams, infos: Sequence[PartitionFetchInfo], results: FetchResults,
                        response_callback: FetchResponseCallback, context: FetchContext | None) -> None:
        if params.is_from_follower:
            self._update_follower_fetch_state(params.replica_id, results)
        bytes_readable = sum(result.size for _, result in results)
        errored = any(result.error is not ErrorCode.NONE for _, result in results)
        wake_key = None if context is None else context.wake_key
        # Beyond Kafka, which parks it like any other: a fetch that brings its session partitions never answered
        # (a follower's first, or one naming a new topic's or a failed-over broker's thousands) is answered at
        # once. The follower learns their high watermarks a wait sooner, and the leader reads them once, not
        # again at the fetch's expiry after checking them all twice for readable bytes.
        if params.max_wait_ms <= 0 or (not infos and wake_key is None) or bytes_readable >= params.min_bytes \
                or errored or (context is not None and context.adds_partitions):
            response_callback(results)
            return
        status = [(info, result.fetch_offset_metadata) for info, result in results
                  if result.fetch_offset_metadata is not None]
        delayed = DelayedFetch(params, status, self, response_callback, context)
        keys: list[Hashable] = [info.topic_partition for info in infos]
        if wake_key is not None:
            keys.append(wake_key)
        self.delayed_fetch_purgatory.try_complete_else_watch(delayed, keys)

    def _reading_again_out_of_isr(self, replica_id: int, context: FetchContext,
                                  response_callback: FetchResponseCallback) -> FetchResponseCallback:
        """`response_callback`, first telling the session which partitions it read have the follower out of
        their ISR, when it is answered: its next fetch reads them again, whether it names them or not, and so
        retries their ISR expansion as Kafka's read of every session partition does (fetch_session.py)."""
        def answer(results: FetchResults) -> None:
            out_of_isr = []
            for info, _ in results:
                partition = self._partitions.get(info.topic_partition)
                if partition is not None and replica_id not in partition.in_sync_replica_ids:
                    out_of_isr.append(info.topic_partition)
            context.read_again(out_of_isr)
            response_callback(results)
        return answer

    def read_from_local_log(self, params: FetchParams, infos: Sequence[PartitionFetchInfo]) -> FetchResults:
        """Read each partition in request order within the response's max_bytes, in one go (LocalLogRead)."""
        return LocalLogRead(params, infos, self._read).read_all()

    def read_and_answer(self, params: FetchParams, infos: Sequence[PartitionFetchInfo],
                        response_callback: FetchResponseCallback) -> None:
        """`response_callback` with the read of `infos`: on the loop in chunks through the `chunked_reader`,
        or at once without one (unit tests, which drive no loop)."""
        if self.chunked_reader is None:
            response_callback(self.read_from_local_log(params, infos))
        else:
            self.chunked_reader.read(LocalLogRead(params, infos, self._read), response_callback)

    def _read(self, params: FetchParams, info: PartitionFetchInfo, limit: int, min_one_message: bool) -> LogReadResult:
        tp = info.topic_partition
        partition: Partition | None = None
        try:
            partition = self.get_partition_or_error(tp)
            read = partition.read_records(info.fetch_offset, info.current_leader_epoch,
                                          min(max(info.max_bytes, 0), limit), params.isolation,
                                          params.fetch_only_from_leader, min_one_message)
        except KafkaError as e:
            if e.code is ErrorCode.OFFSET_OUT_OF_RANGE and partition is not None and partition.log is not None:
                # The valid range, so the consumer can reset without another round trip.
                return LogReadResult(e.code, high_watermark=partition.high_watermark,
                                     log_start_offset=partition.log.log_start_offset, error_message=str(e))
            return LogReadResult(e.code, error_message=str(e))
        except Exception as e:
            logger.exception("Error processing fetch with max size %d from %s for partition %s", info.max_bytes,
                             "consumer" if info.log_start_offset < 0 else "replica", tp)
            return LogReadResult(ErrorCode.UNKNOWN_SERVER_ERROR, error_message=repr(e))
        return LogReadResult(ErrorCode.NONE, read.fetched_data.records, read.high_watermark, read.log_start_offset,
                             read.log_end_offset, read.fetched_data.fetch_offset_metadata,
                             last_stable_offset=read.last_stable_offset,
                             aborted_transactions=read.aborted_transactions)

    def _update_follower_fetch_state(self, replica_id: int, results: FetchResults) -> None:
        now = self._time_ms()
        to_expand: list[Partition] = []
        for info, result in results:
            partition = self._partitions.get(info.topic_partition)
            if partition is None or result.error is not ErrorCode.NONE or result.fetch_offset_metadata is None:
                continue
            update = partition.update_follower_fetch_state(replica_id, result.fetch_offset_metadata,
                                                           info.log_start_offset, now, result.leader_log_end_offset)
            if update.high_watermark_moved:
                self._complete_delayed_requests(info.topic_partition)
            elif update.log_start_offset_moved:
                self.delayed_delete_records_purgatory.check_and_complete(info.topic_partition)
            if update.needs_isr_expand:
                to_expand.append(partition)
        if to_expand:
            # One task for the fetch, not one per partition: a follower catching up on a new topic's thousands
            # of partitions (after a shrink while their logs were created) brings them back in one fetch.
            self._isr_update_executor.submit(self._maybe_expand_isr, to_expand, replica_id)

    # ------------------------------------------------------------------ the ISR

    def _maybe_expand_isr(self, partitions: Sequence[Partition], replica_id: int) -> None:
        for partition in partitions:
            try:
                high_watermark_moved = partition.maybe_expand_isr(replica_id, self._state_store)
            except Exception:
                # A ZooKeeper hiccup: the follower's next fetch tries again.
                logger.exception("Failed to expand the ISR of %s with replica %d", partition.topic_partition,
                                 replica_id)
                continue
            # Only a moved high watermark can complete a waiting request (Kafka's updateFollowerFetchState): the
            # follower's own fetch, parked on every partition of its session, was checked partition by
            # partition for each of its partitions (quadratic) when each expansion woke it.
            if high_watermark_moved:
                self._complete_delayed_requests(partition.topic_partition)

    def maybe_shrink_isr(self) -> None:
        """The isr-expiration task (every replica.lag.time.max.ms / 2): drop lagging followers of the leaders with an
        in-sync follower behind, the only ones that can have one (Partition keeps that set)."""
        for partition in self._followers_behind.copy():
            if self._partitions.get(partition.topic_partition) is not partition:
                # Taken offline with its log dir, or replaced: no longer hosted, so no longer checked.
                self._followers_behind.discard(partition)
                continue
            try:
                high_watermark_moved = partition.maybe_shrink_isr(self.replica_lag_time_max_ms, self._state_store)
            except Exception:
                logger.exception("Failed to shrink the ISR of %s", partition.topic_partition)
                continue
            if high_watermark_moved:
                # Waiting acks=all produces complete, with NOT_ENOUGH_REPLICAS_AFTER_APPEND if now below min ISR.
                self._complete_delayed_requests(partition.topic_partition)

    # ------------------------------------------------------------------ log dir failure

    def handle_log_dir_failure(self, log_dir: Path) -> list[TopicPartition]:
        """Kafka's ReplicaManager.handleLogDirFailure: the dir's partitions stop fetching and go Offline, requests
        waiting on them fail now (KAFKA_STORAGE_ERROR), then the LogManager drops the dir (halting the broker if
        it was the last). Returns the partitions taken offline; telling the controller is the caller's part."""
        with self._replica_state_change_lock:
            return self._handle_log_dir_failure(log_dir)

    def _handle_log_dir_failure(self, log_dir: Path) -> list[TopicPartition]:
        if log_dir not in self._log_manager.live_log_dirs:
            return []
        logger.warning("Stopping serving replicas in dir %s", log_dir)
        offline = sorted(p.topic_partition for p in self.hosted_partitions()
                         if p.log is not None and p.log.dir.parent == log_dir)
        self.replica_fetcher_manager.remove_fetcher_for_partitions(offline)
        for tp in offline:
            self._offline_partitions.add(tp)
            self._partitions.pop(tp, None)
        for tp in offline:
            self._complete_delayed_requests(tp)
        # A coordinator of groups on these partitions (__consumer_offsets) lets them go: they cannot be written.
        self._notify_leadership_change([], [(tp, None) for tp in offline])
        logger.warning("Broker %d stopped fetcher for partitions %s because they are in the failed log directory %s.",
                       self.broker_id, ",".join(map(str, offline)), log_dir)
        self._log_manager.handle_log_dir_failure(log_dir)
        logger.warning("Stopped serving replicas in dir %s", log_dir)
        return offline

    @property
    def offline_partition_count(self) -> int:
        """kafka.server:type=ReplicaManager,name=OfflineReplicaCount."""
        return len(self._offline_partitions)

    # ------------------------------------------------------------------ offsets

    def fetch_offset_for_timestamp(self, tp: TopicPartition, timestamp: int, isolation: FetchIsolation | None,
                                   current_leader_epoch: int) -> TimestampAndOffset | None:
        return self.get_partition_or_error(tp).fetch_offset_for_timestamp(timestamp, isolation, current_leader_epoch)

    def last_offset_for_leader_epoch(self, tp: TopicPartition, current_leader_epoch: int,
                                     leader_epoch: int) -> tuple[int, int]:
        return self.get_partition_or_error(tp).last_offset_for_leader_epoch(current_leader_epoch, leader_epoch)

    def active_producer_state(self, tp: TopicPartition) -> list[ActiveProducer]:
        """Kafka's ReplicaManager.activeProducerState (DescribeProducers): the producers of this broker's replica,
        or getPartitionOrError's error (NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR, UNKNOWN_TOPIC_OR_PARTITION)."""
        return self.get_partition_or_error(tp).active_producers()

    # ------------------------------------------------------------------ DescribeLogDirs

    def describe_log_dirs(self, partitions: Collection[TopicPartition] | None) -> list[LogDirInfo]:
        """Kafka's describeLogDirs over the LogManager's dirs and logs (None: every replica). Reads the dirs'
        capacity from the file system: call it off the event loop."""
        manager = self._log_manager
        return describe_log_dirs(manager.log_dirs, manager.live_log_dirs, manager.all_logs(), self.high_watermark,
                                 partitions)

    # ------------------------------------------------------------------ periodic work and shutdown

    def high_watermark(self, tp: TopicPartition) -> int | None:
        """For retention: never delete what the high watermark has not passed."""
        partition = self._partitions.get(tp)
        return None if partition is None or partition.log is None else partition.high_watermark

    def checkpoint_high_watermarks(self) -> None:
        """Write `replication-offset-checkpoint` in every log dir (replica.high.watermark.checkpoint.interval.ms)."""
        if not self._high_watermark_checkpointing:
            return
        self._log_manager.write_high_watermarks(
            (p.topic_partition, p.high_watermark) for p in list(self._partitions.values()) if p.log is not None)

    def shutdown(self) -> None:
        """Stop replicating, answer every waiting request, then checkpoint the high watermarks."""
        self.replica_fetcher_manager.shutdown()
        self._isr_update_executor.shutdown(wait=True)
        self.delayed_produce_purgatory.complete_all()
        self.delayed_fetch_purgatory.complete_all()
        self.delayed_delete_records_purgatory.complete_all()
        self.checkpoint_high_watermarks()


# Replicas created between two freezes while a LeaderAndIsr creates thousands: a full collection then walks at
# most these (some 40,000 objects, 20-40 ms of CPU), not every replica created so far (3,333 at 10,000 partitions:
# 250-300 ms each, several times over, in the creating LeaderAndIsr itself).
FREEZE_EVERY_CREATED = 500


def freeze_long_lived_objects() -> None:
    """Move every object alive now out of the cyclic collector's reach (gc.freeze): a hosted replica is some 80
    objects (its Partition, Log, segments, indexes, replicas) that live as long as it does, and CPython's full
    collection walks every tracked object holding the GIL, in whichever thread allocates: at 3,000 replicas one
    took 110-150 ms of CPU (250,000 objects), at 10,000 several times that, the event loop answering nothing
    meanwhile. Frozen objects are never walked, so the full collections that replica creation and later churn
    trigger cost what the young objects cost. A StopReplica that deletes unfreezes all (gc.unfreeze), so the
    deleted replicas' cycles are collected; the next replica created here freezes again. The server freezes too
    once its logs are loaded at start-up (10,000 loaded logs made the first full collection of the LeaderAndIsr
    after a restart walk some 800,000 objects)."""
    gc.freeze()


def _invalid_partition(tp: TopicPartition) -> ErrorCode | None:
    """A partition the controller should never send: its name would not even make a log directory."""
    try:
        validate_topic(tp.topic)
    except KafkaError as e:
        return e.code
    return ErrorCode.INVALID_REQUEST if tp.partition < 0 else None

"""ReplicaFetcherManager: which fetcher thread replicates which partition (Kafka 2.x's AbstractFetcherManager
and ReplicaFetcherManager).

num.replica.fetchers threads per source broker; a partition goes to fetcher
`getFetcherId` (Kafka's hash, Java String.hashCode included, so the same
partition lands on the same fetcher id as in Kafka). Threads are named
`ReplicaFetcherThread-<fetcherId>-<sourceBrokerId>`. LeaderAndIsr adds
partitions (become-follower) and removes them (become-leader, StopReplica); a
thread left without partitions is shut down by shutdown_idle_fetcher_threads.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

from broker.fetcher.protocol import BrokerEndPoint, InitialFetchState, LeaderEndPoint, ReplicaFetcherConfig
from broker.fetcher.thread import PartitionLookup, ReplicaFetcherThread
from common.java_hash import java_int, java_string_hash, kafka_abs
from proto.types import TopicPartition

logger = logging.getLogger(__name__)

LeaderEndPointFactory = Callable[[BrokerEndPoint], LeaderEndPoint]
FetcherThreadFactory = Callable[..., ReplicaFetcherThread]


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    """Kafka's getFetcherId: Utils.abs(31 * topic.hashCode + partition) % numFetchers, in Java int arithmetic
    (Utils.abs maps Integer.MIN_VALUE to 0)."""
    return kafka_abs(java_int(31 * java_string_hash(tp.topic) + tp.partition)) % num_fetchers


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, config: ReplicaFetcherConfig, leader_end_point: LeaderEndPointFactory,
                 partitions: PartitionLookup, create_thread: FetcherThreadFactory = ReplicaFetcherThread) -> None:
        self._broker_id = broker_id
        self._config = config
        self._leader_end_point = leader_end_point
        self._partitions = partitions
        self._create_thread = create_thread
        self._lock = threading.Lock()
        # (source broker id, fetcher id) -> thread
        self._threads: dict[tuple[int, int], ReplicaFetcherThread] = {}
        # Its own lock: threads report failures while holding their partition lock, which _lock waits for.
        self._failed_lock = threading.Lock()
        self._failed_partitions: set[TopicPartition] = set()

    def get_fetcher_id(self, tp: TopicPartition) -> int:
        return fetcher_id(tp, self._config.num_replica_fetchers)

    def add_fetcher_for_partitions(self, initial: Mapping[TopicPartition, InitialFetchState]) -> None:
        with self._lock:
            grouped: dict[tuple[BrokerEndPoint, int], dict[TopicPartition, InitialFetchState]] = defaultdict(dict)
            for tp, state in initial.items():
                grouped[(state.leader, self.get_fetcher_id(tp))][tp] = state
            for (leader, fid), states in grouped.items():
                key = (leader.id, fid)
                thread = self._threads.get(key)
                if thread is not None and thread.source_broker != leader:
                    # The broker came back at another address: its old connection is useless.
                    thread.shutdown()
                    thread = None
                if thread is None:
                    thread = self._add_and_start_fetcher_thread(key, leader)
                with self._failed_lock:
                    self._failed_partitions.difference_update(states)
                thread.add_partitions(states)
                logger.info("Added fetcher to broker %s for partitions %s", leader,
                            {str(tp): (s.init_offset, s.current_leader_epoch) for tp, s in states.items()})

    def _add_and_start_fetcher_thread(self, key: tuple[int, int], leader: BrokerEndPoint) -> ReplicaFetcherThread:
        source_id, fid = key
        thread = self._create_thread(
            f"ReplicaFetcherThread-{fid}-{source_id}", self._broker_id, fid, leader, self._leader_end_point(leader),
            self._partitions, self._config, self._mark_failed)
        self._threads[key] = thread
        thread.start()
        return thread

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        if not tps:
            return
        with self._lock:
            for thread in self._threads.values():
                thread.remove_partitions(tps)
        with self._failed_lock:
            self._failed_partitions.difference_update(tps)
        logger.info("Removed fetcher for partitions %s", sorted(str(tp) for tp in tps))

    def log_start_offset_moved(self, tp: TopicPartition) -> None:
        """Retention moved a followed log's start: its fetcher names it in the next fetch."""
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.log_start_offset_moved(tp)

    @property
    def num_fetchers(self) -> int:
        return self._config.num_replica_fetchers

    def resize_thread_pool(self, new_size: int) -> None:
        """num.replica.fetchers changed live (Kafka's resizeThreadPool): every partition moves to the thread
        its new fetcher id names, from where it was fetching; idle threads stop."""
        with self._lock:
            if new_size == self._config.num_replica_fetchers:
                return
            moved: dict[TopicPartition, InitialFetchState] = {}
            for thread in self._threads.values():
                states = thread.partition_states()
                thread.remove_partitions(states)
                for tp, state in states.items():
                    moved[tp] = InitialFetchState(thread.source_broker, state.current_leader_epoch, state.fetch_offset)
            logger.info("Resizing fetcher thread pool size from %d to %d", self._config.num_replica_fetchers,
                        new_size)
            self._config = dataclasses.replace(self._config, num_replica_fetchers=new_size)
        self.add_fetcher_for_partitions(moved)
        self.shutdown_idle_fetcher_threads()

    def shutdown_idle_fetcher_threads(self) -> None:
        with self._lock:
            idle = [key for key, thread in self._threads.items() if thread.partition_count <= 0]
            for key in idle:
                self._threads.pop(key).shutdown()

    def shutdown(self) -> None:
        logger.info("shutting down")
        with self._lock:
            threads = list(self._threads.values())
            self._threads.clear()
        for thread in threads:
            thread.initiate_shutdown()
        for thread in threads:
            thread.shutdown()
        logger.info("shutdown completed")

    def _mark_failed(self, tp: TopicPartition) -> None:
        with self._failed_lock:
            self._failed_partitions.add(tp)

    # ------------------------------------------------------------------ observability

    def fetcher_threads(self) -> dict[tuple[int, int], ReplicaFetcherThread]:
        with self._lock:
            return dict(self._threads)

    def max_lag(self) -> int:
        """Kafka's ReplicaFetcherManager MaxLag: the largest lag (in records) of any fetched partition."""
        return max((thread.max_lag() for thread in self.fetcher_threads().values()), default=0)

    def failed_partitions_count(self) -> int:
        """Kafka's FailedPartitionsCount: partitions a fetcher thread gave up on (a storage error, an offset it
        could not truncate to) and that no become-follower has handed to a fetcher since."""
        with self._failed_lock:
            return len(self._failed_partitions)

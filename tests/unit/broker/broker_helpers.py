"""Shared pieces for the broker's unit tests: a hand-driven clock and timer, batches, a ReplicaManager on
real logs in a temporary directory, and the controller requests that feed it."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.config.kafka_config import KafkaConfig
from broker.config.metadata_cache import EndPoint, LiveBroker, MetadataCache, UpdateMetadataPartitionState
from broker.config.metrics import BrokerMetrics
from broker.config.topic_config import TopicConfig, TopicConfigs
from broker.fetcher.protocol import BrokerEndPoint, InitialFetchState
from broker.fetcher.thread import PartitionLookup
from broker.log.manager import LogManager
from broker.replication.delayed_fetch import FetchParams, PartitionFetchInfo
from broker.replication.partition import FetchIsolation, LeaderAndIsrPartitionState
from broker.replication.replica_manager import ReplicaManager
from common.record import ProducerRecord, build_batch
from proto.types import TopicPartition
from tests.fakes import FakeClock, FakeStateStore

LOCAL = 1
TP = TopicPartition("orders", 0)


class _Task:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class MockTimer:
    """Kafka's MockTimer: timeouts fire only when the test moves the clock."""

    clock: FakeClock
    _queue: list[tuple[int, int, _Task, Callable[[], None]]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> _Task:
        task = _Task()
        heapq.heappush(self._queue, (self.clock.now + delay_ms, next(self._seq), task, callback))
        return task

    def advance(self, ms: int) -> None:
        self.clock.now += ms
        while self._queue and self._queue[0][0] <= self.clock.now:
            _, _, task, callback = heapq.heappop(self._queue)
            if not task.cancelled:
                callback()

    @property
    def pending(self) -> int:
        return sum(1 for _, _, task, _ in self._queue if not task.cancelled)


def batch(records: int = 3, value_size: int = 20, timestamp: int = 1_000, **kwargs: object) -> bytes:
    return build_batch([ProducerRecord(b"v" * value_size, timestamp=timestamp + i) for i in range(records)],
                       **kwargs)  # type: ignore[arg-type]


def broker_config(**overrides: str) -> KafkaConfig:
    return KafkaConfig.from_props({"zookeeper.connect": "127.0.0.1:2181", "broker.id": str(LOCAL), **overrides})


def topic_config(**overrides: str) -> TopicConfig:
    return TopicConfigs(broker_config()).validate(overrides)


def leader_state(leader: int = LOCAL, epoch: int = 0, isr: tuple[int, ...] = (LOCAL,),
                 replicas: tuple[int, ...] | None = None, controller_epoch: int = 1) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(controller_epoch, leader, epoch, isr, 0,
                                      replicas if replicas is not None else isr, is_new=True)


def endpoint(broker_id: int) -> BrokerEndPoint:
    return BrokerEndPoint(broker_id, "127.0.0.1", 9000 + broker_id)


def live_leaders(*broker_ids: int) -> list[BrokerEndPoint]:
    return [endpoint(b) for b in broker_ids]


def live_broker(broker_id: int) -> LiveBroker:
    return LiveBroker(broker_id, {"PLAINTEXT": EndPoint("127.0.0.1", 9000 + broker_id)})


def metadata_state(leader: int = LOCAL, epoch: int = 0,
                   isr: tuple[int, ...] = (LOCAL,)) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(1, leader, epoch, isr, 0, isr)


class RecordingFetcherManager:
    """Records what the ReplicaManager hands to (and takes from) the follower side."""

    def __init__(self, partitions: PartitionLookup) -> None:
        self.partitions = partitions
        self.fetching: dict[TopicPartition, InitialFetchState] = {}
        self.idle_shutdowns = 0
        self.log_start_moves: list[TopicPartition] = []
        self.removals: list[set[TopicPartition]] = []

    def add_fetcher_for_partitions(self, initial: Mapping[TopicPartition, InitialFetchState]) -> None:
        self.fetching.update(initial)

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None:
        removed = set(tps)
        self.removals.append(removed)
        for tp in removed:
            self.fetching.pop(tp, None)

    def shutdown_idle_fetcher_threads(self) -> None:
        self.idle_shutdowns += 1

    def log_start_offset_moved(self, tp: TopicPartition) -> None:
        self.log_start_moves.append(tp)

    def shutdown(self) -> None:
        self.fetching.clear()

    def max_lag(self) -> int:
        return 0

    def failed_partitions_count(self) -> int:
        return 0


class InlineExecutor(Executor):
    """Runs submitted work at once, in the caller's thread: deterministic ISR expansion in tests."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


class Harness:
    """A ReplicaManager of broker LOCAL over real logs, a mock timer and a manual clock."""

    def __init__(self, tmp_path: Path, min_isr: int = 1, replica_lag_time_max_ms: int = 30_000,
                 log_dirs: int = 1, halt: Callable[[int], None] | None = None) -> None:
        self.clock = FakeClock()
        self.timer = MockTimer(self.clock)
        dirs = [tmp_path / "logs"] + [tmp_path / f"logs-{i}" for i in range(2, log_dirs + 1)]
        self.log_manager = LogManager(dirs, topic_config().log, broker_id=LOCAL, time_ms=self.clock,
                                      **({} if halt is None else {"halt": halt}))
        self.log_manager.startup()
        self.metadata_cache = MetadataCache(LOCAL)
        self.state_store = FakeStateStore()
        self.metrics = BrokerMetrics()
        self.replica_manager = ReplicaManager(
            LOCAL, log_manager=self.log_manager, metadata_cache=self.metadata_cache,
            default_topic_config=topic_config(**{"min.insync.replicas": str(min_isr)}),
            timer=self.timer, time_ms=self.clock, fetcher_manager=RecordingFetcherManager,
            state_store=self.state_store, replica_lag_time_max_ms=replica_lag_time_max_ms,
            isr_update_executor=InlineExecutor(), metrics=self.metrics)

    @property
    def fetcher_manager(self) -> RecordingFetcherManager:
        manager = self.replica_manager.replica_fetcher_manager
        assert isinstance(manager, RecordingFetcherManager)
        return manager

    def lead(self, tp: TopicPartition = TP, isr: tuple[int, ...] = (LOCAL,), epoch: int = 0,
             controller_epoch: int = 1) -> None:
        """Make this broker the leader, as a controller would: LeaderAndIsr, then UpdateMetadata."""
        result = self.replica_manager.become_leader_or_follower(
            0, controller_epoch, [(tp, leader_state(LOCAL, epoch, isr, controller_epoch=controller_epoch))],
            live_leaders(LOCAL), {})
        assert result.partition_errors[tp].name == "NONE", result
        self.replica_manager.maybe_update_metadata_cache(
            0, controller_epoch, [(tp, metadata_state(LOCAL, epoch, isr))], [live_broker(b) for b in isr])


class Answers:
    """Collects what a callback was given; `value` is the single answer."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def __call__(self, value: Any) -> None:
        self.calls.append(value)

    @property
    def value(self) -> Any:
        assert len(self.calls) == 1, self.calls
        return self.calls[0]


def produce(h: Harness, records: bytes, acks: int = -1, tp: TopicPartition = TP,
            timeout_ms: int = 1000) -> Answers:
    answers = Answers()
    h.replica_manager.append_records(timeout_ms, acks, [(tp, records)], answers)
    return answers


def consumer_fetch(h: Harness, offset: int, min_bytes: int = 1, max_wait_ms: int = 500, replica_id: int = -1,
                   tp: TopicPartition = TP) -> Answers:
    answers = Answers()
    params = FetchParams(replica_id, max_wait_ms, min_bytes, 1 << 20,
                         FetchIsolation.LOG_END if replica_id >= 0 else FetchIsolation.HIGH_WATERMARK, True)
    h.replica_manager.fetch_messages(params, [PartitionFetchInfo(tp, offset, -1, 1 << 20, -1)], answers)
    return answers

"""Shared pieces for the broker's unit tests: a hand-driven clock and timer, batches, a ReplicaManager on
real logs in a temporary directory, and the controller requests that feed it."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker.config import KafkaConfig
from broker.log.manager import LogManager
from broker.log.record import ProducerRecord, build_batch
from broker.metadata_cache import EndPoint, LiveBroker, MetadataCache, UpdateMetadataPartitionState
from broker.partition import LeaderAndIsrPartitionState
from broker.replica_manager import ReplicaManager
from broker.topic_config import TopicConfig, TopicConfigs
from proto.types import TopicPartition

LOCAL = 1
TP = TopicPartition("orders", 0)


class ManualClock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class _Task:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class MockTimer:
    """Kafka's MockTimer: timeouts fire only when the test moves the clock."""

    clock: ManualClock
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


def live_broker(broker_id: int) -> LiveBroker:
    return LiveBroker(broker_id, {"PLAINTEXT": EndPoint("127.0.0.1", 9000 + broker_id)})


def metadata_state(leader: int = LOCAL, epoch: int = 0,
                   isr: tuple[int, ...] = (LOCAL,)) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(1, leader, epoch, isr, 0, isr)


class Harness:
    """A ReplicaManager of broker LOCAL over real logs, a mock timer and a manual clock."""

    def __init__(self, tmp_path: Path, min_isr: int = 1) -> None:
        self.clock = ManualClock()
        self.timer = MockTimer(self.clock)
        self.log_manager = LogManager([tmp_path / "logs"], topic_config().log, broker_id=LOCAL, time_ms=self.clock)
        self.log_manager.startup()
        self.metadata_cache = MetadataCache(LOCAL)
        self.replica_manager = ReplicaManager(
            LOCAL, log_manager=self.log_manager, metadata_cache=self.metadata_cache,
            default_topic_config=topic_config(**{"min.insync.replicas": str(min_isr)}),
            timer=self.timer, time_ms=self.clock)

    def lead(self, tp: TopicPartition = TP, isr: tuple[int, ...] = (LOCAL,), epoch: int = 0,
             controller_epoch: int = 1) -> None:
        """Make this broker the leader, as a controller would: LeaderAndIsr, then UpdateMetadata."""
        result = self.replica_manager.become_leader_or_follower(
            0, controller_epoch, [(tp, leader_state(LOCAL, epoch, isr, controller_epoch=controller_epoch))],
            isr, {})
        assert result.partition_errors[tp].name == "NONE", result
        self.replica_manager.maybe_update_metadata_cache(
            0, controller_epoch, [(tp, metadata_state(LOCAL, epoch, isr))], [live_broker(b) for b in isr])

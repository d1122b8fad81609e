"""Where a leader writes its ISR changes (Kafka 2.x's PartitionStateStore / ZkPartitionStateStore).

The write is conditional on the state znode's version the leader last knew.
A version mismatch means someone else (the controller, electing a new leader
or shrinking the ISR of a dead broker) wrote it since: the leader must not
clobber that, so the store re-reads the znode and hands the current state
back for the Partition to judge. A success is recorded for ISR-change
propagation and counted (IsrShrinksPerSec / IsrExpandsPerSec).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from broker.config.metrics import BrokerMetrics
from broker.replication.isr_change_propagation import IsrChangePropagator
from proto.types import TopicPartition
from zk.client import KafkaZkClient
from zk.paths import LeaderIsrAndControllerEpoch

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IsrUpdateResult:
    """Either the new znode version, or (write refused) the state found in ZooKeeper, if it still exists."""

    new_zk_version: int | None
    current: LeaderIsrAndControllerEpoch | None = None


class PartitionStateStore(Protocol):
    def shrink_isr(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> IsrUpdateResult:
        """Write `state` if the znode is still at `state.zk_version`."""
        ...

    def expand_isr(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> IsrUpdateResult: ...


class ZkPartitionStateStore:
    def __init__(self, zk: KafkaZkClient, propagator: IsrChangePropagator, metrics: BrokerMetrics) -> None:
        self._zk = zk
        self._propagator = propagator
        self._metrics = metrics

    def shrink_isr(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> IsrUpdateResult:
        result = self._update_isr(tp, state)
        if result.new_zk_version is not None:
            self._metrics.isr_shrinks.inc()
        return result

    def expand_isr(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> IsrUpdateResult:
        result = self._update_isr(tp, state)
        if result.new_zk_version is not None:
            self._metrics.isr_expands.inc()
        return result

    def _update_isr(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> IsrUpdateResult:
        succeeded, new_version = self._zk.conditional_update_partition_state(tp, state, state.zk_version)
        if succeeded:
            self._propagator.record_isr_change(tp)
            return IsrUpdateResult(new_version)
        self._metrics.failed_isr_updates.inc()
        return IsrUpdateResult(None, self._zk.get_partition_state(tp))

"""The controller's read-decide-write loop for partition state znodes (Kafka's updateLeaderAndIsr loops in
PartitionStateMachine.doElectLeaderForPartitions and ReplicaStateMachine.doRemoveReplicasFromIsr).

Each state is read from ZooKeeper (not the cache: leaders change ISRs
themselves), handed to a pure `decide`, and written only if its znode is still
at the version read, behind the controller epoch fence. A znode that moved in
between (BadVersion: a leader shrank or expanded its ISR) is read and decided
again; a ControllerMovedError passes through (the controller resigns on it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from controller.context import ControllerContext
from controller.loggers import Logger
from proto.types import TopicPartition
from zk.client import UpdateLeaderAndIsrResult
from zk.paths import LeaderIsrAndControllerEpoch

# The next state of a partition, or None: nothing to write (the caller logs why).
Decide = Callable[[TopicPartition, LeaderIsrAndControllerEpoch], LeaderIsrAndControllerEpoch | None]


class LeaderAndIsrStore(Protocol):
    """What the loop needs from ZooKeeper (KafkaZkClient provides it)."""

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]: ...

    def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected_controller_epoch_zk_version: int
    ) -> UpdateLeaderAndIsrResult: ...


def update_leader_and_isr(
    zk: LeaderAndIsrStore,
    context: ControllerContext,
    partitions: Iterable[TopicPartition],
    decide: Decide,
    log: Logger,
    transition: str,
) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
    """Decide and write each partition's next state; returns those written (with their new zk versions), which
    are also put in the context's leadership cache. The others are logged with `transition` in the line."""
    written: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
    remaining = list(partitions)
    while remaining:
        current_states = zk.get_partition_states(remaining)
        to_write: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in remaining:
            current = current_states.get(tp)
            if current is None:
                log.error("Failed to %s for partition %s: its state znode does not exist", transition, tp)
            elif current.controller_epoch > context.epoch:
                # A newer controller wrote this state: this one is about to learn it moved.
                log.error(
                    "Aborted %s for partition %s since the LeaderAndIsr path was already written by another "
                    "controller. This probably means that the current controller went through a soft failure "
                    "and another controller was elected with epoch %d.",
                    transition,
                    tp,
                    current.controller_epoch,
                )
            elif (next_state := decide(tp, current)) is not None:
                to_write[tp] = next_state
        if not to_write:
            break
        result = zk.update_partition_states(to_write, context.epoch_zk_version)
        for tp, error in result.failed.items():
            log.error("Failed to %s for partition %s: %s", transition, tp, error)
        for tp, state in result.finished.items():
            context.put_partition_leadership_info(tp, state)
        written.update(result.finished)
        remaining = result.to_retry
        if remaining:
            log.info(
                "Retrying %s for partitions %s: their state changed since it was read",
                transition,
                [str(tp) for tp in remaining],
            )
    return written

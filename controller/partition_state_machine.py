"""PartitionStateMachine: Kafka's partition states, and the transitions this controller makes.

NonExistentPartition -> NewPartition when a topic's assignment appears;
NewPartition -> OnlinePartition by writing the partition's first state znode:
leader = the first live replica in assignment order, ISR = every live replica in
assignment order, leader epoch 0. On takeover every known partition is
classified from its state znode: Online if its leader is live, Offline if not,
New if it has no state yet.

The decisions are made here; the ZooKeeper writes go through `zk` (the
KafkaZkClient, or a fake in tests) and are fenced by the controller epoch, so a
ControllerMovedError passes through untouched: the controller resigns on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, Protocol

from controller.context import ControllerContext
from controller.loggers import Logger
from controller.request_batch import ControllerBrokerRequestBatch
from controller.states import VALID_PREVIOUS_PARTITION_STATES, PartitionState
from proto.types import TopicPartition
from zk.paths import INITIAL_LEADER_EPOCH, LeaderIsrAndControllerEpoch

# The version a znode has when just created.
_NEW_ZNODE_VERSION = 0


class PartitionStateStore(Protocol):
    """What the state machine needs from ZooKeeper (KafkaZkClient provides it)."""

    def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected_controller_epoch_zk_version: int
    ) -> set[TopicPartition]: ...

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]: ...


def initial_leader_and_isr(live_replicas: Sequence[int], controller_epoch: int) -> LeaderIsrAndControllerEpoch:
    """A new partition's first state (Kafka's initializeLeaderAndIsrForPartitions): `live_replicas` in assignment
    order, at least one."""
    return LeaderIsrAndControllerEpoch(
        leader=live_replicas[0],
        leader_epoch=INITIAL_LEADER_EPOCH,
        isr=tuple(live_replicas),
        controller_epoch=controller_epoch,
        zk_version=_NEW_ZNODE_VERSION,
    )


class PartitionStateMachine:
    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        zk: PartitionStateStore,
        batch: ControllerBrokerRequestBatch,
        state_change_log: Logger,
    ) -> None:
        self._controller_id = controller_id
        self._context = context
        self._zk = zk
        self._batch = batch
        self._log = state_change_log

    def startup(self) -> None:
        self._initialize_partition_state()
        self.trigger_online_partition_state_change()

    def _initialize_partition_state(self) -> None:
        for tp in self._context.all_partitions():
            current = self._context.partition_leadership_info.get(tp)
            if current is None:
                state = PartitionState.NewPartition
            elif self._context.is_replica_online(current.leader, tp):
                state = PartitionState.OnlinePartition
            else:
                state = PartitionState.OfflinePartition
            self._context.partition_states[tp] = state

    def trigger_online_partition_state_change(self) -> None:
        """Move the partitions that can be moved online: New ones, which need no election (a topic created while
        none of its replicas was live gets its leader when one registers)."""
        new_partitions = self._context.partitions_in_state(PartitionState.NewPartition)
        self.handle_state_changes(new_partitions, PartitionState.OnlinePartition)

    def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target_state: Literal[PartitionState.NewPartition, PartitionState.OnlinePartition],
    ) -> set[TopicPartition]:
        """Move the partitions to target_state; returns those that made it. Invalid transitions and partitions
        that cannot move (no live replica) are logged in the state change log and left where they are."""
        valid = []
        for tp in partitions:
            current = self._context.partition_state(tp)
            if current in VALID_PREVIOUS_PARTITION_STATES[target_state]:
                valid.append(tp)
            else:
                self._log.error(
                    "Controller %d epoch %d failed to change state for partition %s from %s to %s: "
                    "partition must be in one of %s before moving to %s",
                    self._controller_id,
                    self._context.epoch,
                    tp,
                    current.name,
                    target_state.name,
                    sorted(s.name for s in VALID_PREVIOUS_PARTITION_STATES[target_state]),
                    target_state.name,
                )
        if target_state is PartitionState.NewPartition:
            for tp in valid:
                self._log.info(
                    "Changed partition %s state from %s to NewPartition with assigned replicas %s",
                    tp,
                    self._context.partition_state(tp).name,
                    list(self._context.partition_replica_assignment(tp)),
                )
                self._context.partition_states[tp] = PartitionState.NewPartition
            return set(valid)
        online = self._initialize_leader_and_isr_for_partitions(valid)
        for tp in sorted(online):
            self._log.info(
                "Changed partition %s from NewPartition to OnlinePartition with state %s",
                tp,
                describe(self._context.partition_leadership_info[tp]),
            )
            self._context.partition_states[tp] = PartitionState.OnlinePartition
        return online

    def _initialize_leader_and_isr_for_partitions(self, partitions: Sequence[TopicPartition]) -> set[TopicPartition]:
        """Write each partition's first state znode; the replicas in its ISR get a LeaderAndIsr (is_new)."""
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in partitions:
            replicas = self._context.partition_replica_assignment(tp)
            live = [r for r in replicas if self._context.is_replica_online(r, tp)]
            if live:
                states[tp] = initial_leader_and_isr(live, self._context.epoch)
            else:
                self._log.error(
                    "Controller %d epoch %d encountered error during state change of partition %s from New to "
                    "Online, assigned replicas are %s, live brokers are %s. No assigned replica is alive.",
                    self._controller_id,
                    self._context.epoch,
                    tp,
                    list(replicas),
                    sorted(self._context.live_broker_ids),
                )
        if not states:
            return set()
        created = self._zk.create_partition_states(states, self._context.epoch_zk_version)
        written = {tp: states[tp] for tp in created}
        # A create retried after a lost connection finds its own first attempt: that znode is ours.
        for tp, existing in self._zk.get_partition_states(states.keys() - created).items():
            if existing.same_content(states[tp]):
                written[tp] = existing
            else:
                self._log.error(
                    "Controller %d epoch %d failed to change state for partition %s from NewPartition to "
                    "OnlinePartition: its state znode already exists with %s",
                    self._controller_id,
                    self._context.epoch,
                    tp,
                    describe(existing),
                )
        for tp, state in written.items():
            self._context.partition_leadership_info[tp] = state
            self._batch.add_leader_and_isr_request_for_brokers(
                state.isr, tp, state, self._context.partition_full_replica_assignment(tp), is_new=True
            )
        return set(written)


def describe(state: LeaderIsrAndControllerEpoch) -> str:
    """Kafka's LeaderIsrAndControllerEpoch toString, as its state change log prints it."""
    return (
        f"[Leader:{state.leader},ISR:{','.join(map(str, state.isr))},LeaderEpoch:{state.leader_epoch},"
        f"ControllerEpoch:{state.controller_epoch}]"
    )

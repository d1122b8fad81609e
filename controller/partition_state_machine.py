"""PartitionStateMachine: Kafka's partition states, and the transitions this controller makes.

NonExistentPartition -> NewPartition when a topic's assignment appears;
NewPartition -> OnlinePartition by writing the partition's first state znode:
leader = the first live replica in assignment order, ISR = every live replica in
assignment order, leader epoch 0. Online/Offline -> OnlinePartition elects a
leader (election.leader_for_offline: the first live ISR member; a live replica
outside the ISR only if unclean leader election is enabled for the topic) and
writes it with the next leader epoch; a controlled shutdown or a preferred
replica election passes its own election strategy instead (election.py).
-> OfflinePartition (its leader is gone) and Offline -> NonExistentPartition
(topic deletion) change only the state. On
takeover every known partition is classified from its state znode: Online if
its leader is live, Offline if not, New if it has no state yet.

The decisions are made here; the ZooKeeper writes go through `zk` (the
KafkaZkClient, or a fake in tests) and are fenced by the controller epoch, so a
ControllerMovedError passes through untouched: the controller resigns on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, Protocol

from common.event_ring import ELECTION, EVENTS
from controller.context import ControllerContext
from controller.election import LeaderElection, leader_for_offline
from controller.leader_and_isr_update import LeaderAndIsrStore, update_leader_and_isr
from controller.loggers import Logger
from controller.request_batch import ControllerBrokerRequestBatch
from controller.states import VALID_PREVIOUS_PARTITION_STATES, PartitionState
from proto.types import TopicPartition
from zk.paths import INITIAL_LEADER_EPOCH, LeaderIsrAndControllerEpoch

# The version a znode has when just created.
_NEW_ZNODE_VERSION = 0

# Whether a topic allows unclean leader election (the controller's setting or the topic's override).
UncleanLeaderElectionEnabled = Callable[[str], bool]

TargetState = Literal[
    PartitionState.NewPartition,
    PartitionState.OnlinePartition,
    PartitionState.OfflinePartition,
    PartitionState.NonExistentPartition,
]


class PartitionStateStore(LeaderAndIsrStore, Protocol):
    """What the state machine needs from ZooKeeper (KafkaZkClient provides it)."""

    def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected_controller_epoch_zk_version: int
    ) -> set[TopicPartition]: ...


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
        *,
        unclean_leader_election_enabled: UncleanLeaderElectionEnabled,
    ) -> None:
        self._controller_id = controller_id
        self._context = context
        self._zk = zk
        self._batch = batch
        self._log = state_change_log
        self._unclean_leader_election_enabled = unclean_leader_election_enabled

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
            self._context.put_partition_state(tp, state)

    def trigger_online_partition_state_change(self) -> None:
        """Move every partition that can go online: New ones get their first state, Offline ones a leader
        (Kafka's triggerOnlinePartitionStateChange). Topics being deleted stay where they are."""
        partitions = [
            tp
            for tp, state in sorted(self._context.partition_states.items())
            if state in (PartitionState.NewPartition, PartitionState.OfflinePartition)
            and not self._context.is_topic_queued_up_for_deletion(tp.topic)
        ]
        self.handle_state_changes(partitions, PartitionState.OnlinePartition)

    def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target_state: TargetState,
        election: LeaderElection | None = None,
    ) -> set[TopicPartition]:
        """Move the partitions to target_state; returns those that made it. Invalid transitions and partitions
        that cannot move (no eligible leader) are logged in the state change log and left where they are.
        Partitions that have a state get their leader from `election` (Kafka's PartitionLeaderElectionStrategy:
        controlled shutdown, preferred replica), the offline election by default."""
        valid = [tp for tp in partitions if self._is_valid_transition(tp, target_state)]
        if target_state is not PartitionState.OnlinePartition:
            for tp in valid:
                self._log_transition(tp, self._context.partition_state(tp), target_state)
                self._context.put_partition_state(tp, target_state)
            return set(valid)
        previous = {tp: self._context.partition_state(tp) for tp in valid}
        online = self._initialize_leader_and_isr_for_partitions(
            [tp for tp in valid if previous[tp] is PartitionState.NewPartition]
        )
        online |= self._elect_leader_for_partitions(
            [tp for tp in valid if previous[tp] is not PartitionState.NewPartition], election
        )
        for tp in sorted(online):
            self._log_transition(tp, previous[tp], PartitionState.OnlinePartition)
            self._context.put_partition_state(tp, PartitionState.OnlinePartition)
        return online

    def _is_valid_transition(self, tp: TopicPartition, target_state: PartitionState) -> bool:
        current = self._context.partition_state(tp)
        valid_previous = VALID_PREVIOUS_PARTITION_STATES[target_state]
        if current in valid_previous:
            return True
        self._log.error(
            "Controller %d epoch %d failed to change state for partition %s from %s to %s: "
            "partition must be in one of %s before moving to %s",
            self._controller_id,
            self._context.epoch,
            tp,
            current.name,
            target_state.name,
            sorted(s.name for s in valid_previous),
            target_state.name,
        )
        return False

    def _log_transition(self, tp: TopicPartition, previous: PartitionState, target_state: PartitionState) -> None:
        if target_state is PartitionState.NewPartition:
            self._log.info(
                "Changed partition %s state from %s to NewPartition with assigned replicas %s",
                tp,
                previous.name,
                list(self._context.partition_replica_assignment(tp)),
            )
        elif target_state is PartitionState.OnlinePartition:
            state = describe(self._context.partition_leadership_info[tp])
            self._log.info("Changed partition %s from %s to OnlinePartition with state %s", tp, previous.name, state)
            EVENTS.record(ELECTION, f"controller {self._controller_id} moved it from {previous.name} to"
                          f" OnlinePartition: {state}", *tp)
        else:
            self._log.info("Changed partition %s state from %s to %s", tp, previous.name, target_state.name)

    def _elect_leader_for_partitions(
        self, partitions: Sequence[TopicPartition], election: LeaderElection | None
    ) -> set[TopicPartition]:
        """Kafka's electLeaderForPartitions: each partition's state is read, its leader elected (by `election`, or
        the offline election) and the result written conditionally (re-read and elected again on a conflict);
        the live replicas get a LeaderAndIsr."""
        unclean_by_topic: dict[str, bool] = {}
        recipients: dict[TopicPartition, tuple[int, ...]] = {}

        def unclean_allowed(topic: str) -> bool:
            # Read only when needed: it is a ZooKeeper read of the topic's config.
            if topic not in unclean_by_topic:
                unclean_by_topic[topic] = self._unclean_leader_election_enabled(topic)
            return unclean_by_topic[topic]

        def decide(tp: TopicPartition, current: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            if election is not None:
                result = election(tp, current)
                if result.leader_and_isr is None:
                    self._log.error(
                        "Controller %d epoch %d failed to change state for partition %s from %s to OnlinePartition: "
                        "no eligible leader among assigned replicas %s, ISR [%s], live brokers [%s]",
                        self._controller_id,
                        self._context.epoch,
                        tp,
                        self._context.partition_state(tp).name,
                        list(self._context.partition_replica_assignment(tp)),
                        ",".join(map(str, current.isr)),
                        ",".join(map(str, sorted(self._context.live_broker_ids))),
                    )
                    return None
                recipients[tp] = result.live_replicas
                return result.leader_and_isr
            result = leader_for_offline(self._context, tp, current, unclean_leader_election_enabled=False)
            if result.leader_and_isr is None and unclean_allowed(tp.topic):
                result = leader_for_offline(self._context, tp, current, unclean_leader_election_enabled=True)
            if result.leader_and_isr is None:
                self._log.error(
                    "Controller %d epoch %d failed to change state for partition %s from %s to OnlinePartition: "
                    "No replica in ISR for partition %s is alive. Live brokers are: [%s], ISR brokers are: [%s]",
                    self._controller_id,
                    self._context.epoch,
                    tp,
                    self._context.partition_state(tp).name,
                    tp,
                    ",".join(map(str, sorted(self._context.live_broker_ids))),
                    ",".join(map(str, current.isr)),
                )
                return None
            if result.leader_and_isr.leader not in current.isr:
                self._log.warning(
                    "Unclean leader election. No broker in ISR is alive for %s. Elect leader %d from live brokers "
                    "%s. There's potential data loss.",
                    tp,
                    result.leader_and_isr.leader,
                    list(result.live_replicas),
                )
            recipients[tp] = result.live_replicas
            return result.leader_and_isr

        elected = update_leader_and_isr(self._zk, self._context, partitions, decide, self._log, "elect leader")
        for tp, state in elected.items():
            self._batch.add_leader_and_isr_request_for_brokers(
                recipients[tp], tp, state, self._context.partition_full_replica_assignment(tp), is_new=False
            )
        return set(elected)

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
            self._context.put_partition_leadership_info(tp, state)
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

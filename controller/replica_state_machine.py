"""ReplicaStateMachine: Kafka's replica states, and the transitions this controller makes.

A replica (a partition on a broker) is NewReplica while its partition is being
created and OnlineReplica once it is part of the cluster; on takeover, replicas
on live brokers are Online and the others ReplicaDeletionIneligible. Moving a
replica that is not new to OnlineReplica (re)sends its broker the partition's
state: that is how a broker that (re)starts learns what it hosts.

-> OfflineReplica (its broker died, or its topic is being deleted) takes it out
of its partitions' ISRs with a fenced conditional write (leader NO_LEADER if it
led; the last ISR member stays), so acks=all no longer waits for it.
Topic deletion then moves it through ReplicaDeletionStarted (StopReplica with
delete_partitions sent), ReplicaDeletionSuccessful or ReplicaDeletionIneligible
(its broker is down), and NonExistentReplica. Partition reassignment adds
replicas through NewReplica (a LeaderAndIsr makes them followers) and removes
them through OfflineReplica, ReplicaDeletionStarted, ReplicaDeletionSuccessful
and NonExistentReplica without waiting for the answer, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

from controller.context import ControllerContext, PartitionAndReplica
from controller.election import leader_and_isr_without_replica
from controller.leader_and_isr_update import LeaderAndIsrStore, update_leader_and_isr
from controller.loggers import Logger
from controller.request_batch import ControllerBrokerRequestBatch
from controller.states import VALID_PREVIOUS_REPLICA_STATES, ReplicaState
from proto.types import TopicPartition
from zk.paths import LeaderIsrAndControllerEpoch


class ReplicaStateMachine:
    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        zk: LeaderAndIsrStore,
        batch: ControllerBrokerRequestBatch,
        state_change_log: Logger,
    ) -> None:
        self._controller_id = controller_id
        self._context = context
        self._zk = zk
        self._batch = batch
        self._log = state_change_log

    def startup(self) -> None:
        """Classify every replica, then send each live one its partition's state."""
        replicas = self._context.replicas_for_partitions(self._context.all_partitions())
        online = [r for r in replicas if self._context.is_replica_online(r.replica, r.topic_partition)]
        for replica in replicas:
            self._context.replica_states[replica] = ReplicaState.ReplicaDeletionIneligible
        for replica in online:
            self._context.replica_states[replica] = ReplicaState.OnlineReplica
        self.handle_state_changes(online, ReplicaState.OnlineReplica)

    def handle_state_changes(self, replicas: Iterable[PartitionAndReplica], target_state: ReplicaState) -> None:
        """Move the replicas to target_state; invalid transitions are logged in the state change log and left
        where they are. A replica added to a partition that already has a leader (reassignment) gets its
        LeaderAndIsr on -> NewReplica, as a new replica: it starts as a follower."""
        valid = [r for r in replicas if self._is_valid_transition(r, target_state)]
        if target_state is ReplicaState.NewReplica:
            valid = [r for r in valid if self._start_new_replica(r)]
        if target_state is ReplicaState.OfflineReplica:
            # One read-decide-write round per broker, as Kafka groups them.
            by_broker = sorted(valid, key=lambda r: r.replica)
            for replica_id, group in groupby(by_broker, key=lambda r: r.replica):
                self._remove_replica_from_isr(replica_id, [r.topic_partition for r in group])
        for replica in valid:
            current = self._context.replica_state(replica)
            if target_state is ReplicaState.OnlineReplica and current is not ReplicaState.NewReplica:
                # A new replica got its LeaderAndIsr when its partition went online.
                self._send_partition_state(replica.topic_partition, [replica.replica])
            elif target_state is ReplicaState.ReplicaDeletionStarted:
                self._batch.add_stop_replica_request_for_brokers([replica.replica], replica.topic_partition)
            self._log.debug(
                "Changed state of replica %d for partition %s from %s to %s",
                replica.replica,
                replica.topic_partition,
                current.name,
                target_state.name,
            )
            if target_state is ReplicaState.NonExistentReplica:
                self._context.replica_states.pop(replica, None)
            else:
                self._context.replica_states[replica] = target_state

    def _is_valid_transition(self, replica: PartitionAndReplica, target_state: ReplicaState) -> bool:
        current = self._context.replica_state(replica)
        valid_previous = VALID_PREVIOUS_REPLICA_STATES[target_state]
        if current in valid_previous:
            return True
        self._log.error(
            "Controller %d epoch %d failed to change state of replica %d for partition %s from %s to %s: "
            "replica must be in one of %s before moving to %s",
            self._controller_id,
            self._context.epoch,
            replica.replica,
            replica.topic_partition,
            current.name,
            target_state.name,
            sorted(s.name for s in valid_previous),
            target_state.name,
        )
        return False

    def _start_new_replica(self, replica: PartitionAndReplica) -> bool:
        state = self._context.partition_leadership_info.get(replica.topic_partition)
        if state is None:
            return True  # a new partition: its first LeaderAndIsr comes with its first state
        if state.leader == replica.replica:
            self._log.error(
                "Controller %d epoch %d failed to change state of replica %d for partition %s from %s to NewReplica: "
                "it is being requested to become leader",
                self._controller_id,
                self._context.epoch,
                replica.replica,
                replica.topic_partition,
                self._context.replica_state(replica).name,
            )
            return False
        self._batch.add_leader_and_isr_request_for_brokers(
            [replica.replica],
            replica.topic_partition,
            state,
            self._context.partition_full_replica_assignment(replica.topic_partition),
            is_new=True,
        )
        return True

    def _remove_replica_from_isr(self, replica_id: int, partitions: list[TopicPartition]) -> None:
        """Kafka's removeReplicasFromIsr: the partitions' other replicas learn the shrunk ISR (LeaderAndIsr), every
        live broker that the replica is offline (UpdateMetadata's offline_replicas)."""

        def decide(_tp: TopicPartition, current: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            return leader_and_isr_without_replica(current, replica_id, self._context.epoch)

        with_state = [tp for tp in partitions if tp in self._context.partition_leadership_info]
        updated = update_leader_and_isr(
            self._zk, self._context, with_state, decide, self._log, f"remove replica {replica_id} from ISR"
        )
        for tp in sorted(updated):
            if not self._context.is_topic_queued_up_for_deletion(tp.topic):
                others = [r for r in self._context.partition_replica_assignment(tp) if r != replica_id]
                self._send_partition_state(tp, others)
        self._batch.add_update_metadata_request_for_brokers(self._context.live_broker_ids, partitions)

    def _send_partition_state(self, tp: TopicPartition, broker_ids: list[int]) -> None:
        state = self._context.partition_leadership_info.get(tp)
        if state is not None:
            self._batch.add_leader_and_isr_request_for_brokers(
                broker_ids, tp, state, self._context.partition_full_replica_assignment(tp), is_new=False
            )

"""ReplicaStateMachine: Kafka's replica states, and the transitions this controller makes.

A replica (a partition on a broker) is NewReplica while its partition is being
created and OnlineReplica once it is part of the cluster; on takeover, replicas
on live brokers are Online and the others ReplicaDeletionIneligible. Moving a
replica that is not new to OnlineReplica (re)sends its broker the partition's
state: that is how a broker that (re)starts learns what it hosts. No ZooKeeper
writes happen here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from controller.context import ControllerContext, PartitionAndReplica
from controller.loggers import Logger
from controller.request_batch import ControllerBrokerRequestBatch
from controller.states import VALID_PREVIOUS_REPLICA_STATES, ReplicaState


class ReplicaStateMachine:
    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        batch: ControllerBrokerRequestBatch,
        state_change_log: Logger,
    ) -> None:
        self._controller_id = controller_id
        self._context = context
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

    def handle_state_changes(
        self,
        replicas: Iterable[PartitionAndReplica],
        target_state: Literal[ReplicaState.NewReplica, ReplicaState.OnlineReplica],
    ) -> None:
        """Kafka also sends a LeaderAndIsr on -> NewReplica when the partition already has a leader (a replica
        added by reassignment); that case arrives with reassignment, new partitions have no leader yet."""
        for replica in replicas:
            current = self._context.replica_state(replica)
            if current not in VALID_PREVIOUS_REPLICA_STATES[target_state]:
                self._log.error(
                    "Controller %d epoch %d failed to change state of replica %d for partition %s from %s to %s: "
                    "replica must be in one of %s before moving to %s",
                    self._controller_id,
                    self._context.epoch,
                    replica.replica,
                    replica.topic_partition,
                    current.name,
                    target_state.name,
                    sorted(s.name for s in VALID_PREVIOUS_REPLICA_STATES[target_state]),
                    target_state.name,
                )
                continue
            if target_state is ReplicaState.OnlineReplica and current is not ReplicaState.NewReplica:
                # A new replica got its LeaderAndIsr when its partition went online.
                state = self._context.partition_leadership_info.get(replica.topic_partition)
                if state is not None:
                    self._batch.add_leader_and_isr_request_for_brokers(
                        [replica.replica],
                        replica.topic_partition,
                        state,
                        self._context.partition_full_replica_assignment(replica.topic_partition),
                        is_new=False,
                    )
            self._log.debug(
                "Changed state of replica %d for partition %s from %s to %s",
                replica.replica,
                replica.topic_partition,
                current.name,
                target_state.name,
            )
            self._context.replica_states[replica] = target_state

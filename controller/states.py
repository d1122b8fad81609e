"""Partition and replica states of Kafka's controller state machines, with the transitions this controller makes.

Kafka's tables (PartitionStateMachine.scala, ReplicaStateMachine.scala) have
more rows; each arrives with the issue that needs it, so the tables here are
always the rules the code enforces, never more:

- partitions: Online/Offline -> Online (leader election) and -> Offline come with
  broker failure handling; Offline -> NonExistent with topic deletion;
- replicas: -> OfflineReplica with broker failure; ReplicaDeletionStarted,
  ReplicaDeletionSuccessful and -> NonExistentReplica with topic deletion and
  reassignment.
"""

from __future__ import annotations

import enum


class PartitionState(enum.Enum):
    # Kafka's names, as they appear in its state change log.
    NonExistentPartition = 0
    NewPartition = 1
    OnlinePartition = 2
    OfflinePartition = 3


class ReplicaState(enum.Enum):
    NonExistentReplica = 0
    NewReplica = 1
    OnlineReplica = 2
    # A replica on a broker that was down when this controller took over
    # (Kafka 2.x marks them so, until the broker comes back).
    ReplicaDeletionIneligible = 3


VALID_PREVIOUS_PARTITION_STATES: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NewPartition: frozenset({PartitionState.NonExistentPartition}),
    PartitionState.OnlinePartition: frozenset({PartitionState.NewPartition}),
}

VALID_PREVIOUS_REPLICA_STATES: dict[ReplicaState, frozenset[ReplicaState]] = {
    ReplicaState.NewReplica: frozenset({ReplicaState.NonExistentReplica}),
    ReplicaState.OnlineReplica: frozenset(
        {ReplicaState.NewReplica, ReplicaState.OnlineReplica, ReplicaState.ReplicaDeletionIneligible}
    ),
}

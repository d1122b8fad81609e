"""Partition and replica states of Kafka's controller state machines, with the transitions this controller makes.

Kafka's tables (PartitionStateMachine.scala, ReplicaStateMachine.scala) have
more rows; each arrives with the issue that needs it, so the tables here are
always the rules the code enforces, never more:

- partitions: New/Online/Offline -> Online (leader election) and -> Offline with
  broker failure; Offline -> NonExistent with topic deletion;
- replicas: -> OfflineReplica with broker failure; ReplicaDeletionStarted,
  ReplicaDeletionSuccessful, ReplicaDeletionIneligible and -> NonExistentReplica
  with topic deletion; NonExistent -> NewReplica -> OnlineReplica (added) and
  -> Offline -> ReplicaDeletionStarted -> ... -> NonExistentReplica (removed) with
  partition reassignment.
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
    # Its broker is gone: out of the ISR, its partition led by someone else (or nobody).
    OfflineReplica = 3
    # StopReplica(delete_partitions) sent; waiting for the broker's answer.
    ReplicaDeletionStarted = 4
    ReplicaDeletionSuccessful = 5
    # Cannot be deleted now: its broker is down (also every replica on a broker that was down when this
    # controller took over, as Kafka 2.x marks them, until the broker comes back).
    ReplicaDeletionIneligible = 6


_P = PartitionState
_R = ReplicaState

VALID_PREVIOUS_PARTITION_STATES: dict[PartitionState, frozenset[PartitionState]] = {
    _P.NewPartition: frozenset({_P.NonExistentPartition}),
    _P.OnlinePartition: frozenset({_P.NewPartition, _P.OnlinePartition, _P.OfflinePartition}),
    _P.OfflinePartition: frozenset({_P.NewPartition, _P.OnlinePartition, _P.OfflinePartition}),
    _P.NonExistentPartition: frozenset({_P.OfflinePartition}),
}

VALID_PREVIOUS_REPLICA_STATES: dict[ReplicaState, frozenset[ReplicaState]] = {
    _R.NewReplica: frozenset({_R.NonExistentReplica}),
    _R.OnlineReplica: frozenset({_R.NewReplica, _R.OnlineReplica, _R.OfflineReplica, _R.ReplicaDeletionIneligible}),
    _R.OfflineReplica: frozenset({_R.NewReplica, _R.OnlineReplica, _R.OfflineReplica, _R.ReplicaDeletionIneligible}),
    _R.ReplicaDeletionStarted: frozenset({_R.OfflineReplica}),
    _R.ReplicaDeletionSuccessful: frozenset({_R.ReplicaDeletionStarted}),
    _R.ReplicaDeletionIneligible: frozenset({_R.OfflineReplica, _R.ReplicaDeletionStarted}),
    _R.NonExistentReplica: frozenset({_R.ReplicaDeletionSuccessful}),
}

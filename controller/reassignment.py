"""Partition reassignment rules (Kafka 2.4+'s KafkaController.onPartitionReassignment, validateReplicas and
maybeRemoveFromZkReassignment), as pure functions over assignments and ISRs.

With ORS the original replicas and TRS the target ones, a reassignment first
records RS = TRS + ORS with the replicas being added (TRS - ORS) and removed
(ORS - TRS) in the topic's znode (zk.paths.ReplicaAssignment.reassign_to), so
the new replicas start as followers. It is complete once every target replica
is in the ISR; then the leader moves onto TRS if it is not there (or not alive),
the removed replicas leave the ISR and delete their logs, and RS becomes TRS.
The controller (controller/reassignment_manager.py) does the I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from zk.paths import ReplicaAssignment


def invalid_target_error(replicas: Sequence[int]) -> KafkaError | None:
    """Kafka's validateReplicas (without its liveness check: a znode request may name a broker that is down, and
    the reassignment then waits for it)."""
    if not replicas:
        return KafkaError(
            "Empty replica list specified in partition reassignment.", ErrorCode.INVALID_REPLICA_ASSIGNMENT
        )
    if len(set(replicas)) != len(replicas):
        return KafkaError(
            f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )
    if any(r < 0 for r in replicas):
        return KafkaError(f"Invalid broker id in replica list: {list(replicas)}", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    return None


def reassignment_to_start(
    current: ReplicaAssignment, being_reassigned: bool, target: Sequence[int]
) -> ReplicaAssignment | None:
    """The assignment a request for `target` leads to; None if that reassignment is already running (the request
    znode is read again whenever it changes, and at every takeover)."""
    reassignment = current.reassign_to(target)
    if being_reassigned and reassignment == current:
        return None
    return reassignment


def unneeded_replicas(current: ReplicaAssignment, reassignment: ReplicaAssignment) -> tuple[int, ...]:
    """Replicas of a running reassignment that a new one no longer wants: they stop at once (Kafka's U3)."""
    return tuple(r for r in current.replicas if r not in reassignment.replicas)


def is_reassignment_complete(assignment: ReplicaAssignment, isr: Collection[int]) -> bool:
    """Every target replica is in the ISR (an assignment that is not being reassigned is complete)."""
    return not assignment.is_being_reassigned or set(assignment.target_replicas) <= set(isr)


def leader_must_move(target_replicas: Collection[int], leader: int, leader_alive: bool) -> bool:
    """Kafka's moveReassignedPartitionLeaderIfRequired: elect among the targets if the leader is not one of them or
    is gone; otherwise it stays and only its leader epoch is bumped."""
    return leader not in target_replicas or not leader_alive


def remaining_requests(
    requested: Mapping[TopicPartition, Sequence[int]], done: Mapping[TopicPartition, Sequence[int]]
) -> dict[TopicPartition, tuple[int, ...]]:
    """What /admin/reassign_partitions still asks for once the `done` partitions are finished or refused. A
    partition whose request names other replicas now (it was replaced meanwhile) stays."""
    return {
        tp: tuple(replicas)
        for tp, replicas in requested.items()
        if tp not in done or tuple(done[tp]) != tuple(replicas)
    }

"""Partition leader election: Kafka's PartitionLeaderElectionAlgorithms and Election.scala. Pure functions.

The algorithms pick a leader from a partition's assignment, ISR and live
replicas; the `leader_for_*` functions wrap them into the partition's next
state (new leader, next leader epoch, new ISR), ready for a conditional write at
the zk_version it was read at. A leader is only ever taken from the ISR unless
unclean leader election is allowed: that is the rule that keeps acknowledged
writes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence, Set
from dataclasses import dataclass

from controller.context import ControllerContext
from proto.types import TopicPartition
from zk.paths import NO_LEADER, LeaderIsrAndControllerEpoch

# --- the algorithms (Kafka's PartitionLeaderElectionAlgorithms) ---


def offline_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Set[int], unclean_leader_election_enabled: bool
) -> int | None:
    """The first live ISR member in assignment order; failing that, if allowed, the first live replica (unclean)."""
    leader = next((r for r in assignment if r in live_replicas and r in isr), None)
    if leader is None and unclean_leader_election_enabled:
        leader = next((r for r in assignment if r in live_replicas), None)
    return leader


def reassign_partition_leader_election(
    target_replicas: Sequence[int], isr: Collection[int], live_replicas: Set[int]
) -> int | None:
    """The first live ISR member among a reassignment's target replicas, in their order."""
    return next((r for r in target_replicas if r in live_replicas and r in isr), None)


def preferred_replica_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Set[int]
) -> int | None:
    """The preferred replica (the first assigned), if it is live and in the ISR; nobody else."""
    if assignment and assignment[0] in live_replicas and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Set[int], shutting_down_broker_ids: Set[int]
) -> int | None:
    """The first live ISR member, in assignment order, that is not shutting down."""
    return next(
        (r for r in assignment if r in live_replicas and r in isr and r not in shutting_down_broker_ids),
        None,
    )


# --- elections over the controller's context (Kafka's Election object) ---


@dataclass(frozen=True)
class ElectionResult:
    topic_partition: TopicPartition
    # The state to write, at the zk_version the current one was read at; None: no eligible leader.
    leader_and_isr: LeaderIsrAndControllerEpoch | None
    live_replicas: tuple[int, ...]


# An election strategy as the partition state machine runs it: the partition's next state from its current one.
LeaderElection = Callable[[TopicPartition, LeaderIsrAndControllerEpoch], ElectionResult]


def new_leader_and_isr(
    current: LeaderIsrAndControllerEpoch, leader: int, isr: Sequence[int], controller_epoch: int
) -> LeaderIsrAndControllerEpoch:
    # Kafka's LeaderAndIsr.newLeaderAndIsr: every leadership change bumps the leader epoch.
    return LeaderIsrAndControllerEpoch(
        leader=leader,
        leader_epoch=current.leader_epoch + 1,
        isr=tuple(isr),
        controller_epoch=controller_epoch,
        zk_version=current.zk_version,
    )


def _live_replicas(
    context: ControllerContext, tp: TopicPartition, include_shutting_down: bool = False
) -> tuple[int, ...]:
    return tuple(
        r
        for r in context.partition_replica_assignment(tp)
        if context.is_replica_online(r, tp, include_shutting_down=include_shutting_down)
    )


def leader_for_offline(
    context: ControllerContext,
    tp: TopicPartition,
    current: LeaderIsrAndControllerEpoch,
    unclean_leader_election_enabled: bool,
) -> ElectionResult:
    """A partition whose leader is gone. The ISR keeps its live members; an unclean leader is the whole new ISR."""
    assignment = context.partition_replica_assignment(tp)
    live = _live_replicas(context, tp)
    leader = offline_partition_leader_election(assignment, current.isr, set(live), unclean_leader_election_enabled)
    if leader is None:
        return ElectionResult(tp, None, live)
    # An unclean leader is the only replica known to have what it has.
    isr = [r for r in current.isr if context.is_replica_online(r, tp)] if leader in current.isr else [leader]
    return ElectionResult(tp, new_leader_and_isr(current, leader, isr, context.epoch), live)


def leader_and_isr_without_replica(
    current: LeaderIsrAndControllerEpoch, replica_id: int, controller_epoch: int
) -> LeaderIsrAndControllerEpoch | None:
    """A replica going offline leaves the ISR (Kafka's removeReplicasFromIsr), so acks=all stops waiting for it;
    None if it is not in the ISR. The last ISR member stays: it is the one replica known to have every
    acknowledged record, and the partition waits for it (leader NO_LEADER) unless unclean election is allowed."""
    if replica_id not in current.isr:
        return None
    leader = NO_LEADER if current.leader == replica_id else current.leader
    isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != replica_id)
    return new_leader_and_isr(current, leader, isr, controller_epoch)


def leader_for_preferred_replica(
    context: ControllerContext, tp: TopicPartition, current: LeaderIsrAndControllerEpoch
) -> ElectionResult:
    """Move leadership back to the preferred replica; the ISR is unchanged."""
    assignment = context.partition_replica_assignment(tp)
    leader = preferred_replica_partition_leader_election(assignment, current.isr, set(_live_replicas(context, tp)))
    if leader is None:
        return ElectionResult(tp, None, assignment)
    return ElectionResult(tp, new_leader_and_isr(current, leader, current.isr, context.epoch), assignment)


def leader_for_reassign(
    context: ControllerContext, tp: TopicPartition, current: LeaderIsrAndControllerEpoch
) -> ElectionResult:
    """Move leadership onto the reassignment's target replicas (the context already holds the completed assignment);
    the ISR is unchanged: the replicas being removed leave it next, one fenced write each."""
    target = context.partition_full_replica_assignment(tp).target_replicas
    live = {r for r in target if context.is_replica_online(r, tp)}
    leader = reassign_partition_leader_election(target, current.isr, live)
    if leader is None:
        return ElectionResult(tp, None, target)
    return ElectionResult(tp, new_leader_and_isr(current, leader, current.isr, context.epoch), target)


def leader_for_controlled_shutdown(
    context: ControllerContext,
    tp: TopicPartition,
    current: LeaderIsrAndControllerEpoch,
    shutting_down_broker_ids: Set[int],
) -> ElectionResult:
    """Move leadership off brokers that are shutting down (still live until they deregister);
    they also leave the ISR. They still get the LeaderAndIsr: it makes them followers."""
    assignment = context.partition_replica_assignment(tp)
    live = _live_replicas(context, tp, include_shutting_down=True)
    leader = controlled_shutdown_partition_leader_election(assignment, current.isr, set(live), shutting_down_broker_ids)
    if leader is None:
        return ElectionResult(tp, None, live)
    isr = [r for r in current.isr if r not in shutting_down_broker_ids]
    return ElectionResult(tp, new_leader_and_isr(current, leader, isr, context.epoch), live)

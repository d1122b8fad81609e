"""ControllerContext: the controller's cache of brokers, assignments and states."""

from __future__ import annotations

from controller_helpers import broker, context_with, state

from controller.context import ControllerContext, PartitionAndReplica
from controller.states import PartitionState, ReplicaState
from proto.types import TopicPartition
from zk.paths import ReplicaAssignment

P0 = TopicPartition("orders", 0)
P1 = TopicPartition("orders", 1)
Q0 = TopicPartition("audit", 0)


def test_replica_and_partition_queries() -> None:
    context = context_with([broker(1), broker(2)], {P0: [1, 2], P1: [2, 3], Q0: [3]}, {P0: state(1, [1, 2])})
    assert context.all_partitions() == [Q0, P0, P1]
    assert context.replicas_on_brokers([3]) == [PartitionAndReplica(Q0, 3), PartitionAndReplica(P1, 3)]
    assert context.partitions_on_brokers([2, 3]) == [Q0, P0, P1]
    assert context.is_replica_online(2, P1) and not context.is_replica_online(3, P1)
    assert context.partitions_with_leaders() == [P0]
    assert context.partition_replica_assignment(TopicPartition("nope", 0)) == ()
    assert str(PartitionAndReplica(P0, 2)) == "[Topic=orders,Partition=0,Replica=2]"


def test_brokers_come_and_go_and_a_reregistration_replaces_the_old_one() -> None:
    context = context_with([broker(1)])
    context.add_live_brokers([broker(2), broker(1, epoch=999)])
    assert context.live_broker_ids == {1, 2}
    assert context.live_brokers[1].epoch == 999
    context.remove_live_brokers([1, 5])
    assert context.live_broker_ids == {2}


def test_remove_topic_forgets_everything_about_it() -> None:
    context = context_with([broker(1)], {P0: [1], Q0: [1]}, {P0: state(1, [1]), Q0: state(1, [1])})
    context.partition_states.update({P0: PartitionState.OnlinePartition, Q0: PartitionState.OnlinePartition})
    context.replica_states.update(
        {PartitionAndReplica(P0, 1): ReplicaState.OnlineReplica, PartitionAndReplica(Q0, 1): ReplicaState.OnlineReplica}
    )
    context.remove_topic("orders")
    assert context.all_topics == {"audit"}
    assert context.all_partitions() == [Q0]
    assert list(context.partition_leadership_info) == [Q0]
    assert list(context.partition_states) == [Q0]
    assert list(context.replica_states) == [PartitionAndReplica(Q0, 1)]


def test_reset() -> None:
    context = context_with([broker(1)], {P0: [1]}, {P0: state(1, [1])}, epoch=9)
    context.reset()
    assert (context.epoch, context.epoch_zk_version) == (0, 0)
    assert not (context.live_brokers or context.all_topics or context.partition_assignments)
    assert not (context.partition_leadership_info or context.partition_states or context.replica_states)


def recount(context: ControllerContext) -> tuple[int, int, int]:
    """The gauges' counts by a walk over every partition: what the kept counts must always equal."""
    kept = [tp for tp in context.all_partitions() if not context.is_topic_queued_up_for_deletion(tp.topic)]
    offline = sum(1 for tp in kept if context.partition_state(tp) is PartitionState.OfflinePartition)
    imbalanced = sum(1 for tp in kept if (s := context.partition_leadership_info.get(tp)) is not None
                     and s.leader != context.partition_replica_assignment(tp)[0])
    return offline, imbalanced, len(context.all_partitions())


def counts(context: ControllerContext) -> tuple[int, int, int]:
    return context.offline_partition_count, context.preferred_replica_imbalance_count, context.partition_count


def test_the_gauges_counts_follow_every_change_as_a_recount_would() -> None:
    context = context_with([broker(1), broker(2)], {P0: [1, 2], P1: [2, 3], Q0: [3]})
    assert counts(context) == recount(context) == (0, 0, 3)
    context.put_partition_leadership_info(P0, state(2, [2]))  # not its preferred leader
    context.put_partition_leadership_info(P1, state(2, [2, 3]))
    context.put_partition_leadership_info(Q0, state(3, [3]))
    assert counts(context) == recount(context) == (0, 1, 3)
    for tp in (P0, P1):
        context.put_partition_state(tp, PartitionState.OnlinePartition)
    context.put_partition_state(Q0, PartitionState.OfflinePartition)
    context.put_partition_state(Q0, PartitionState.OfflinePartition)  # again: still one
    assert counts(context) == recount(context) == (1, 1, 3)
    context.put_partition_leadership_info(P0, state(1, [1, 2], leader_epoch=1))  # the preferred leader again
    context.update_partition_full_replica_assignment(P1, ReplicaAssignment((3, 2)))  # reassigned: 3 preferred
    assert counts(context) == recount(context) == (1, 1, 3)
    context.queue_topic_deletion(["orders", "orders"])
    context.queue_topic_deletion(["orders"])  # queued twice: counted out once
    assert counts(context) == recount(context) == (1, 0, 3)
    context.put_partition_state(P1, PartitionState.OfflinePartition)  # a queued topic's changes are not counted
    assert counts(context) == recount(context) == (1, 0, 3)
    context.remove_topic("orders")
    assert counts(context) == recount(context) == (1, 0, 1)
    context.put_partition_state(Q0, PartitionState.NonExistentPartition)
    assert counts(context) == recount(context) == (0, 0, 1)
    context.put_partition_state(Q0, PartitionState.OfflinePartition)
    context.remove_topic("audit")  # removed without being queued: counted out with it
    assert counts(context) == recount(context) == (0, 0, 0)
    context.update_partition_full_replica_assignment(P0, ReplicaAssignment((1,)))
    context.reset()
    assert counts(context) == (0, 0, 0)

"""ControllerContext: the controller's cache of brokers, assignments and states."""

from __future__ import annotations

from controller_helpers import broker, context_with, state

from controller.context import PartitionAndReplica
from controller.states import PartitionState, ReplicaState
from proto.types import TopicPartition

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

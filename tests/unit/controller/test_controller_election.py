"""Leader election algorithms and elections over the controller's context (Kafka's Election object)."""

from __future__ import annotations

from controller_helpers import broker, context_with, state

from controller.election import (
    controlled_shutdown_partition_leader_election,
    leader_and_isr_without_replica,
    leader_for_controlled_shutdown,
    leader_for_offline,
    leader_for_preferred_replica,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
)
from proto.types import TopicPartition

TP = TopicPartition("orders", 0)

# --- the algorithms ---


def test_offline_election_takes_the_first_live_isr_member_in_assignment_order() -> None:
    assert (
        offline_partition_leader_election(
            [1, 2, 3], isr=[3, 2], live_replicas={2, 3}, unclean_leader_election_enabled=False
        )
        == 2
    )
    assert (
        offline_partition_leader_election(
            [1, 2, 3], isr=[3, 1], live_replicas={2, 3}, unclean_leader_election_enabled=False
        )
        == 3
    )


def test_offline_election_never_leaves_the_isr_when_unclean_election_is_off() -> None:
    assert (
        offline_partition_leader_election(
            [1, 2, 3], isr=[1], live_replicas={2, 3}, unclean_leader_election_enabled=False
        )
        is None
    )


def test_unclean_election_falls_back_to_the_first_live_replica() -> None:
    assert (
        offline_partition_leader_election(
            [1, 2, 3], isr=[1], live_replicas={3, 2}, unclean_leader_election_enabled=True
        )
        == 2
    )
    # ...but only as a last resort: an ISR member wins when there is one.
    assert (
        offline_partition_leader_election(
            [1, 2, 3], isr=[3], live_replicas={2, 3}, unclean_leader_election_enabled=True
        )
        == 3
    )
    assert (
        offline_partition_leader_election([1, 2], isr=[1], live_replicas=set(), unclean_leader_election_enabled=True)
        is None
    )


def test_preferred_election_only_elects_the_preferred_replica() -> None:
    assert preferred_replica_partition_leader_election([1, 2, 3], isr=[1, 2], live_replicas={1, 2}) == 1
    assert preferred_replica_partition_leader_election([1, 2, 3], isr=[2, 3], live_replicas={1, 2, 3}) is None
    assert preferred_replica_partition_leader_election([1, 2, 3], isr=[1, 2], live_replicas={2, 3}) is None
    assert preferred_replica_partition_leader_election([], isr=[], live_replicas=set()) is None


def test_controlled_shutdown_election_skips_brokers_shutting_down() -> None:
    assert controlled_shutdown_partition_leader_election([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == 2
    assert controlled_shutdown_partition_leader_election([1, 2, 3], [1, 3], {1, 2, 3}, {1}) == 3
    assert controlled_shutdown_partition_leader_election([1, 2], [1], {1, 2}, {1}) is None


# --- elections over the context ---


def test_leader_for_offline_bumps_the_epoch_and_keeps_live_isr_members() -> None:
    context = context_with([broker(2), broker(3)], {TP: [1, 2, 3]}, epoch=5)
    current = state(leader=1, isr=[1, 2, 3], leader_epoch=7, controller_epoch=4, zk_version=9)
    result = leader_for_offline(context, TP, current, unclean_leader_election_enabled=False)
    assert result.live_replicas == (2, 3)
    assert result.leader_and_isr == state(leader=2, isr=[2, 3], leader_epoch=8, controller_epoch=5, zk_version=9)


def test_leader_for_offline_unclean_leader_is_the_whole_isr() -> None:
    context = context_with([broker(3)], {TP: [1, 2, 3]})
    current = state(leader=1, isr=[1], leader_epoch=0)
    assert leader_for_offline(context, TP, current, unclean_leader_election_enabled=False).leader_and_isr is None
    elected = leader_for_offline(context, TP, current, unclean_leader_election_enabled=True).leader_and_isr
    assert elected is not None
    assert (elected.leader, elected.isr, elected.leader_epoch) == (3, (3,), 1)


def test_leader_for_preferred_replica_keeps_the_isr() -> None:
    context = context_with([broker(1), broker(2)], {TP: [1, 2]})
    result = leader_for_preferred_replica(context, TP, state(leader=2, isr=[2, 1], leader_epoch=3))
    assert result.leader_and_isr is not None
    assert (result.leader_and_isr.leader, result.leader_and_isr.isr, result.leader_and_isr.leader_epoch) == (
        1,
        (2, 1),
        4,
    )
    assert result.live_replicas == (1, 2)
    not_in_isr = leader_for_preferred_replica(context, TP, state(leader=2, isr=[2]))
    assert not_in_isr.leader_and_isr is None


def test_leader_for_controlled_shutdown_removes_the_broker_from_the_isr() -> None:
    context = context_with([broker(1), broker(2), broker(3)], {TP: [1, 2, 3]})
    result = leader_for_controlled_shutdown(context, TP, state(leader=1, isr=[1, 2, 3], leader_epoch=2), {1})
    assert result.leader_and_isr is not None
    assert (result.leader_and_isr.leader, result.leader_and_isr.isr, result.leader_and_isr.leader_epoch) == (
        2,
        (2, 3),
        3,
    )
    alone = leader_for_controlled_shutdown(context, TP, state(leader=1, isr=[1]), {1})
    assert alone.leader_and_isr is None


def test_an_offline_replica_leaves_the_isr_with_the_next_leader_epoch() -> None:
    current = state(1, [1, 2, 3], leader_epoch=4, zk_version=7)
    # A follower: the leader stays.
    assert leader_and_isr_without_replica(current, 2, controller_epoch=9) == state(1, [1, 3], 5, 9, zk_version=7)
    # The leader: nobody leads until an election.
    assert leader_and_isr_without_replica(current, 1, controller_epoch=9) == state(-1, [2, 3], 5, 9, zk_version=7)
    # Not in the ISR: nothing to write.
    assert leader_and_isr_without_replica(state(1, [1]), 3, controller_epoch=9) is None


def test_the_last_isr_member_stays_in_the_isr() -> None:
    # It is the only replica known to hold every acknowledged record: the partition waits for it.
    assert leader_and_isr_without_replica(state(2, [2], leader_epoch=1), 2, controller_epoch=3) == state(-1, [2], 2, 3)

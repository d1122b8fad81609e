"""PartitionStateMachine: new partitions go online with Kafka's initial leader and ISR; the rules are enforced."""

from __future__ import annotations

import logging

import pytest
from controller_helpers import CONTROLLER_ID, Sent, batch_for, broker, context_with, state, state_change_log

from controller.context import ControllerContext
from controller.partition_state_machine import PartitionStateMachine, initial_leader_and_isr
from controller.request_batch import ControllerBrokerRequestBatch
from controller.states import PartitionState
from proto.types import TopicPartition
from tests.fakes import FakeZk
from zk.client import ControllerMovedError
from zk.paths import LeaderIsrAndControllerEpoch

P0 = TopicPartition("orders", 0)
P1 = TopicPartition("orders", 1)
P2 = TopicPartition("orders", 2)


def machine(
    context: ControllerContext, zk: FakeZk, sent: Sent, unclean_topics: frozenset[str] = frozenset()
) -> tuple[PartitionStateMachine, ControllerBrokerRequestBatch]:
    batch = batch_for(context, sent)
    psm = PartitionStateMachine(
        CONTROLLER_ID,
        context,
        zk,
        batch,
        state_change_log(),
        unclean_leader_election_enabled=lambda topic: topic in unclean_topics,
    )
    return psm, batch


def fenced_zk(context: ControllerContext) -> FakeZk:
    zk = FakeZk()
    zk.controller_epoch_zk_version = context.epoch_zk_version
    return zk


def test_initial_leader_and_isr() -> None:
    assert initial_leader_and_isr([3, 1], controller_epoch=4) == state(leader=3, isr=[3, 1], controller_epoch=4)


def test_new_partitions_go_online_with_the_first_live_replica_as_leader() -> None:
    context = context_with([broker(1), broker(2), broker(3)], {P0: [1, 2, 3], P1: [3, 1, 2], P2: [4, 2, 1]}, epoch=3)
    zk, sent = fenced_zk(context), Sent()
    psm, _ = machine(context, zk, sent)
    assert psm.handle_state_changes([P0, P1, P2], PartitionState.NewPartition) == {P0, P1, P2}
    assert context.partition_states == dict.fromkeys([P0, P1, P2], PartitionState.NewPartition)

    assert psm.handle_state_changes([P0, P1, P2], PartitionState.OnlinePartition) == {P0, P1, P2}
    # Leader: the first live replica in assignment order; ISR: the live replicas, in assignment order; epoch 0.
    expected = {
        P0: state(1, [1, 2, 3], controller_epoch=3),
        P1: state(3, [3, 1, 2], controller_epoch=3),
        P2: state(2, [2, 1], controller_epoch=3),  # broker 4 is not live
    }
    assert zk.partition_states == expected
    assert context.partition_leadership_info == expected
    assert context.partition_states == dict.fromkeys([P0, P1, P2], PartitionState.OnlinePartition)


def test_online_partitions_are_sent_to_their_isr_as_new_replicas() -> None:
    context = context_with([broker(1), broker(2)], {P0: [1, 2], P1: [2, 3]})
    sent = Sent()
    psm, batch = machine(context, fenced_zk(context), sent)
    psm.handle_state_changes([P0, P1], PartitionState.NewPartition)
    psm.handle_state_changes([P0, P1], PartitionState.OnlinePartition)
    batch.send_requests_to_brokers()
    requests = sent.leader_and_isr()
    assert sorted(requests) == [1, 2]
    assert [(s.topic_name, s.partition_index, s.is_new) for s in requests[1].partition_states] == [("orders", 0, True)]
    assert [(s.partition_index, s.leader, list(s.isr), list(s.replicas)) for s in requests[2].partition_states] == [
        (0, 1, [1, 2], [1, 2]),
        (1, 2, [2], [2, 3]),
    ]


def test_a_partition_without_live_replicas_stays_new(caplog: pytest.LogCaptureFixture) -> None:
    context = context_with([broker(1)], {P0: [2, 3]})
    zk = fenced_zk(context)
    psm, _ = machine(context, zk, Sent())
    psm.handle_state_changes([P0], PartitionState.NewPartition)
    with caplog.at_level(logging.ERROR, "state.change.logger"):
        assert psm.handle_state_changes([P0], PartitionState.OnlinePartition) == set()
    assert "No assigned replica is alive" in caplog.text
    assert context.partition_state(P0) is PartitionState.NewPartition
    assert zk.partition_states == {}

    # When a replica's broker registers, trigger_online_partition_state_change brings it online.
    context.add_live_brokers([broker(3)])
    psm.trigger_online_partition_state_change()
    assert context.partition_state(P0) is PartitionState.OnlinePartition
    assert zk.partition_states[P0] == state(3, [3])


def test_invalid_transitions_are_logged_and_refused(caplog: pytest.LogCaptureFixture) -> None:
    context = context_with([broker(1)], {P0: [1], P1: [1]})
    zk = fenced_zk(context)
    psm, _ = machine(context, zk, Sent())
    psm.handle_state_changes([P0], PartitionState.NewPartition)
    psm.handle_state_changes([P0], PartitionState.OnlinePartition)
    with caplog.at_level(logging.ERROR, "state.change.logger"):
        assert psm.handle_state_changes([P0], PartitionState.NewPartition) == set()  # Online -> New
        assert psm.handle_state_changes([P1], PartitionState.OnlinePartition) == set()  # NonExistent -> Online
    assert "failed to change state for partition orders-0 from OnlinePartition to NewPartition" in caplog.text
    assert "failed to change state for partition orders-1 from NonExistentPartition to OnlinePartition" in caplog.text
    assert context.partition_state(P0) is PartitionState.OnlinePartition
    assert context.partition_state(P1) is PartitionState.NonExistentPartition
    assert P1 not in zk.partition_states


def test_a_fenced_write_raises_and_changes_nothing() -> None:
    context = context_with([broker(1)], {P0: [1]})
    zk = fenced_zk(context)
    zk.elect_other(2002)
    sent = Sent()
    psm, batch = machine(context, zk, sent)
    psm.handle_state_changes([P0], PartitionState.NewPartition)
    with pytest.raises(ControllerMovedError):
        psm.handle_state_changes([P0], PartitionState.OnlinePartition)
    assert context.partition_state(P0) is PartitionState.NewPartition
    assert context.partition_leadership_info == {}
    assert batch.is_empty


def test_a_retried_create_finds_its_own_znode() -> None:
    # The create landed, the answer was lost, the retry found NodeExists: the znode is ours, the partition online.
    context = context_with([broker(1), broker(2)], {P0: [1, 2]})
    zk = fenced_zk(context)
    zk.partition_states[P0] = state(1, [1, 2], zk_version=0)
    psm, _ = machine(context, zk, Sent())
    psm.handle_state_changes([P0], PartitionState.NewPartition)
    assert psm.handle_state_changes([P0], PartitionState.OnlinePartition) == {P0}
    assert context.partition_leadership_info[P0] == state(1, [1, 2])


def test_somebody_elses_state_znode_is_not_overwritten(caplog: pytest.LogCaptureFixture) -> None:
    context = context_with([broker(1), broker(2)], {P0: [1, 2]})
    zk = fenced_zk(context)
    theirs = state(2, [2], leader_epoch=5)
    zk.partition_states[P0] = theirs
    psm, _ = machine(context, zk, Sent())
    psm.handle_state_changes([P0], PartitionState.NewPartition)
    with caplog.at_level(logging.ERROR, "state.change.logger"):
        assert psm.handle_state_changes([P0], PartitionState.OnlinePartition) == set()
    assert "already exists" in caplog.text
    assert zk.partition_states[P0] == theirs
    assert context.partition_state(P0) is PartitionState.NewPartition


def test_startup_classifies_partitions_and_initializes_new_ones() -> None:
    context = context_with(
        [broker(1), broker(2)],
        {P0: [1, 2], P1: [3, 2], P2: [2, 1]},
        states={P0: state(1, [1, 2]), P1: state(3, [3])},  # P1's leader, 3, is not live
    )
    zk = fenced_zk(context)
    machine(context, zk, Sent())[0].startup()
    assert context.partition_states == {
        P0: PartitionState.OnlinePartition,
        P1: PartitionState.OfflinePartition,
        P2: PartitionState.OnlinePartition,
    }
    assert zk.partition_states == {P2: state(2, [2, 1])}


def online(context: ControllerContext, zk: FakeZk, tp: TopicPartition, current: LeaderIsrAndControllerEpoch) -> None:
    zk.partition_states[tp] = context.partition_leadership_info[tp] = current
    context.partition_states[tp] = PartitionState.OnlinePartition


def test_an_offline_partition_elects_the_first_live_isr_member() -> None:
    context = context_with([broker(2), broker(3)], {P0: [1, 2, 3]}, epoch=2)
    zk, sent = fenced_zk(context), Sent()
    online(context, zk, P0, state(1, [1, 3, 2], leader_epoch=4, zk_version=6))
    psm, batch = machine(context, zk, sent)
    assert psm.handle_state_changes([P0], PartitionState.OfflinePartition) == {P0}
    assert context.partition_state(P0) is PartitionState.OfflinePartition
    assert psm.handle_state_changes([P0], PartitionState.OnlinePartition) == {P0}
    # Assignment order, not ISR order; ISR = its live members; next leader epoch; written at version 6.
    assert zk.partition_states[P0] == state(2, [3, 2], leader_epoch=5, controller_epoch=2, zk_version=7)
    assert context.partition_leadership_info[P0] == zk.partition_states[P0]
    assert context.partition_state(P0) is PartitionState.OnlinePartition
    batch.send_requests_to_brokers()
    assert sorted(sent.leader_and_isr()) == [2, 3]


def test_an_offline_partition_without_a_live_isr_member_stays_offline(caplog: pytest.LogCaptureFixture) -> None:
    context = context_with([broker(3)], {P0: [1, 2, 3]})
    zk = fenced_zk(context)
    online(context, zk, P0, state(-1, [1], leader_epoch=4))
    context.partition_states[P0] = PartitionState.OfflinePartition
    psm, batch = machine(context, zk, Sent())
    with caplog.at_level(logging.ERROR, "state.change.logger"):
        psm.trigger_online_partition_state_change()
    assert "No replica in ISR for partition orders-0 is alive" in caplog.text
    assert context.partition_state(P0) is PartitionState.OfflinePartition
    assert zk.partition_states[P0] == state(-1, [1], leader_epoch=4)
    assert batch.is_empty


def test_unclean_election_is_asked_per_topic_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    context = context_with([broker(3)], {P0: [1, 2, 3]})
    zk = fenced_zk(context)
    online(context, zk, P0, state(-1, [1], leader_epoch=4))
    context.partition_states[P0] = PartitionState.OfflinePartition
    psm, _ = machine(context, zk, Sent(), unclean_topics=frozenset({"orders"}))
    with caplog.at_level(logging.WARNING, "state.change.logger"):
        psm.trigger_online_partition_state_change()
    assert "Unclean leader election" in caplog.text
    assert zk.partition_states[P0] == state(3, [3], leader_epoch=5, zk_version=1)


def test_an_election_retries_on_a_concurrent_write() -> None:
    context = context_with([broker(2), broker(3)], {P0: [1, 2, 3]})
    zk = fenced_zk(context)
    online(context, zk, P0, state(1, [1, 2, 3]))
    context.partition_states[P0] = PartitionState.OfflinePartition
    zk.concurrent_writes[P0] = state(1, [1, 3])  # the old leader shrank the ISR meanwhile
    psm, _ = machine(context, zk, Sent())
    assert psm.handle_state_changes([P0], PartitionState.OnlinePartition) == {P0}
    assert zk.partition_states[P0] == state(3, [3], leader_epoch=1, zk_version=2)


def test_a_state_written_by_a_newer_controller_is_left_alone(caplog: pytest.LogCaptureFixture) -> None:
    context = context_with([broker(2)], {P0: [1, 2]}, epoch=1)
    zk = fenced_zk(context)
    online(context, zk, P0, state(1, [1, 2], controller_epoch=5))
    context.partition_states[P0] = PartitionState.OfflinePartition
    psm, _ = machine(context, zk, Sent())
    with caplog.at_level(logging.ERROR, "state.change.logger"):
        assert psm.handle_state_changes([P0], PartitionState.OnlinePartition) == set()
    assert "already written by another controller" in caplog.text


def test_deletion_moves_offline_partitions_to_non_existent() -> None:
    context = context_with([broker(1)], {P0: [1]})
    zk = fenced_zk(context)
    online(context, zk, P0, state(1, [1]))
    psm, _ = machine(context, zk, Sent())
    assert psm.handle_state_changes([P0], PartitionState.NonExistentPartition) == set()  # Online: refused
    psm.handle_state_changes([P0], PartitionState.OfflinePartition)
    assert psm.handle_state_changes([P0], PartitionState.NonExistentPartition) == {P0}
    assert context.partition_state(P0) is PartitionState.NonExistentPartition

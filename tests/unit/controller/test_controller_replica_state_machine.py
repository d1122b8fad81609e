"""ReplicaStateMachine: live replicas are told what they host; the rules are enforced."""

from __future__ import annotations

import logging

import pytest
from controller_helpers import CONTROLLER_ID, Sent, batch_for, broker, context_with, state, state_change_log

from controller.context import ControllerContext, PartitionAndReplica
from controller.replica_state_machine import ReplicaStateMachine
from controller.request_batch import ControllerBrokerRequestBatch
from controller.states import ReplicaState
from proto.types import TopicPartition
from tests.fakes import FakeZk

P0 = TopicPartition("orders", 0)
P1 = TopicPartition("orders", 1)


def machine(
    context: ControllerContext, sent: Sent, zk: FakeZk | None = None
) -> tuple[ReplicaStateMachine, ControllerBrokerRequestBatch]:
    batch = batch_for(context, sent)
    return ReplicaStateMachine(CONTROLLER_ID, context, zk or FakeZk(), batch, state_change_log()), batch


def test_startup_marks_live_replicas_online_and_sends_them_their_partitions() -> None:
    context = context_with(
        [broker(1), broker(2)], {P0: [1, 2, 3], P1: [2, 3, 1]}, states={P0: state(1, [1, 2]), P1: state(2, [2, 1])}
    )
    sent = Sent()
    rsm, batch = machine(context, sent)
    rsm.startup()
    assert context.replica_states == {
        PartitionAndReplica(P0, 1): ReplicaState.OnlineReplica,
        PartitionAndReplica(P0, 2): ReplicaState.OnlineReplica,
        PartitionAndReplica(P0, 3): ReplicaState.ReplicaDeletionIneligible,
        PartitionAndReplica(P1, 2): ReplicaState.OnlineReplica,
        PartitionAndReplica(P1, 3): ReplicaState.ReplicaDeletionIneligible,
        PartitionAndReplica(P1, 1): ReplicaState.OnlineReplica,
    }
    batch.send_requests_to_brokers()
    requests = sent.leader_and_isr()
    assert sorted(requests) == [1, 2]
    for request in requests.values():
        assert [(s.partition_index, s.is_new) for s in request.partition_states] == [(0, False), (1, False)]


def test_new_replicas_go_online_without_a_request() -> None:
    # Their partition's LeaderAndIsr (is_new) went out when the partition went online.
    context = context_with([broker(1)], {P0: [1]})
    sent = Sent()
    rsm, batch = machine(context, sent)
    replica = PartitionAndReplica(P0, 1)
    rsm.handle_state_changes([replica], ReplicaState.NewReplica)
    assert context.replica_state(replica) is ReplicaState.NewReplica
    assert batch.is_empty
    context.partition_leadership_info[P0] = state(1, [1])
    rsm.handle_state_changes([replica], ReplicaState.OnlineReplica)
    assert context.replica_state(replica) is ReplicaState.OnlineReplica
    assert batch.is_empty


@pytest.mark.parametrize("previous", [ReplicaState.OnlineReplica, ReplicaState.ReplicaDeletionIneligible])
def test_a_returning_replica_gets_its_partition_state(previous: ReplicaState) -> None:
    context = context_with([broker(1), broker(3)], {P0: [1, 3]}, states={P0: state(1, [1], leader_epoch=2)})
    replica = PartitionAndReplica(P0, 3)
    context.replica_states[replica] = previous
    sent = Sent()
    rsm, batch = machine(context, sent)
    rsm.handle_state_changes([replica], ReplicaState.OnlineReplica)
    batch.send_requests_to_brokers()
    (request,) = sent.leader_and_isr().values()
    assert [(s.leader, s.leader_epoch, list(s.isr), list(s.replicas)) for s in request.partition_states] == [
        (1, 2, [1], [1, 3])
    ]
    assert context.replica_state(replica) is ReplicaState.OnlineReplica


def test_a_replica_of_a_partition_without_leader_goes_online_silently() -> None:
    context = context_with([broker(1)], {P0: [1]})
    replica = PartitionAndReplica(P0, 1)
    context.replica_states[replica] = ReplicaState.ReplicaDeletionIneligible
    rsm, batch = machine(context, Sent())
    rsm.handle_state_changes([replica], ReplicaState.OnlineReplica)
    assert context.replica_state(replica) is ReplicaState.OnlineReplica
    assert batch.is_empty


def test_a_replica_added_to_a_led_partition_starts_as_a_new_follower(caplog: pytest.LogCaptureFixture) -> None:
    # Reassignment: the partition has a leader, the new replica learns it with is_new (it has no log yet).
    context = context_with([broker(1), broker(4)], {P0: [4, 1]}, states={P0: state(1, [1], leader_epoch=3)})
    sent = Sent()
    rsm, batch = machine(context, sent)
    rsm.handle_state_changes([PartitionAndReplica(P0, 4)], ReplicaState.NewReplica)
    batch.send_requests_to_brokers()
    (request,) = sent.leader_and_isr().values()
    assert sent.leader_and_isr().keys() == {4}
    assert [(s.leader, s.leader_epoch, list(s.replicas), s.is_new) for s in request.partition_states] == [
        (1, 3, [4, 1], True)
    ]
    assert context.replica_state(PartitionAndReplica(P0, 4)) is ReplicaState.NewReplica
    # The leader itself cannot be a new replica.
    with caplog.at_level(logging.ERROR, "state.change.logger"):
        rsm.handle_state_changes([PartitionAndReplica(P0, 1)], ReplicaState.NewReplica)
    assert "it is being requested to become leader" in caplog.text
    assert context.replica_state(PartitionAndReplica(P0, 1)) is ReplicaState.NonExistentReplica


def test_invalid_transitions_are_logged_and_refused(caplog: pytest.LogCaptureFixture) -> None:
    context = context_with([broker(1)], {P0: [1]})
    replica = PartitionAndReplica(P0, 1)
    rsm, batch = machine(context, Sent())
    with caplog.at_level(logging.ERROR, "state.change.logger"):
        rsm.handle_state_changes([replica], ReplicaState.OnlineReplica)  # NonExistentReplica -> OnlineReplica
    assert "from NonExistentReplica to OnlineReplica" in caplog.text
    assert context.replica_state(replica) is ReplicaState.NonExistentReplica
    assert batch.is_empty
    rsm.handle_state_changes([replica], ReplicaState.NewReplica)
    rsm.handle_state_changes([replica], ReplicaState.OnlineReplica)
    with caplog.at_level(logging.ERROR, "state.change.logger"):
        rsm.handle_state_changes([replica], ReplicaState.NewReplica)  # OnlineReplica -> NewReplica
    assert context.replica_state(replica) is ReplicaState.OnlineReplica


def test_offline_replicas_leave_the_isr_and_the_others_are_told() -> None:
    context = context_with(
        [broker(1), broker(3)],
        {P0: [1, 2, 3], P1: [2, 3]},
        states={P0: state(1, [1, 2, 3], zk_version=3), P1: state(2, [2], leader_epoch=6, zk_version=1)},
    )
    zk = FakeZk()
    zk.controller_epoch_zk_version = context.epoch_zk_version
    zk.partition_states = dict(context.partition_leadership_info)
    replicas = [PartitionAndReplica(P0, 2), PartitionAndReplica(P1, 2)]
    for replica in replicas:
        context.replica_states[replica] = ReplicaState.OnlineReplica
    sent = Sent()
    rsm, batch = machine(context, sent, zk)
    rsm.handle_state_changes(replicas, ReplicaState.OfflineReplica)
    assert all(context.replica_state(r) is ReplicaState.OfflineReplica for r in replicas)
    # A follower leaves; the last ISR member (and leader) stays in the ISR but no longer leads.
    assert zk.partition_states[P0] == state(1, [1, 3], leader_epoch=1, zk_version=4)
    assert zk.partition_states[P1] == state(-1, [2], leader_epoch=7, zk_version=2)
    assert context.partition_leadership_info == zk.partition_states
    batch.send_requests_to_brokers()
    requests = sent.leader_and_isr()
    assert sorted(requests) == [1, 3]
    assert [s.partition_index for s in requests[3].partition_states] == [0, 1]
    ((_, update_metadata), _) = sent.update_metadata()
    assert [list(s.offline_replicas) for s in update_metadata.partition_states] == [[2], [2]]


def test_deletion_sends_stop_replica_with_delete_and_walks_the_deletion_states() -> None:
    context = context_with([broker(1)], {P0: [1]}, states={P0: state(1, [1])})
    zk = FakeZk()
    zk.controller_epoch_zk_version = context.epoch_zk_version
    zk.partition_states = dict(context.partition_leadership_info)
    context.topics_to_be_deleted.add("orders")
    replica = PartitionAndReplica(P0, 1)
    context.replica_states[replica] = ReplicaState.OnlineReplica
    sent = Sent()
    rsm, batch = machine(context, sent, zk)
    rsm.handle_state_changes([replica], ReplicaState.ReplicaDeletionSuccessful)  # not started: refused
    assert context.replica_state(replica) is ReplicaState.OnlineReplica
    rsm.handle_state_changes([replica], ReplicaState.OfflineReplica)
    rsm.handle_state_changes([replica], ReplicaState.ReplicaDeletionStarted)
    batch.send_requests_to_brokers()
    assert sent.leader_and_isr() == {}  # a topic being deleted gets no new leaders
    ((broker_id, stop),) = sent.stop_replica()
    assert (broker_id, stop.delete_partitions, [p.partition_index for p in stop.partitions]) == (1, True, [0])
    assert len(sent.callbacks[1]) == 1
    rsm.handle_state_changes([replica], ReplicaState.ReplicaDeletionSuccessful)
    rsm.handle_state_changes([replica], ReplicaState.NonExistentReplica)
    assert replica not in context.replica_states

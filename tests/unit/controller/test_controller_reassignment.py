"""Partition reassignment (Kafka's onPartitionReassignment with /admin/reassign_partitions): the pure rules, and the
controller over an in-memory ZooKeeper - new replicas start as followers, the reassignment completes when they are
all in the ISR, the leader moves onto the targets, the removed replicas leave the ISR and delete their logs."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, cast

import pytest
from controller_helpers import FakeChannelManager, broker, controller_config

from controller.channel_manager import ControllerChannelManager
from controller.context import PartitionAndReplica
from controller.controller import KafkaController
from controller.election import reassign_partition_leader_election
from controller.events import (
    BrokerChange,
    PartitionReassignment,
    PartitionReassignmentIsrChange,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
)
from controller.reassignment import (
    invalid_target_error,
    is_reassignment_complete,
    leader_must_move,
    reassignment_to_start,
    remaining_requests,
    unneeded_replicas,
)
from controller.states import ReplicaState
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.fakes import FakeZk
from zk.client import KafkaZkClient
from zk.paths import ReplicaAssignment

P0 = TopicPartition("orders", 0)
P1 = TopicPartition("orders", 1)

# --- the rules ---


def test_reassign_to_puts_the_targets_first_and_records_what_is_added_and_removed() -> None:
    # Kafka's example in updateCurrentReassignment: [1, 2, 3] reassigned to [3, 4, 2] is [3, 4, 2, 1] meanwhile.
    moving = ReplicaAssignment((1, 2, 3)).reassign_to([3, 4, 2])
    assert moving == ReplicaAssignment((3, 4, 2, 1), adding_replicas=(4,), removing_replicas=(1,))
    assert (moving.origin_replicas, moving.target_replicas, moving.is_being_reassigned) == ((3, 2, 1), (3, 4, 2), True)
    # A new target replaces the running one, from the original replicas.
    assert moving.reassign_to([5, 6]) == ReplicaAssignment((5, 6, 3, 2, 1), (5, 6), (3, 2, 1))
    # Back to the original replicas: nothing added or removed (a cancellation; the order is the target's).
    assert moving.reassign_to([1, 2, 3]) == ReplicaAssignment((1, 2, 3))
    assert not ReplicaAssignment((1, 2, 3)).reassign_to([3, 2, 1]).is_being_reassigned


@pytest.mark.parametrize(
    ("replicas", "message"),
    [
        ([], "Empty replica list specified in partition reassignment."),
        ([1, 2, 1], "Duplicate replica ids in partition reassignment replica list: [1, 2, 1]"),
        ([1, -2], "Invalid broker id in replica list: [1, -2]"),
    ],
)
def test_invalid_targets_are_refused_with_kafkas_messages(replicas: list[int], message: str) -> None:
    error = invalid_target_error(replicas)
    assert error is not None
    assert (error.code, error.message) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)
    # A target broker that is not registered is fine for the controller: the reassignment waits for it.
    assert invalid_target_error([2, 3, 99]) is None


def test_completion_waits_for_every_target_replica_in_the_isr() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to([2, 3, 4])
    assert not is_reassignment_complete(moving, [1, 2, 3])
    assert is_reassignment_complete(moving, [1, 2, 3, 4])
    assert is_reassignment_complete(moving, [4, 3, 2])  # the removed replica may have left already
    assert is_reassignment_complete(ReplicaAssignment((1, 2)), [1])  # nothing reassigned


def test_the_leader_moves_only_when_it_is_not_a_live_target() -> None:
    assert leader_must_move([2, 3, 4], 1, leader_alive=True)
    assert not leader_must_move([2, 3, 4], 2, leader_alive=True)
    assert leader_must_move([2, 3, 4], 2, leader_alive=False)
    # The new leader: the first live target replica in the ISR, in the target order.
    assert reassign_partition_leader_election([4, 3, 2], [1, 2, 3, 4], {2, 3, 4}) == 4
    assert reassign_partition_leader_election([4, 3, 2], [1, 2, 3], {2, 3, 4}) == 3
    assert reassign_partition_leader_election([4], [1, 2, 3], {4}) is None


def test_a_request_that_is_already_running_is_not_started_again() -> None:
    current = ReplicaAssignment((1, 2, 3))
    moving = current.reassign_to([2, 3, 4])
    assert reassignment_to_start(current, False, [2, 3, 4]) == moving
    assert reassignment_to_start(moving, True, [2, 3, 4]) is None
    # Kafka keeps the original replicas in their RS order (the targets came first): [2, 3, 1].
    assert reassignment_to_start(moving, True, [4, 5, 6]) == ReplicaAssignment((4, 5, 6, 2, 3, 1), (4, 5, 6), (2, 3, 1))
    # Finished but still in the request znode (the controller died in between): it completes at once.
    assert reassignment_to_start(ReplicaAssignment((2, 3, 4)), False, [2, 3, 4]) == ReplicaAssignment((2, 3, 4))
    # A replaced reassignment stops the replicas the new one does not want.
    assert unneeded_replicas(moving, moving.reassign_to([2, 3, 5])) == (4,)


def test_only_finished_requests_leave_the_znode() -> None:
    requested = {P0: (2, 3, 4), P1: (3, 4, 1)}
    assert remaining_requests(requested, {P0: (2, 3, 4)}) == {P1: (3, 4, 1)}
    # Replaced meanwhile by a request for other replicas: it stays.
    assert remaining_requests(requested, {P0: (4, 3, 2)}) == requested
    assert remaining_requests(requested, {P0: (2, 3, 4), P1: (3, 4, 1)}) == {}


# --- the controller ---


@pytest.fixture
def zk() -> FakeZk:
    zk = FakeZk()
    zk.brokers = {b: broker(b) for b in (1, 2, 3, 4)}
    zk.add_topic("orders", {0: [1, 2, 3], 1: [2, 1, 3]})
    return zk


@pytest.fixture
def channels() -> FakeChannelManager:
    return FakeChannelManager()


def start(zk: FakeZk, channels: FakeChannelManager, clear: bool = True) -> KafkaController:
    controller = KafkaController(
        controller_config(auto_leader_rebalance_enable="false"),
        cast(KafkaZkClient, zk),
        cast(ControllerChannelManager, cast(Any, channels)),
    )
    controller.process(Startup())
    controller.process(TopicChange())
    if clear:
        channels.sent.clear()
    return controller


def request(zk: FakeZk, controller: KafkaController, reassignment: dict[TopicPartition, tuple[int, ...]]) -> None:
    """What `reassign-partitions --execute` does, and the watch's event."""
    zk.partition_reassignment = dict(reassignment)
    controller.process(PartitionReassignment())


def join_isr(zk: FakeZk, controller: KafkaController, tp: TopicPartition, replica: int) -> None:
    """The leader adds a caught-up replica to the ISR (a conditional write), and the state watch fires."""
    current = zk.partition_states[tp]
    zk.partition_states[tp] = replace(current, isr=(*current.isr, replica), zk_version=current.zk_version + 1)
    controller.process(PartitionReassignmentIsrChange(tp))


def partition_state_for(request_: pb.LeaderAndIsrRequest, tp: TopicPartition) -> pb.LeaderAndIsrPartitionState:
    (found,) = [s for s in request_.partition_states if (s.topic_name, s.partition_index) == (tp.topic, tp.partition)]
    return found


def test_new_replicas_start_as_followers_of_the_current_leader(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = start(zk, channels)
    before = zk.partition_states[P0]
    request(zk, controller, {P0: (2, 3, 4)})

    assert zk.topics["orders"].partitions[0] == ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    after = zk.partition_states[P0]
    assert (after.leader, after.isr, after.leader_epoch) == (1, (1, 2, 3), before.leader_epoch + 1)
    requests = channels.sent.leader_and_isr()
    assert sorted(requests) == [1, 2, 3, 4]
    for broker_id, leader_and_isr in requests.items():
        s = partition_state_for(leader_and_isr, P0)
        assert (s.leader, s.leader_epoch, list(s.replicas), s.is_new) == (
            1, after.leader_epoch, [2, 3, 4, 1], broker_id == 4
        )
    assert controller.context.replica_state(PartitionAndReplica(P0, 4)) is ReplicaState.NewReplica
    assert controller.context.partitions_being_reassigned == {P0}
    assert P0 in zk.partition_state_watches
    assert zk.partition_reassignment == {P0: (2, 3, 4)}
    assert not channels.sent.stop_replica()

    # The same request read again (the znode changed for another partition, a takeover): nothing new starts.
    channels.sent.clear()
    controller.process(PartitionReassignment())
    assert zk.partition_states[P0] == after and not channels.sent.requests


@pytest.mark.parametrize(
    ("target", "new_leader"),
    [((2, 3, 4), 2), ((4, 3, 2), 4)],
    ids=["leader-moves-to-the-first-target", "the-new-replica-leads"],
)
def test_completion_moves_the_leader_and_removes_the_old_replica(
    zk: FakeZk, channels: FakeChannelManager, target: tuple[int, ...], new_leader: int, caplog: pytest.LogCaptureFixture
) -> None:
    controller = start(zk, channels)
    request(zk, controller, {P0: target, P1: (2, 3, 4)})
    controller.process(PartitionReassignmentIsrChange(P0))  # the watch's first call: not complete yet
    assert controller.context.partitions_being_reassigned == {P0, P1}
    channels.sent.clear()
    epoch = zk.partition_states[P0].leader_epoch

    join_isr(zk, controller, P0, 4)

    state = zk.partition_states[P0]
    assert state.leader == new_leader and sorted(state.isr) == [2, 3, 4]
    assert state.leader_epoch == epoch + 2  # elected, then broker 1 left the ISR
    assert zk.topics["orders"].partitions[0] == ReplicaAssignment(target)
    assert zk.topics["orders"].partitions[1] == ReplicaAssignment((2, 3, 4, 1), (4,), (1,))  # untouched
    assert zk.partition_reassignment == {P1: (2, 3, 4)}
    assert controller.context.partitions_being_reassigned == {P1}
    watch, _ = zk.partition_state_watches[P0]
    assert watch.cancelled
    (stop,) = channels.sent.stop_replica()
    assert stop[0] == 1 and stop[1].delete_partitions
    assert [(p.topic_name, p.partition_index) for p in stop[1].partitions] == [("orders", 0)]
    assert PartitionAndReplica(P0, 1) not in controller.context.replica_states
    assert controller.context.replica_state(PartitionAndReplica(P0, 4)) is ReplicaState.OnlineReplica
    # Brokers learn the final replica list; broker 1 is not told to lead or follow any more.
    leaders = channels.sent.leader_and_isr()
    assert 1 not in leaders or all(s.partition_index != 0 for s in leaders[1].partition_states)
    assert list(partition_state_for(leaders[new_leader], P0).replicas) == list(target)
    (_, metadata), *_ = [(b, r) for b, r in channels.sent.update_metadata() if b == 1]
    (p0_metadata,) = [s for s in metadata.partition_states if s.partition_index == 0]
    assert list(p0_metadata.replicas) == list(target) and p0_metadata.leader == new_leader

    # The answer to the StopReplica is not waited for, and topic deletion ignores it.
    states_before = dict(controller.context.replica_states)
    with caplog.at_level(logging.INFO):
        controller.process(TopicDeletionStopReplicaResponseReceived(1, ErrorCode.NONE, ((P0, ErrorCode.NONE),)))
    assert controller.context.replica_states == states_before
    assert "failed to change state" not in caplog.text and "Deletion successfully completed" not in caplog.text
    assert zk.topics["orders"].partitions[0] == ReplicaAssignment(target)

    # The last partition done deletes the znode.
    join_isr(zk, controller, P1, 4)
    assert zk.partition_reassignment == {}
    assert controller.context.partitions_being_reassigned == set()


def test_a_leader_that_stays_gets_a_new_leader_epoch_with_the_final_replicas(
    zk: FakeZk, channels: FakeChannelManager
) -> None:
    controller = start(zk, channels)
    request(zk, controller, {P1: (2, 3, 4)})  # P1 is led by broker 2
    epoch = zk.partition_states[P1].leader_epoch
    channels.sent.clear()
    join_isr(zk, controller, P1, 4)
    state = zk.partition_states[P1]
    assert (state.leader, state.isr, state.leader_epoch) == (2, (2, 3, 4), epoch + 2)
    assert list(partition_state_for(channels.sent.leader_and_isr()[2], P1).replicas) == [2, 3, 4]


def test_refused_requests_leave_the_znode_and_the_valid_ones_start(
    zk: FakeZk, channels: FakeChannelManager, caplog: pytest.LogCaptureFixture
) -> None:
    controller = start(zk, channels)
    unknown = TopicPartition("orders", 7)
    with caplog.at_level(logging.WARNING):
        request(zk, controller, {P0: (2, 3, 3), P1: (2, 3, 4), unknown: (1, 2)})
    assert "Failed reassignment through zk with the following errors" in caplog.text
    assert "INVALID_REPLICA_ASSIGNMENT: Duplicate replica ids in partition reassignment replica list" in caplog.text
    assert "UNKNOWN_TOPIC_OR_PARTITION: The partition does not exist." in caplog.text
    assert zk.partition_reassignment == {P1: (2, 3, 4)}
    assert controller.context.partitions_being_reassigned == {P1}
    assert zk.topics["orders"].partitions[0] == ReplicaAssignment((1, 2, 3))


def test_a_target_broker_that_is_down_holds_the_reassignment_until_it_returns(
    zk: FakeZk, channels: FakeChannelManager
) -> None:
    del zk.brokers[4]
    controller = start(zk, channels)
    request(zk, controller, {P0: (2, 3, 4)})
    assert 4 not in channels.sent.leader_and_isr()
    assert zk.topics["orders"].partitions[0] == ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    channels.sent.clear()
    epoch = zk.partition_states[P0].leader_epoch

    zk.brokers[4] = broker(4)
    controller.process(BrokerChange())
    s = partition_state_for(channels.sent.leader_and_isr()[4], P0)
    assert (s.leader, s.leader_epoch, list(s.replicas), s.is_new) == (1, epoch + 1, [2, 3, 4, 1], True)
    join_isr(zk, controller, P0, 4)
    assert zk.topics["orders"].partitions[0] == ReplicaAssignment((2, 3, 4))
    assert zk.partition_reassignment == {}


def test_a_new_controller_resumes_a_reassignment_from_the_topic_znode(zk: FakeZk, channels: FakeChannelManager) -> None:
    old = start(zk, channels)
    request(zk, old, {P0: (2, 3, 4)})
    zk.controller = None  # the active controller died: its ephemeral znode went with its session
    zk.partition_reassignment = {}  # resumed from the topic's znode alone
    channels.sent.clear()
    epoch = zk.partition_states[P0].leader_epoch

    new = start(zk, channels, clear=False)
    assert new.context.partitions_being_reassigned == {P0}
    assert zk.partition_states[P0].leader_epoch > epoch
    assert partition_state_for(channels.sent.leader_and_isr()[4], P0).is_new
    join_isr(zk, new, P0, 4)
    assert zk.topics["orders"].partitions[0] == ReplicaAssignment((2, 3, 4))
    assert zk.partition_states[P0].leader == 2


def test_a_topic_deletion_waits_for_its_reassignment(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = start(zk, channels)
    request(zk, controller, {P0: (2, 3, 4)})
    zk.topic_deletions = {"orders"}
    controller.process(TopicDeletion())
    assert not channels.sent.stop_replica()
    assert "orders" in zk.topics
    channels.sent.clear()
    join_isr(zk, controller, P0, 4)
    # Deletion starts as soon as the reassignment is done: every replica of the final assignment is stopped.
    stopped = {b for b, r in channels.sent.stop_replica()}
    assert stopped >= {2, 3, 4}


def test_a_new_request_replaces_a_running_reassignment_and_stops_what_it_no_longer_wants(
    zk: FakeZk, channels: FakeChannelManager
) -> None:
    controller = start(zk, channels)
    request(zk, controller, {P0: (2, 3, 4)})
    channels.sent.clear()
    # Back to the original replicas (Kafka's order for them is the running RS order): a cancellation.
    request(zk, controller, {P0: (2, 3, 1)})
    (stop,) = channels.sent.stop_replica()
    assert stop[0] == 4 and [(p.topic_name, p.partition_index) for p in stop[1].partitions] == [("orders", 0)]
    assert PartitionAndReplica(P0, 4) not in controller.context.replica_states
    assert zk.topics["orders"].partitions[0] == ReplicaAssignment((2, 3, 1))
    assert zk.partition_states[P0].leader == 1 and 4 not in zk.partition_states[P0].isr
    assert zk.partition_reassignment == {}
    assert controller.context.partitions_being_reassigned == set()

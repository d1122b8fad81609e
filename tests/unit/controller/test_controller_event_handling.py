"""KafkaController's event handling over an in-memory ZooKeeper: election, failover, brokers, topics, ISR
changes, and resignation when a fenced write fails."""

from __future__ import annotations

import logging
import time
from typing import Any, cast

import pytest
from controller_helpers import CONTROLLER_ID, FakeChannelManager, broker, controller_config, state

from controller.channel_manager import ControllerChannelManager
from controller.controller import KafkaController
from controller.events import (
    BrokerChange,
    ControllerChange,
    Expire,
    IsrChangeNotification,
    Reelect,
    Startup,
    TopicChange,
)
from controller.states import PartitionState
from proto import minibroker_pb2 as pb
from proto.types import TopicPartition
from tests.fakes import FakeZk
from zk.client import KafkaZkClient

P0 = TopicPartition("orders", 0)
P1 = TopicPartition("orders", 1)


def new_controller(zk: FakeZk, channels: FakeChannelManager) -> KafkaController:
    return KafkaController(
        controller_config(), cast(KafkaZkClient, zk), cast(ControllerChannelManager, cast(Any, channels))
    )


@pytest.fixture
def zk() -> FakeZk:
    zk = FakeZk()
    zk.brokers = {1: broker(1), 2: broker(2)}
    return zk


@pytest.fixture
def channels() -> FakeChannelManager:
    return FakeChannelManager()


@pytest.fixture
def active(zk: FakeZk, channels: FakeChannelManager) -> KafkaController:
    controller = new_controller(zk, channels)
    controller.process(Startup())
    assert controller.is_active
    channels.sent.clear()
    return controller


def partitions_of(request: pb.LeaderAndIsrRequest | pb.UpdateMetadataRequest) -> list[tuple[str, int]]:
    return [(s.topic_name, s.partition_index) for s in request.partition_states]


# --- election ---


def test_startup_elects_this_controller_when_the_seat_is_free(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = new_controller(zk, channels)
    controller.process(Startup())
    assert controller.is_active
    assert (zk.controller, zk.controller_epoch) == (CONTROLLER_ID, 1)
    assert (controller.context.epoch, controller.context.epoch_zk_version) == (1, 1)
    assert controller.active_controller_id == CONTROLLER_ID
    assert set(zk.watches) == {
        "controller", "brokers", "topics", "isr_change_notification", "log_dir_event_notification", "delete_topics",
        "preferred_replica_election", "reassign_partitions",
    }
    assert sorted(channels.brokers) == [1, 2]


def test_a_standby_does_nothing_until_the_seat_is_free(
    zk: FakeZk, channels: FakeChannelManager, caplog: pytest.LogCaptureFixture
) -> None:
    zk.elect_other(2002)
    controller = new_controller(zk, channels)
    with caplog.at_level(logging.INFO):
        controller.process(Startup())
    assert not controller.is_active
    assert controller.active_controller_id == 2002
    assert "Controller 2002 has been elected as the controller, so stopping the election process." in caplog.text
    assert set(zk.watches) == {"controller"}
    assert (zk.controller_epoch, channels.brokers, channels.sent.requests) == (1, {}, [])
    controller.process(TopicChange())  # events of an active controller are ignored
    assert zk.partition_states == {}

    zk.controller = None  # the active controller's session ended
    controller.process(Reelect())
    assert controller.is_active
    assert (zk.controller, controller.context.epoch) == (CONTROLLER_ID, 2)


def test_failover_loads_the_cluster_and_tells_every_broker(zk: FakeZk, channels: FakeChannelManager) -> None:
    zk.add_topic("orders", {0: [1, 2], 1: [2, 3]})
    zk.partition_states[P0] = state(2, [2, 1], leader_epoch=4, controller_epoch=0, zk_version=7)
    zk.isr_notifications["0000000000"] = {P0}
    controller = new_controller(zk, channels)
    controller.process(Startup())

    assert zk.isr_notifications == {}
    # The partition without state was new: it is initialized; the other keeps its state.
    assert zk.partition_states[P1] == state(2, [2], controller_epoch=1)
    assert controller.context.partition_states == {
        P0: PartitionState.OnlinePartition,
        P1: PartitionState.OnlinePartition,
    }
    requests = channels.sent.requests
    # First an UpdateMetadata naming the live brokers, to each of them.
    assert [(b, type(r).__name__, len(r.partition_states)) for b, r in requests[:2]] == [
        (1, "UpdateMetadataRequest", 0),
        (2, "UpdateMetadataRequest", 0),
    ]
    leader_and_isr = channels.sent.leader_and_isr()
    assert partitions_of(leader_and_isr[1]) == [("orders", 0)]
    assert partitions_of(leader_and_isr[2]) == [("orders", 0), ("orders", 1)]
    p0 = leader_and_isr[1].partition_states[0]
    assert (p0.leader, p0.leader_epoch, p0.controller_epoch, p0.zk_version, p0.is_new) == (2, 4, 0, 7, False)
    assert leader_and_isr[2].partition_states[1].is_new
    for request in leader_and_isr.values():
        assert (request.controller_id, request.controller_epoch) == (CONTROLLER_ID, 1)
    # Then every partition to every live broker.
    final = channels.sent.update_metadata()[-2:]
    assert [(b, partitions_of(r)) for b, r in final] == [
        (1, [("orders", 0), ("orders", 1)]),
        (2, [("orders", 0), ("orders", 1)]),
    ]


# --- topics ---


def test_a_new_topic_goes_online_and_its_replicas_hear_of_it(
    zk: FakeZk, channels: FakeChannelManager, active: KafkaController
) -> None:
    zk.add_topic("orders", {0: [1, 2, 3], 1: [3, 2, 1]})
    active.process(TopicChange())
    assert zk.partition_states == {P0: state(1, [1, 2]), P1: state(2, [2, 1])}
    assert active.context.all_topics == {"orders"}
    leader_and_isr = channels.sent.leader_and_isr()  # one request per broker for the whole event
    assert sorted(leader_and_isr) == [1, 2]
    assert partitions_of(leader_and_isr[1]) == [("orders", 0), ("orders", 1)]
    assert all(s.is_new for r in leader_and_isr.values() for s in r.partition_states)
    assert [b for b, _ in channels.sent.update_metadata()] == [1, 2]
    assert channels.dropped == []

    channels.sent.clear()
    active.process(TopicChange())  # nothing new: nothing happens
    assert channels.sent.requests == []


def test_a_topic_znode_that_disappears_is_forgotten(zk: FakeZk, active: KafkaController) -> None:
    zk.add_topic("orders", {0: [1]})
    active.process(TopicChange())
    del zk.topics["orders"]
    active.process(TopicChange())
    assert active.context.all_topics == set()
    assert active.context.all_partitions() == []


# --- brokers ---


def test_a_new_broker_learns_everything_and_gets_its_replicas(
    zk: FakeZk, channels: FakeChannelManager, active: KafkaController
) -> None:
    zk.add_topic("orders", {0: [1, 3], 1: [3, 2]})
    active.process(TopicChange())
    channels.sent.clear()

    zk.brokers[3] = broker(3)
    active.process(BrokerChange())
    assert sorted(channels.brokers) == [1, 2, 3]
    update_metadata = channels.sent.update_metadata()
    # The others learn of broker 3 (no partition changed); broker 3 gets every partition.
    assert [(b, len(r.partition_states), [x.id for x in r.live_brokers]) for b, r in update_metadata[:3]] == [
        (1, 0, [1, 2, 3]),
        (2, 0, [1, 2, 3]),
        (3, 2, [1, 2, 3]),
    ]
    leader_and_isr = channels.sent.leader_and_isr()
    assert list(leader_and_isr) == [3]
    assert partitions_of(leader_and_isr[3]) == [("orders", 0), ("orders", 1)]
    assert leader_and_isr[3].broker_epoch == 103
    assert not any(s.is_new for s in leader_and_isr[3].partition_states)


def test_a_partition_created_while_its_replicas_were_down_goes_online_when_one_registers(
    zk: FakeZk, channels: FakeChannelManager, active: KafkaController
) -> None:
    zk.add_topic("orders", {0: [3, 4]})
    active.process(TopicChange())
    assert active.context.partition_state(P0) is PartitionState.NewPartition
    zk.brokers[4] = broker(4)
    active.process(BrokerChange())
    assert zk.partition_states == {P0: state(4, [4])}
    leader_and_isr = channels.sent.leader_and_isr()
    assert [(s.leader, s.is_new) for s in leader_and_isr[4].partition_states] == [(4, True)]


def test_a_broker_that_goes_away_is_dropped_and_the_others_told(
    zk: FakeZk, channels: FakeChannelManager, active: KafkaController
) -> None:
    zk.add_topic("orders", {0: [1, 2]})
    active.process(TopicChange())
    channels.sent.clear()

    del zk.brokers[2]
    active.process(BrokerChange())
    assert sorted(channels.brokers) == [1]
    assert active.context.live_broker_ids == {1}
    # The follower left the ISR (next leader epoch, fenced write); the leader hears it, as do brokers' caches.
    assert zk.partition_states[P0] == state(1, [1], leader_epoch=1, zk_version=1)
    assert list(channels.sent.leader_and_isr()) == [1]
    ((b, request),) = channels.sent.update_metadata()
    assert b == 1
    assert [x.id for x in request.live_brokers] == [1]
    (p0,) = request.partition_states
    assert (p0.leader, list(p0.isr), list(p0.offline_replicas)) == (1, [1], [2])


def test_a_bounced_broker_is_treated_as_new_with_its_new_epoch(
    zk: FakeZk, channels: FakeChannelManager, active: KafkaController
) -> None:
    zk.add_topic("orders", {0: [1, 2]})
    active.process(TopicChange())
    channels.sent.clear()

    zk.brokers[2] = broker(2, epoch=500)
    active.process(BrokerChange())
    assert channels.brokers[2].epoch == 500
    assert active.context.live_brokers[2].epoch == 500
    # The old incarnation failed (out of the ISR: the leader is told), the new one follows again.
    leader_and_isr = channels.sent.leader_and_isr()
    assert list(leader_and_isr) == [1, 2]
    assert leader_and_isr[2].broker_epoch == 500
    assert zk.partition_states[P0].isr == (1,)


# --- ISR changes ---


def test_isr_change_notifications_refresh_the_cache_and_reach_every_broker(
    zk: FakeZk, channels: FakeChannelManager, active: KafkaController
) -> None:
    zk.add_topic("orders", {0: [1, 2]})
    active.process(TopicChange())
    channels.sent.clear()

    shrunk = state(1, [1], zk_version=1)
    zk.notify_isr_change(P0, shrunk)
    zk.isr_notifications["0000000009"] = {TopicPartition("gone", 0)}
    active.process(IsrChangeNotification())
    assert active.context.partition_leadership_info[P0] == shrunk
    assert zk.isr_notifications == {}
    update_metadata = channels.sent.update_metadata()
    assert [b for b, _ in update_metadata] == [1, 2]
    assert [(list(s.isr), s.zk_version) for s in update_metadata[0][1].partition_states] == [([1], 1)]
    assert channels.sent.leader_and_isr() == {}


# --- resignation ---


def test_a_fenced_write_makes_the_controller_resign(
    zk: FakeZk, channels: FakeChannelManager, active: KafkaController, caplog: pytest.LogCaptureFixture
) -> None:
    zk.elect_other(2002)  # a newer controller, unknown to this one yet
    zk.add_topic("orders", {0: [1, 2]})
    with caplog.at_level(logging.INFO):
        active.process(TopicChange())
    assert "Controller moved to another controller when processing TopicChange. Resigning" in caplog.text
    assert "Resigning" in caplog.text
    assert not active.is_active
    assert active.active_controller_id == 2002
    assert zk.partition_states == {}
    assert channels.sent.requests == []
    assert channels.shutdowns == 1
    assert active.context.all_topics == set() and active.context.live_brokers == {}


def test_a_fenced_write_while_the_seat_is_free_runs_again(zk: FakeZk, active: KafkaController) -> None:
    zk.elect_other(2002)
    zk.controller = None  # ...which has already gone again
    zk.add_topic("orders", {0: [1, 2]})
    active.process(TopicChange())
    assert not active.is_active
    # It queued a Reelect: resigned, re-elected with a newer epoch, and the failover picks up the new topic.
    active.startup()
    try:
        deadline = time.monotonic() + 30
        while not (active.is_active and P0 in zk.partition_states):
            assert time.monotonic() < deadline, "not re-elected"
            time.sleep(0.01)
    finally:
        active.shutdown()
    assert (zk.controller, zk.controller_epoch) == (CONTROLLER_ID, 3)
    assert zk.partition_states[P0] == state(1, [1, 2], controller_epoch=3)


def test_session_expiry_resigns_and_the_new_session_reelects(
    zk: FakeZk, channels: FakeChannelManager, active: KafkaController
) -> None:
    active.process(Expire())
    assert not active.is_active
    assert channels.shutdowns == 1
    zk.controller = None  # the expired session's /controller is gone with it
    active.process(Reelect())
    assert active.is_active
    assert active.context.epoch == 2


def test_losing_the_controller_znode_resigns(zk: FakeZk, active: KafkaController) -> None:
    zk.controller = 2002
    active.process(ControllerChange())
    assert not active.is_active
    assert active.active_controller_id == 2002


def test_a_failed_failover_gives_the_seat_up(
    zk: FakeZk, channels: FakeChannelManager, caplog: pytest.LogCaptureFixture
) -> None:
    zk.fail_next_get_all_brokers = RuntimeError("boom")
    controller = new_controller(zk, channels)
    with caplog.at_level(logging.ERROR):
        controller.process(Startup())
    assert "Trigger controller movement immediately" in caplog.text
    assert not controller.is_active
    assert zk.controller is None  # deleted: the next election (its own watch fires) starts afresh
    controller.process(Reelect())
    assert controller.is_active and controller.context.epoch == 2


def test_shutdown_resigns(zk: FakeZk, channels: FakeChannelManager, active: KafkaController) -> None:
    active.shutdown()
    assert not active.is_active
    assert channels.shutdowns == 1

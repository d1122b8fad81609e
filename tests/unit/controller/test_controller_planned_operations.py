"""Controlled shutdown, preferred replica election and the leader imbalance check over an in-memory ZooKeeper
(Kafka's doControlledShutdown, onPreferredReplicaElection, checkAndTriggerAutoLeaderRebalance)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from controller_helpers import FakeChannelManager, broker, controller_config, state

from controller.channel_manager import ControllerChannelManager
from controller.controller import KafkaController
from controller.events import (
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    ControlledShutdown,
    PreferredReplicaLeaderElection,
    Startup,
    TopicChange,
)
from controller.leader_imbalance import leader_imbalance, partitions_to_rebalance
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.fakes import FakeZk
from zk.client import KafkaZkClient
from zk.paths import decode_controller, decode_controller_endpoint, encode_controller

LED = TopicPartition("orders", 0)
FOLLOWED = TopicPartition("orders", 1)
SINGLE_REPLICA = TopicPartition("single", 0)

Answer = tuple[int, tuple[TopicPartition, ...]]


@pytest.fixture
def zk() -> FakeZk:
    zk = FakeZk()
    zk.brokers = {1: broker(1), 2: broker(2), 3: broker(3)}
    zk.add_topic("orders", {0: [1, 2, 3], 1: [2, 1, 3]})
    zk.add_topic("single", {0: [1]})
    return zk


@pytest.fixture
def channels() -> FakeChannelManager:
    return FakeChannelManager()


def start(zk: FakeZk, channels: FakeChannelManager, **config: str) -> KafkaController:
    controller = KafkaController(
        controller_config(auto_leader_rebalance_enable="false", **config),
        cast(KafkaZkClient, zk),
        cast(ControllerChannelManager, cast(Any, channels)),
    )
    controller.process(Startup())
    controller.process(TopicChange())
    channels.sent.clear()
    return controller


def controlled_shutdown(controller: KafkaController, broker_id: int, broker_epoch: int) -> Answer:
    answers: list[Answer] = []
    controller.process(ControlledShutdown(broker_id, broker_epoch, lambda *answer: answers.append(answer)))
    (answer,) = answers
    return answer


# --- controlled shutdown ---


def test_the_controller_znode_says_where_brokers_ask_for_a_controlled_shutdown() -> None:
    data = encode_controller(1001, 5, "127.0.0.1:40123")
    assert (decode_controller(data), decode_controller_endpoint(data)) == (1001, "127.0.0.1:40123")
    # Kafka's own JSON (or a controller that serves nothing) has no endpoint.
    assert decode_controller_endpoint(encode_controller(1001, 5)) is None


def test_controlled_shutdown_moves_leadership_and_leaves_the_isrs(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = start(zk, channels)
    # The single-replica partition has nowhere to go: it is not waited for.
    assert controlled_shutdown(controller, 1, broker(1).epoch) == (ErrorCode.NONE, ())
    assert zk.partition_states[LED] == state(2, [2, 3], leader_epoch=1, zk_version=1)
    assert zk.partition_states[FOLLOWED] == state(2, [2, 3], leader_epoch=1, zk_version=1)
    assert zk.partition_states[SINGLE_REPLICA].leader == 1
    # The shutting-down broker hears it is a follower now.
    (to_broker_1,) = channels.sent.leader_and_isr()[1].partition_states
    assert (to_broker_1.partition_index, to_broker_1.leader) == (0, 2)
    # It still serves its replicas until it goes: metadata does not call them offline.
    metadata = [p for _, um in channels.sent.update_metadata() for p in um.partition_states]
    assert metadata and all(not p.offline_replicas for p in metadata)
    assert controller.context.shutting_down_broker_ids == {1}
    # It stops fetching what it follows (Kafka's StopReplica without delete); it keeps the logs.
    ((to, stop),) = channels.sent.stop_replica()
    assert (to, stop.delete_partitions) == (1, False)
    assert [(p.topic_name, p.partition_index) for p in stop.partitions] == [(FOLLOWED.topic, FOLLOWED.partition)]


def test_a_shutting_down_broker_is_not_elected(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = start(zk, channels)
    controlled_shutdown(controller, 1, broker(1).epoch)
    # Broker 1 is fetching again and back in the ISR when the new leader dies: 3 is elected, not 1.
    zk.partition_states[LED] = state(2, [2, 1, 3], leader_epoch=1, zk_version=2)
    del zk.brokers[2]
    controller.process(BrokerChange())
    assert zk.partition_states[LED].leader == 3
    # Its registration gone, the broker is forgotten: a restart is a broker like any other.
    del zk.brokers[1]
    controller.process(BrokerChange())
    assert controller.context.shutting_down_broker_ids == set()


def test_partitions_without_another_isr_member_remain(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = start(zk, channels)
    zk.partition_states[LED] = state(1, [1], zk_version=1)
    assert controlled_shutdown(controller, 1, broker(1).epoch) == (ErrorCode.NONE, (LED,))
    assert zk.partition_states[LED] == state(1, [1], zk_version=1)


def test_partitions_no_live_replica_could_take_are_not_waited_for(zk: FakeZk, channels: FakeChannelManager) -> None:
    """The last brokers of a cluster going down: retrying cannot move what only shutting-down or dead brokers
    could lead."""
    controller = start(zk, channels)
    assert controlled_shutdown(controller, 2, broker(2).epoch) == (ErrorCode.NONE, ())
    del zk.brokers[2]
    controller.process(BrokerChange())
    assert controlled_shutdown(controller, 3, broker(3).epoch) == (ErrorCode.NONE, ())
    # Broker 1 leads everything now, alone in every ISR: its replicas elsewhere are dead or shutting down.
    assert {zk.partition_states[tp].leader for tp in (LED, FOLLOWED)} == {1}
    assert controlled_shutdown(controller, 1, broker(1).epoch) == (ErrorCode.NONE, ())
    assert zk.partition_states[LED].leader == 1


def test_controlled_shutdown_refuses_stale_and_unknown_brokers(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = start(zk, channels)
    assert controlled_shutdown(controller, 1, broker(1).epoch - 1) == (ErrorCode.STALE_BROKER_EPOCH, ())
    assert controlled_shutdown(controller, 9, 1) == (ErrorCode.BROKER_NOT_AVAILABLE, ())
    assert controller.context.shutting_down_broker_ids == set()


# --- preferred replica election ---


def test_preferred_replica_election_moves_leadership_back_and_deletes_the_request(
    zk: FakeZk, channels: FakeChannelManager
) -> None:
    controller = start(zk, channels)
    zk.partition_states[LED] = state(2, [2, 3, 1], leader_epoch=1, zk_version=1)
    controller.context.partition_leadership_info[LED] = zk.partition_states[LED]
    zk.preferred_replica_election = {LED, FOLLOWED}
    controller.process(PreferredReplicaLeaderElection())
    assert zk.partition_states[LED] == state(1, [2, 3, 1], leader_epoch=2, zk_version=2)
    # Already led by its preferred replica: untouched.
    assert zk.partition_states[FOLLOWED] == state(2, [2, 1, 3], zk_version=0)
    assert zk.preferred_replica_election == set()


def test_a_preferred_replica_outside_the_isr_is_not_elected(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = start(zk, channels)
    zk.partition_states[LED] = state(2, [2, 3], leader_epoch=1, zk_version=1)
    controller.context.partition_leadership_info[LED] = zk.partition_states[LED]
    zk.preferred_replica_election = {LED}
    controller.process(PreferredReplicaLeaderElection())
    assert zk.partition_states[LED].leader == 2
    assert zk.preferred_replica_election == set()


def test_the_auto_rebalance_elects_preferred_replicas_of_an_imbalanced_broker(
    zk: FakeZk, channels: FakeChannelManager
) -> None:
    controller = start(zk, channels, leader_imbalance_per_broker_percentage="10")
    zk.partition_states[LED] = state(2, [2, 3, 1], leader_epoch=1, zk_version=1)
    controller.context.partition_leadership_info[LED] = zk.partition_states[LED]
    controller.process(AutoPreferredReplicaLeaderElection())
    assert zk.partition_states[LED].leader == 1


# --- leader imbalance (pure) ---

P = [TopicPartition("t", p) for p in range(4)]


def test_imbalance_is_the_share_of_a_brokers_preferred_partitions_led_by_others() -> None:
    assignments = {P[0]: (1, 2), P[1]: (1, 2), P[2]: (2, 1), P[3]: (1, 2)}
    leaders = {P[0]: 2, P[1]: 1, P[2]: 2, P[3]: 2}
    imbalance = leader_imbalance(assignments, leaders)
    assert imbalance[1].not_led_by_preferred == (P[0], P[3])
    assert imbalance[1].ratio == pytest.approx(2 / 3)
    assert imbalance[2].ratio == 0.0
    assert partitions_to_rebalance(imbalance, 10, lambda b: True) == [P[0], P[3]]
    # At or below the threshold, or with the preferred broker down: nothing moves.
    assert partitions_to_rebalance(imbalance, 67, lambda b: True) == []
    assert partitions_to_rebalance(imbalance, 10, lambda b: b != 1) == []


def test_partitions_without_leadership_state_do_not_count() -> None:
    imbalance = leader_imbalance({P[0]: (1, 2), P[1]: (1, 2)}, {P[0]: 1})
    assert imbalance[1].ratio == 0.0

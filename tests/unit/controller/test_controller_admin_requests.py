"""An admin's requests the controller carries out, over an in-memory ZooKeeper: partitions added to a topic's
znode (Kafka's processPartitionModifications) and ElectLeaders, preferred and unclean (KIP-460)."""

from __future__ import annotations

from typing import Any

import pytest
from controller_helpers import FakeChannelManager, broker, started_controller, state

from controller.controller import KafkaController
from controller.events import BrokerChange, PartitionModifications, ReplicaLeaderElection
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.fakes import FakeZk
from zk.paths import NO_LEADER, TopicAssignment

P0 = TopicPartition("orders", 0)


@pytest.fixture
def zk() -> FakeZk:
    zk = FakeZk()
    zk.brokers = {1: broker(1), 2: broker(2), 3: broker(3)}
    zk.add_topic("orders", {0: [1, 2]})
    return zk


@pytest.fixture
def channels() -> FakeChannelManager:
    return FakeChannelManager()


def start(zk: FakeZk, channels: FakeChannelManager) -> KafkaController:
    return started_controller(zk, channels)


def test_each_topic_znode_is_watched_while_active(zk: FakeZk, channels: FakeChannelManager) -> None:
    start(zk, channels)
    assert "topics/orders" in zk.watches


def test_partitions_added_to_the_topic_znode_are_created_and_elected(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = start(zk, channels)
    zk.topics["orders"] = TopicAssignment.of("orders", {0: [1, 2], 1: [2, 3], 2: [3, 1]})
    controller.process(PartitionModifications("orders"))
    assert zk.partition_states[TopicPartition("orders", 1)] == state(2, [2, 3], controller_epoch=1)
    assert zk.partition_states[TopicPartition("orders", 2)] == state(3, [3, 1], controller_epoch=1)
    new = {(b, p.partition_index, p.is_new) for b, r in channels.sent.leader_and_isr().items()
           for p in r.partition_states}
    assert new == {(2, 1, True), (3, 1, True), (3, 2, True), (1, 2, True)}
    # A rewrite that adds nothing (the watch's first call, a reassignment) creates nothing.
    channels.sent.clear()
    controller.process(PartitionModifications("orders"))
    assert channels.sent.requests == []


def elect(controller: KafkaController, unclean: bool, *partitions: TopicPartition) -> dict[TopicPartition, Any]:
    answers: list[dict[TopicPartition, tuple[int, str]]] = []
    controller.process(ReplicaLeaderElection(partitions or None, unclean, answers.append))
    (answer,) = answers
    return {tp: error for tp, (error, _) in answer.items()}


def test_unclean_election_brings_an_offline_partition_back_with_a_replica_outside_the_isr(
    zk: FakeZk, channels: FakeChannelManager
) -> None:
    controller = start(zk, channels)
    del zk.brokers[2]
    controller.process(BrokerChange())  # the follower leaves the ISR
    del zk.brokers[1]
    controller.process(BrokerChange())  # the last ISR member goes: offline, unclean election is off
    zk.brokers[2] = broker(2)
    controller.process(BrokerChange())
    assert (zk.partition_states[P0].leader, zk.partition_states[P0].isr) == (NO_LEADER, (1,))
    assert elect(controller, False, P0) == {P0: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
    assert elect(controller, True, P0) == {P0: ErrorCode.NONE}
    assert (zk.partition_states[P0].leader, zk.partition_states[P0].isr) == (2, (2,))
    # Led by a live broker now: nothing to do; an unknown partition fails.
    missing = TopicPartition("orders", 7)
    assert elect(controller, True, P0, missing) == {P0: ErrorCode.ELECTION_NOT_NEEDED,
                                                    missing: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

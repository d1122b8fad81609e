"""Broker failure and return (Kafka's onBrokerFailure / onReplicasBecomeOffline / onBrokerStartup) over an
in-memory ZooKeeper: elections from the live ISR, the ISR shrunk, offline partitions, unclean election."""

from __future__ import annotations

import logging

import pytest
from controller_helpers import FakeChannelManager, broker, started_controller, state

from controller.controller import KafkaController
from controller.events import BrokerChange
from controller.states import PartitionState
from proto.types import TopicPartition
from tests.fakes import FakeZk
from zk.paths import NO_LEADER

P0 = TopicPartition("orders", 0)


start = started_controller


@pytest.fixture
def zk() -> FakeZk:
    zk = FakeZk()
    zk.brokers = {1: broker(1), 2: broker(2), 3: broker(3)}
    zk.add_topic("orders", {0: [1, 2, 3]})
    return zk


@pytest.fixture
def channels() -> FakeChannelManager:
    return FakeChannelManager()


def kill(zk: FakeZk, controller: KafkaController, *broker_ids: int) -> None:
    for broker_id in broker_ids:
        del zk.brokers[broker_id]
    controller.process(BrokerChange())


def test_the_leaders_failure_elects_the_first_live_isr_member(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = start(zk, channels)
    assert zk.partition_states[P0] == state(1, [1, 2, 3], controller_epoch=1)
    kill(zk, controller, 1)
    # Next leader epoch, ISR = its live members, written at the version read.
    assert zk.partition_states[P0] == state(2, [2, 3], leader_epoch=1, zk_version=1)
    assert controller.context.partition_states[P0] is PartitionState.OnlinePartition
    leader_and_isr = channels.sent.leader_and_isr()
    assert sorted(leader_and_isr) == [2, 3]
    (p0,) = leader_and_isr[3].partition_states
    assert (p0.leader, p0.leader_epoch, list(p0.isr), p0.zk_version) == (2, 1, [2, 3], 1)
    update_metadata = channels.sent.update_metadata()
    assert sorted(b for b, _ in update_metadata) == [2, 3]
    (um,) = update_metadata[0][1].partition_states
    assert (um.leader, list(um.offline_replicas)) == (2, [1])


def test_an_election_that_meets_a_concurrent_isr_change_reads_again(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = start(zk, channels)
    # The leader shrank the ISR to [1, 3] between the controller's read and its write.
    zk.concurrent_writes[P0] = state(1, [1, 3], controller_epoch=1)
    kill(zk, controller, 1)
    assert zk.partition_states[P0] == state(3, [3], leader_epoch=1, zk_version=2)


def test_without_a_live_isr_member_the_partition_stays_offline_until_one_returns(
    zk: FakeZk, channels: FakeChannelManager
) -> None:
    controller = start(zk, channels)
    kill(zk, controller, 2, 3)
    assert zk.partition_states[P0].isr == (1,)
    kill(zk, controller, 1)
    # No leader; the last ISR member stays in the ISR: it is the one with every acknowledged record.
    assert zk.partition_states[P0] == state(NO_LEADER, [1], leader_epoch=3, zk_version=3)
    assert controller.context.partition_states[P0] is PartitionState.OfflinePartition

    zk.brokers[3] = broker(3, epoch=300)  # out of sync: not eligible
    controller.process(BrokerChange())
    assert zk.partition_states[P0].leader == NO_LEADER
    channels.sent.clear()
    zk.brokers[1] = broker(1, epoch=301)
    controller.process(BrokerChange())
    assert zk.partition_states[P0] == state(1, [1], leader_epoch=4, zk_version=4)
    assert controller.context.partition_states[P0] is PartitionState.OnlinePartition
    assert sorted(channels.sent.leader_and_isr()) == [1, 3]  # the new leader, and broker 3 to follow it


@pytest.mark.parametrize("how", ["controller config", "topic override", "dynamic broker default"])
def test_unclean_election_elects_a_live_replica_outside_the_isr(
    zk: FakeZk, channels: FakeChannelManager, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    if how == "controller config":
        controller = start(zk, channels, unclean_leader_election_enable="true")
    elif how == "topic override":
        zk.topic_configs["orders"] = {"unclean.leader.election.enable": "true"}
        controller = start(zk, channels)
    else:
        # `configs --entity-type brokers --entity-default --alter --add-config unclean.leader.election.enable=true`
        zk.broker_configs["<default>"] = {"unclean.leader.election.enable": "true"}
        controller = start(zk, channels)
    kill(zk, controller, 2, 3)
    kill(zk, controller, 1)
    assert zk.partition_states[P0].leader == NO_LEADER
    with caplog.at_level(logging.WARNING):
        zk.brokers[3] = broker(3, epoch=300)
        controller.process(BrokerChange())
    # The stale replica leads, alone in the ISR: it is the only one known to have what it has.
    assert zk.partition_states[P0] == state(3, [3], leader_epoch=4, zk_version=4)
    assert "Unclean leader election" in caplog.text and "potential data loss" in caplog.text


@pytest.mark.parametrize("how", ["topic override over the controller", "topic override over the broker default",
                                 "broker default over the controller"])
def test_a_closer_config_can_refuse_what_a_wider_one_allows(
    zk: FakeZk, channels: FakeChannelManager, how: str
) -> None:
    """Kafka's precedence: the topic's override, then the dynamic <default> broker config, then the static one."""
    if how == "topic override over the controller":
        zk.topic_configs["orders"] = {"unclean.leader.election.enable": "false"}
        controller = start(zk, channels, unclean_leader_election_enable="true")
    elif how == "topic override over the broker default":
        zk.topic_configs["orders"] = {"unclean.leader.election.enable": "false"}
        zk.broker_configs["<default>"] = {"unclean.leader.election.enable": "true"}
        controller = start(zk, channels)
    else:
        zk.broker_configs["<default>"] = {"unclean.leader.election.enable": "false"}
        controller = start(zk, channels, unclean_leader_election_enable="true")
    kill(zk, controller, 2, 3)
    kill(zk, controller, 1)
    zk.brokers[3] = broker(3, epoch=300)
    controller.process(BrokerChange())
    assert zk.partition_states[P0].leader == NO_LEADER

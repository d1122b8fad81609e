"""Topic deletion (Kafka's TopicDeletionManager) over an in-memory ZooKeeper: StopReplica(delete) to every
replica, brokers told to forget the topic, znodes removed once every replica answered; halted while a
replica's broker is down, finished when it returns."""

from __future__ import annotations

from typing import Any, cast

import pytest
from controller_helpers import FakeChannelManager, broker, controller_config

from controller.channel_manager import ControllerChannelManager
from controller.controller import KafkaController
from controller.events import (
    BrokerChange,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
)
from controller.states import ReplicaState
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.fakes import FakeZk
from zk.client import KafkaZkClient
from zk.paths import LEADER_DURING_DELETE

P0 = TopicPartition("doomed", 0)
P1 = TopicPartition("doomed", 1)
KEPT = TopicPartition("kept", 0)


@pytest.fixture
def zk() -> FakeZk:
    zk = FakeZk()
    zk.brokers = {1: broker(1), 2: broker(2)}
    zk.add_topic("doomed", {0: [1, 2], 1: [2, 1]})
    zk.add_topic("kept", {0: [1, 2]})
    return zk


@pytest.fixture
def channels() -> FakeChannelManager:
    return FakeChannelManager()


@pytest.fixture
def controller(zk: FakeZk, channels: FakeChannelManager) -> KafkaController:
    controller = KafkaController(
        controller_config(), cast(KafkaZkClient, zk), cast(ControllerChannelManager, cast(Any, channels))
    )
    controller.process(Startup())
    controller.process(TopicChange())
    channels.sent.clear()
    return controller


def answer_stop_replicas(controller: KafkaController, channels: FakeChannelManager, error: int = 0) -> None:
    """Each broker answers the StopReplica requests it was sent (the events the response callbacks queue)."""
    requests = channels.sent.stop_replica()
    channels.sent.clear()
    for broker_id, request in requests:
        errors = tuple((TopicPartition(p.topic_name, p.partition_index), error) for p in request.partitions)
        controller.process(TopicDeletionStopReplicaResponseReceived(broker_id, ErrorCode.NONE, errors))


def test_deletion_stops_and_deletes_every_replica_then_removes_the_znodes(
    zk: FakeZk, channels: FakeChannelManager, controller: KafkaController
) -> None:
    zk.topic_deletions = {"doomed"}
    controller.process(TopicDeletion())
    stop_replica = dict(channels.sent.stop_replica())
    assert sorted(stop_replica) == [1, 2]
    assert all(r.delete_partitions for r in stop_replica.values())
    assert sorted((p.topic_name, p.partition_index) for p in stop_replica[1].partitions) == [
        ("doomed", 0),
        ("doomed", 1),
    ]
    # Brokers are told to forget the topic before its logs go.
    forgotten = {
        (s.topic_name, s.partition_index)
        for _, r in channels.sent.update_metadata()
        for s in r.partition_states
        if s.leader == LEADER_DURING_DELETE
    }
    assert forgotten == {("doomed", 0), ("doomed", 1)}
    assert "doomed" in zk.topics  # not before every replica answered

    answer_stop_replicas(controller, channels)
    assert "doomed" not in zk.topics and zk.topic_deletions == set()
    assert set(zk.partition_states) == {KEPT}
    assert controller.context.all_topics == {"kept"}
    assert not any(r.topic_partition.topic == "doomed" for r in controller.context.replica_states)


def test_a_request_to_delete_an_unknown_topic_is_just_removed(
    zk: FakeZk, channels: FakeChannelManager, controller: KafkaController
) -> None:
    zk.topic_deletions = {"ghost"}
    controller.process(TopicDeletion())
    assert zk.topic_deletions == set()
    assert channels.sent.stop_replica() == []


def test_deletion_waits_for_a_broker_that_is_down_and_finishes_when_it_returns(
    zk: FakeZk, channels: FakeChannelManager, controller: KafkaController
) -> None:
    del zk.brokers[2]
    controller.process(BrokerChange())
    channels.sent.clear()
    zk.topic_deletions = {"doomed"}
    controller.process(TopicDeletion())
    assert [b for b, _ in channels.sent.stop_replica()] == [1]
    answer_stop_replicas(controller, channels)
    context = controller.context
    # Marked ineligible, then reset to OfflineReplica for the retry (Kafka's retryDeletionForIneligibleReplicas).
    assert context.replica_states[(P0, 2)] is ReplicaState.OfflineReplica
    assert context.replica_states[(P0, 1)] is ReplicaState.ReplicaDeletionSuccessful
    assert context.topics_ineligible_for_deletion == {"doomed"}
    assert "doomed" in zk.topics

    zk.brokers[2] = broker(2, epoch=200)
    controller.process(BrokerChange())
    assert [b for b, _ in channels.sent.stop_replica()] == [2]
    answer_stop_replicas(controller, channels)
    assert "doomed" not in zk.topics and zk.topic_deletions == set()
    assert controller.context.all_topics == {"kept"}


def test_a_failed_stop_replica_halts_the_deletion(
    zk: FakeZk, channels: FakeChannelManager, controller: KafkaController
) -> None:
    zk.topic_deletions = {"doomed"}
    controller.process(TopicDeletion())
    answer_stop_replicas(controller, channels, error=ErrorCode.KAFKA_STORAGE_ERROR)
    assert "doomed" in zk.topics
    assert controller.context.topics_ineligible_for_deletion == {"doomed"}


def test_a_new_controller_finishes_a_deletion_and_elects_no_leader_for_it(
    zk: FakeZk, channels: FakeChannelManager
) -> None:
    zk.topic_deletions = {"doomed"}
    controller = KafkaController(
        controller_config(), cast(KafkaZkClient, zk), cast(ControllerChannelManager, cast(Any, channels))
    )
    controller.process(Startup())
    assert {tp.topic for tp in zk.partition_states} == {"kept"}
    assert sorted(b for b, _ in channels.sent.stop_replica()) == [1, 2]
    answer_stop_replicas(controller, channels)
    assert "doomed" not in zk.topics and zk.topic_deletions == set()


def test_a_stop_replica_answer_looks_only_at_the_topics_it_answers_for(
    zk: FakeZk, channels: FakeChannelManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deleting 10,000 topics brings an answer per broker per batch: each looked at every queued topic."""
    zk.add_topic("waiting", {0: [3]})  # its broker is down: its deletion waits for it
    controller = KafkaController(
        controller_config(), cast(KafkaZkClient, zk), cast(ControllerChannelManager, cast(Any, channels))
    )
    controller.process(Startup())
    channels.sent.clear()
    zk.topic_deletions = {"doomed", "waiting"}
    controller.process(TopicDeletion())
    assert "waiting" in controller.context.topics_ineligible_for_deletion
    looked_at: list[str] = []
    partitions_for_topic = controller.context.partitions_for_topic

    def spy(topic: str) -> list[TopicPartition]:
        looked_at.append(topic)
        return partitions_for_topic(topic)

    monkeypatch.setattr(controller.context, "partitions_for_topic", spy)
    answer_stop_replicas(controller, channels)
    assert "doomed" not in zk.topics and "waiting" in zk.topics
    assert "waiting" not in looked_at

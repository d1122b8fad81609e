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


def started(zk: FakeZk, channels: FakeChannelManager) -> KafkaController:
    """A controller that has started on `zk`, with the requests it sent meanwhile forgotten."""
    controller = KafkaController(
        controller_config(), cast(KafkaZkClient, zk), cast(ControllerChannelManager, cast(Any, channels))
    )
    controller.process(Startup())
    channels.sent.clear()
    return controller


@pytest.fixture
def controller(zk: FakeZk, channels: FakeChannelManager) -> KafkaController:
    controller = started(zk, channels)
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
    controller = started(zk, channels)
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


def many_topics(zk: FakeZk, count: int) -> list[str]:
    """`count` more one-partition topics on brokers 1 and 2, their names."""
    names = [f"many-{i}" for i in range(count)]
    for name in names:
        zk.add_topic(name, {0: [1, 2]})
    return names


def test_topics_deleted_together_start_with_one_isr_write_round_per_broker(
    zk: FakeZk, channels: FakeChannelManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's onPartitionDeletion moves every replica of the topics deleted together at once: per topic, taking
    the replicas out of the ISRs read and wrote ZooKeeper once per topic and broker (10,000 topics, 20,000 rounds
    on the event thread, each a round trip)."""
    names = many_topics(zk, 5)
    controller = started(zk, channels)
    writes: list[set[TopicPartition]] = []
    update_partition_states = zk.update_partition_states

    def spy(states: Any, expected_controller_epoch_zk_version: int) -> Any:
        writes.append(set(states))
        return update_partition_states(states, expected_controller_epoch_zk_version)

    monkeypatch.setattr(zk, "update_partition_states", spy)
    zk.topic_deletions = set(names)
    controller.process(TopicDeletion())
    assert len(writes) == 2  # one per broker, whatever the number of topics
    assert all(ws == {TopicPartition(name, 0) for name in names} for ws in writes)
    stop_replica = dict(channels.sent.stop_replica())
    assert sorted(stop_replica) == [1, 2]
    assert all(sorted(p.topic_name for p in r.partitions) == sorted(names) for r in stop_replica.values())


def test_topics_whose_replicas_answered_together_go_in_one_zookeeper_round(
    zk: FakeZk, channels: FakeChannelManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A StopReplica answer for 200 topics completes 200 deletions: their znodes go in one pipelined round, not
    five round trips per topic on the event thread."""
    names = many_topics(zk, 5)
    controller = started(zk, channels)
    rounds: list[list[str]] = []
    delete_topics = zk.delete_topics

    def spy(topics: list[str], expected_controller_epoch_zk_version: int) -> None:
        rounds.append(list(topics))
        delete_topics(topics, expected_controller_epoch_zk_version)

    monkeypatch.setattr(zk, "delete_topics", spy)
    zk.topic_deletions = set(names)
    controller.process(TopicDeletion())
    answer_stop_replicas(controller, channels)
    assert rounds == [sorted(names)]
    assert not set(names) & set(zk.topics) and zk.topic_deletions == set()
    assert controller.context.all_topics == {"doomed", "kept"}


def test_a_deleted_topics_assignment_watch_is_cancelled_before_its_znode_goes(
    zk: FakeZk, channels: FakeChannelManager, controller: KafkaController
) -> None:
    """Kafka's mutePartitionModifications: left armed, deleting the znode fired the watch, one event per deleted
    topic that found nothing to do, and the watch stayed registered."""
    assert not zk.watch_handles["topics/doomed"].cancelled
    zk.topic_deletions = {"doomed"}
    controller.process(TopicDeletion())
    answer_stop_replicas(controller, channels)
    assert "doomed" not in zk.topics
    assert zk.watch_handles["topics/doomed"].cancelled
    assert not zk.watch_handles["topics/kept"].cancelled

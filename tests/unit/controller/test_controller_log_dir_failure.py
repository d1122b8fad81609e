"""A broker's log dir failure at the controller (Kafka's processLogDirEventNotification and
processLeaderAndIsrResponseReceived): the notification makes it ask the broker about every replica it hosts; those
answered with KAFKA_STORAGE_ERROR go offline (the partitions they led elect from the rest of the ISR, they leave
the ISR); the broker's next registration brings them back."""

from __future__ import annotations

import pytest
from controller_helpers import FakeChannelManager, broker, controller_config, started_controller

from controller.controller import KafkaController
from controller.events import BrokerChange, LeaderAndIsrResponseReceived, LogDirEventNotification, Startup
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.fakes import FakeZk

LED = TopicPartition("orders", 0)  # led by broker 1, on its failed dir
FOLLOWED = TopicPartition("orders", 1)  # followed by broker 1, on its failed dir
HEALTHY = TopicPartition("orders", 2)  # led by broker 1, on a dir still in service


@pytest.fixture
def zk() -> FakeZk:
    zk = FakeZk()
    zk.brokers = {1: broker(1), 2: broker(2), 3: broker(3)}
    zk.add_topic("orders", {0: [1, 2, 3], 1: [2, 1, 3], 2: [1, 3, 2]})
    return zk


@pytest.fixture
def channels() -> FakeChannelManager:
    return FakeChannelManager()


def answer_leader_and_isr(controller: KafkaController, channels: FakeChannelManager, broker_id: int,
                          errors: dict[TopicPartition, ErrorCode], error: ErrorCode = ErrorCode.NONE) -> None:
    """The broker's answer through the callback the request went out with; then the event it queued."""
    (callback,) = channels.sent.callbacks[broker_id]
    response = pb.LeaderAndIsrResponse(error_code=error, partition_errors=[
        pb.TopicPartitionError(topic_name=tp.topic, partition_index=tp.partition, error_code=code)
        for tp, code in errors.items()])
    channels.sent.clear()
    callback(response)
    (event,) = controller._event_manager._drain()
    assert event == LeaderAndIsrResponseReceived(
        broker_id, error, tuple((tp, code) for tp, code in errors.items()))
    controller.process(event)


def report_failure(zk: FakeZk, controller: KafkaController, channels: FakeChannelManager) -> None:
    channels.sent.clear()
    zk.propagate_log_dir_event(1)
    controller.process(LogDirEventNotification())
    assert zk.log_dir_events == {}, "the notification is consumed"
    # Kafka's onBrokerLogDirFailure: every replica on the broker gets a LeaderAndIsr (OnlineReplica) to answer.
    asked = channels.sent.leader_and_isr()
    assert sorted(asked) == [1]
    assert sorted((s.topic_name, s.partition_index) for s in asked[1].partition_states) == [
        ("orders", 0), ("orders", 1), ("orders", 2)]


def test_replicas_answered_with_kafka_storage_error_go_offline_and_lose_leadership(
    zk: FakeZk, channels: FakeChannelManager
) -> None:
    controller = started_controller(zk, channels)
    report_failure(zk, controller, channels)
    answer_leader_and_isr(controller, channels, 1, {
        LED: ErrorCode.KAFKA_STORAGE_ERROR, FOLLOWED: ErrorCode.KAFKA_STORAGE_ERROR, HEALTHY: ErrorCode.NONE})

    assert controller.context.replicas_on_offline_dirs == {1: {LED, FOLLOWED}}
    # The partition it led elects from the rest of its ISR; it leaves the ISR of the one it followed.
    assert (zk.partition_states[LED].leader, zk.partition_states[LED].isr) == (2, (2, 3))
    assert (zk.partition_states[FOLLOWED].leader, zk.partition_states[FOLLOWED].isr) == (2, (2, 3))
    assert (zk.partition_states[HEALTHY].leader, zk.partition_states[HEALTHY].isr) == (1, (1, 3, 2))
    offline_in_metadata = {(s.topic_name, s.partition_index): list(s.offline_replicas)
                           for _, request in channels.sent.update_metadata() for s in request.partition_states}
    assert offline_in_metadata[("orders", 0)] == [1]
    # An election never picks a replica on an offline dir, even from the ISR.
    assert not controller.context.is_replica_online(1, LED) and controller.context.is_replica_online(1, HEALTHY)


def test_a_later_answer_without_the_error_brings_a_replica_back(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = started_controller(zk, channels)
    report_failure(zk, controller, channels)
    answer_leader_and_isr(controller, channels, 1, {LED: ErrorCode.KAFKA_STORAGE_ERROR})
    report_failure(zk, controller, channels)
    answer_leader_and_isr(controller, channels, 1, {LED: ErrorCode.NONE})
    assert controller.context.replicas_on_offline_dirs == {1: set()}


def test_a_request_level_error_changes_nothing(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = started_controller(zk, channels)
    report_failure(zk, controller, channels)
    answer_leader_and_isr(controller, channels, 1, {LED: ErrorCode.KAFKA_STORAGE_ERROR},
                          error=ErrorCode.STALE_CONTROLLER_EPOCH)
    assert controller.context.replicas_on_offline_dirs == {}
    assert zk.partition_states[LED].leader == 1


def test_a_restarted_broker_starts_with_its_replicas_online(zk: FakeZk, channels: FakeChannelManager) -> None:
    controller = started_controller(zk, channels)
    report_failure(zk, controller, channels)
    answer_leader_and_isr(controller, channels, 1, {LED: ErrorCode.KAFKA_STORAGE_ERROR})
    channels.sent.clear()
    zk.brokers[1] = broker(1, epoch=500)  # it restarted after space was freed: a new registration
    controller.process(BrokerChange())
    assert 1 not in controller.context.replicas_on_offline_dirs
    assert controller.context.is_replica_online(1, LED)
    # It gets its replica's state again, to follow the new leader and catch up into the ISR.
    told = [s for b, r in channels.sent.requests if b == 1 and isinstance(r, pb.LeaderAndIsrRequest)
            for s in r.partition_states if s.partition_index == LED.partition]
    assert told and told[-1].leader == 2


def test_a_new_controller_drops_pending_notifications(
    zk: FakeZk, channels: FakeChannelManager
) -> None:
    """The LeaderAndIsr a new controller sends every replica asks the question the notification would have."""
    zk.propagate_log_dir_event(1)
    controller = started_controller(zk, channels)
    assert zk.log_dir_events == {}
    assert controller.is_active


def test_a_standby_controller_ignores_notifications(zk: FakeZk, channels: FakeChannelManager) -> None:
    zk.elect_other(1002)
    standby = KafkaController(controller_config(), zk, channels)  # type: ignore[arg-type]
    standby.process(Startup())
    zk.propagate_log_dir_event(1)
    standby.process(LogDirEventNotification())
    assert list(zk.log_dir_events.values()) == [1] and not channels.sent.requests

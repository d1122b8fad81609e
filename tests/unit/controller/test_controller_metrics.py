"""The controller's gauges (Kafka's KafkaController.updateMetrics): set after every event from the counts the
context keeps per change, never by walking every partition (with 10,000 partitions that walk, a sort, twice
after every event, was most of the controller's CPU)."""

from __future__ import annotations

import pytest
from controller_helpers import FakeChannelManager, broker, started_controller

from controller.controller import KafkaController
from controller.events import BrokerChange, TopicChange
from tests.fakes import FakeZk

KC = "kafka_controller_KafkaController_"


def gauges(controller: KafkaController) -> dict[str, float | None]:
    registry = controller.metrics.registry
    return {name: registry.get_sample_value(f"{KC}{name}") for name in (
        "ActiveControllerCount", "OfflinePartitionsCount", "PreferredReplicaImbalanceCount", "GlobalPartitionCount",
        "GlobalTopicCount")}


def test_the_gauges_follow_failures_and_returns_without_walking_the_partitions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zk = FakeZk()
    zk.brokers = {1: broker(1), 2: broker(2)}
    zk.add_topic("orders", {0: [1, 2], 1: [2, 1]})
    zk.add_topic("audit", {0: [1]})
    channels = FakeChannelManager()
    controller = started_controller(zk, channels)
    assert gauges(controller) == {"ActiveControllerCount": 1, "OfflinePartitionsCount": 0,
                                  "PreferredReplicaImbalanceCount": 0, "GlobalPartitionCount": 3,
                                  "GlobalTopicCount": 2}

    def walked() -> None:
        raise AssertionError("the gauges walked every partition")

    monkeypatch.setattr(controller.context, "all_partitions", walked)
    monkeypatch.setattr(controller.context, "partitions_for_topic", walked)
    controller.metrics.update(True, controller.context)
    del zk.brokers[1]
    monkeypatch.undo()  # the failure's own handling may walk them; the gauges after it may not
    controller.process(BrokerChange())
    monkeypatch.setattr(controller.context, "all_partitions", walked)
    controller.metrics.update(True, controller.context)
    # audit-0 lost its only replica; neither it (no leader) nor orders-0 (2) is led by its preferred 1.
    assert gauges(controller)["OfflinePartitionsCount"] == 1
    assert gauges(controller)["PreferredReplicaImbalanceCount"] == 2
    monkeypatch.undo()
    zk.brokers[1] = broker(1, epoch=200)
    controller.process(BrokerChange())
    controller.process(TopicChange())
    assert gauges(controller)["OfflinePartitionsCount"] == 0
    assert gauges(controller)["GlobalPartitionCount"] == 3

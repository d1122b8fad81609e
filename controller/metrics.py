"""The controller's Prometheus metrics, named after Kafka's `kafka.controller:type=KafkaController` gauges
(`name=OfflinePartitionsCount` becomes `kafka_controller_KafkaController_OfflinePartitionsCount`).

As in Kafka, the values are computed on the event thread after every event
(KafkaController.updateMetrics) and only read by a scrape, which never touches
the controller's context. A standby controller reports 0 for all of them.
`metrics.port` serves them over HTTP (0: off), as a broker's do.
"""

from __future__ import annotations

from prometheus_client import Gauge

from common.metrics import MetricsEndpoint
from controller.context import ControllerContext
from controller.states import PartitionState

_PREFIX = "kafka_controller_KafkaController_"


class ControllerMetrics(MetricsEndpoint):
    def __init__(self) -> None:
        super().__init__()
        registry = self.registry
        self._active = Gauge(f"{_PREFIX}ActiveControllerCount", "1 on the active controller, 0 on a standby",
                             registry=registry)
        self._offline = Gauge(f"{_PREFIX}OfflinePartitionsCount",
                              "Partitions without a live leader (topics being deleted excepted)", registry=registry)
        self._imbalance = Gauge(f"{_PREFIX}PreferredReplicaImbalanceCount",
                                "Partitions not led by their preferred (first assigned) replica", registry=registry)
        self._partitions = Gauge(f"{_PREFIX}GlobalPartitionCount", "Partitions in the cluster", registry=registry)
        self._topics = Gauge(f"{_PREFIX}GlobalTopicCount", "Topics in the cluster", registry=registry)

    def update(self, active: bool, context: ControllerContext) -> None:
        """On the event thread, after each event."""
        self._active.set(1 if active else 0)
        if not active:
            for gauge in (self._offline, self._imbalance, self._partitions, self._topics):
                gauge.set(0)
            return
        kept = [tp for tp in context.all_partitions() if not context.is_topic_queued_up_for_deletion(tp.topic)]
        self._offline.set(sum(1 for tp in kept if context.partition_state(tp) is PartitionState.OfflinePartition))
        self._imbalance.set(sum(
            1 for tp in kept
            if (state := context.partition_leadership_info.get(tp)) is not None
            and state.leader != context.partition_replica_assignment(tp)[0]))
        self._partitions.set(len(context.all_partitions()))
        self._topics.set(len(context.all_topics))

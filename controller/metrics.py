"""The controller's Prometheus metrics, named after Kafka's `kafka.controller:type=KafkaController` gauges
(`name=OfflinePartitionsCount` becomes `kafka_controller_KafkaController_OfflinePartitionsCount`).

As in Kafka, the values are set on the event thread after every event
(KafkaController.updateMetrics) from the counts the context keeps as partitions
change, never by a walk over the partitions; a scrape only reads them and never
touches the controller's context. A standby controller reports 0 for all of them.
`metrics.port` serves them over HTTP (0: off), as a broker's do.
"""

from __future__ import annotations

from prometheus_client import Gauge

from common.metrics import MetricsEndpoint
from controller.context import ControllerContext

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
        self._offline.set(context.offline_partition_count)
        self._imbalance.set(context.preferred_replica_imbalance_count)
        self._partitions.set(context.partition_count)
        self._topics.set(len(context.all_topics))

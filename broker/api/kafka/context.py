"""What the Kafka-protocol handlers reach: the shared broker operations and this listener's identity."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.api.operations import BrokerOperations
from broker.server.config import KafkaConfig
from broker.server.config_admin import ConfigAdmin
from broker.server.metrics import BrokerMetrics
from broker.server.topic_config import TopicConfigs


@dataclass(frozen=True, slots=True)
class KafkaContext:
    config: KafkaConfig
    operations: BrokerOperations
    topic_configs: TopicConfigs
    topic_overrides: Callable[[str], Mapping[str, str]]  # a topic's config overrides, from ZooKeeper (blocking)
    cluster_id: str
    metrics: BrokerMetrics
    listener_name: str  # Metadata describes the brokers as reached on this listener
    config_admin: ConfigAdmin  # AlterConfigs / IncrementalAlterConfigs, as on the gRPC door

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

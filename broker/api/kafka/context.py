"""What the Kafka-protocol handlers reach: the shared broker operations, the group coordinator, this listener's
identity and, per connection, who is asking (Kafka's RequestContext: the client's address and principal)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.api.operations import BrokerOperations
from broker.coordinator.group.group_coordinator import GroupCoordinator
from broker.security.principal import ANONYMOUS, KafkaPrincipal
from broker.server.config import KafkaConfig
from broker.server.config_admin import ConfigAdmin
from broker.server.metrics import BrokerMetrics


@dataclass(frozen=True, slots=True)
class KafkaContext:
    config: KafkaConfig
    operations: BrokerOperations
    cluster_id: str
    metrics: BrokerMetrics
    listener_name: str  # Metadata describes the brokers as reached on this listener
    config_admin: ConfigAdmin  # Describe/Alter/IncrementalAlterConfigs, as on the gRPC door
    group_coordinator: GroupCoordinator  # the group family (broker/api/kafka/groups.py)
    # Set per connection (KafkaConnection replaces the listener's context): the peer's IP, and the principal it
    # acts as, ANONYMOUS until authentication says otherwise.
    client_host: str = ""
    principal: KafkaPrincipal = ANONYMOUS

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

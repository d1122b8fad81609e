"""What the Kafka-protocol handlers reach: the shared broker operations, the group and transaction coordinators,
this listener's identity and, per connection, who is asking (Kafka's RequestContext: the client's address and
principal)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.api.group_operations import GroupOperations
from broker.api.operations import BrokerOperations
from broker.api.transaction_operations import TransactionOperations
from broker.config.kafka_config import KafkaConfig
from broker.config.metrics import BrokerMetrics
from common.security.authorizer import Session
from common.security.principal import ANONYMOUS, KafkaPrincipal


@dataclass(frozen=True, slots=True)
class KafkaContext:
    config: KafkaConfig
    operations: BrokerOperations
    cluster_id: str
    metrics: BrokerMetrics
    listener_name: str  # Metadata describes the brokers as reached on this listener
    groups: GroupOperations  # the group family (broker/api/kafka/groups.py), behind its ACL checks
    transactions: TransactionOperations  # the transaction family (broker/api/kafka/transactions.py), likewise
    # Set per connection (KafkaConnection replaces the listener's context): the peer's IP, and the principal it
    # acts as, ANONYMOUS until authentication says otherwise.
    client_host: str = ""
    principal: KafkaPrincipal = ANONYMOUS

    @property
    def session(self) -> Session:
        """Who asks, as the authorizer sees it."""
        return Session(self.principal, self.client_host)

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

"""Live config changes through Kafka's wire protocol (confluent-kafka's AdminClient): IncrementalAlterConfigs
and AlterConfigs reach the same ConfigAdmin as the gRPC door, every broker applies the change, DescribeConfigs
shows it; a broker key Kafka cannot change live is refused with Kafka's message."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController) -> KafkaCluster:
    return start_kafka_cluster(start_brokers, start_controller)


def test_incremental_alter_configs_over_the_kafka_protocol(cluster: KafkaCluster, wait_until: WaitUntil) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("cfg", 1, 3)], operation_timeout=30)["cfg"].result(timeout=60)
    topic = ConfigResource(ConfigResource.Type.TOPIC, "cfg", incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([topic])[topic].result(timeout=30)
    described = ConfigResource(ConfigResource.Type.TOPIC, "cfg")
    configs = admin.describe_configs([described])[described].result(timeout=30)
    assert (configs["retention.ms"].value, configs["min.insync.replicas"].value) == ("60000", "2")
    wait_until(lambda: all("Processing override for entityPath: topics/cfg" in b.process.log()
                           for b in cluster.brokers.values()), timeout=20, message="every broker to apply it")

    static = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("broker.id", "9", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([static])[static].result(timeout=30)
    assert "Cannot update these configs dynamically: Set(broker.id)" in str(refused.value)

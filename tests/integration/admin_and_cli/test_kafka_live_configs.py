"""Live config changes through Kafka's wire protocol (confluent-kafka's AdminClient): IncrementalAlterConfigs
and AlterConfigs reach the same ConfigAdmin as the gRPC door, every broker applies the change, DescribeConfigs
shows it; a broker key Kafka cannot change live is refused with Kafka's message."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
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


def test_append_and_subtract_on_a_list_config_over_the_kafka_protocol(cluster: KafkaCluster) -> None:
    """Kafka 2.8's AdminManager.prepareIncrementalConfigs: APPEND and SUBTRACT work on LIST configs
    (cleanup.policy, from its default when the topic has no override) and are INVALID_REQUEST on any other."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("lists", 1, 3)], operation_timeout=30)["lists"].result(timeout=60)
    described = ConfigResource(ConfigResource.Type.TOPIC, "lists")

    def alter(op: AlterConfigOpType, key: str, value: str) -> None:
        resource = ConfigResource(ConfigResource.Type.TOPIC, "lists", incremental_configs=[
            ConfigEntry(key, value, incremental_operation=op)])
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)

    alter(AlterConfigOpType.APPEND, "cleanup.policy", "compact")
    policy = admin.describe_configs([described])[described].result(timeout=30)["cleanup.policy"].value
    assert sorted(policy.split(",")) == ["compact", "delete"]
    alter(AlterConfigOpType.SUBTRACT, "cleanup.policy", "delete")
    assert admin.describe_configs([described])[described].result(timeout=30)["cleanup.policy"].value == "compact"
    with pytest.raises(KafkaException) as refused:
        alter(AlterConfigOpType.APPEND, "retention.ms", "1")
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "Config value append is not allowed for config key: retention.ms" in str(refused.value)


def test_password_configs_are_described_as_null_and_sensitive(cluster: KafkaCluster) -> None:
    """Kafka's AdminManager.createBrokerConfigEntry: a PASSWORD config (every broker here has cluster.credential)
    is answered with a null value and is_sensitive true."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([broker])[broker].result(timeout=30)
    secret = configs["cluster.credential"]
    assert (secret.value, secret.is_sensitive) == (None, True)
    assert (configs["broker.id"].value, configs["broker.id"].is_sensitive) == ("1", False)

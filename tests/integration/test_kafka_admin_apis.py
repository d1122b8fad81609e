"""Kafka admin APIs a Kafka client calls on the brokers' Kafka listeners: CreatePartitions, DeleteRecords and
ElectLeaders (confluent-kafka's AdminClient and kafka-python's KafkaAdminClient), DescribeLogDirs (kafka-python's
describe_log_dirs) and ListOffsets' max timestamp (KIP-734)."""

from __future__ import annotations

import signal

import pytest
from confluent_kafka import ElectionType, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient

from proto.types import TopicPartition
from tests.integration.conftest import StartBroker, StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import start_kafka_cluster
from tests.integration.test_kafka_confluent import wait_for_leaders
from zk.client import KafkaZkClient

pytestmark = pytest.mark.integration


def partition_count(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def test_create_partitions_and_delete_records_from_kafka_admin_clients(
        start_brokers: StartBrokers, start_controller: StartController, wait_until: WaitUntil) -> None:
    """KafkaApis.handleCreatePartitionsRequest and handleDeleteRecordsRequest: the partitions are added (by
    count, or on the brokers named), the log start offset moves and the low watermark is answered."""
    cluster = start_kafka_cluster(start_brokers, start_controller, broker_ids=(1, 2))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("grow", 1, 2)], operation_timeout=30)["grow"].result(timeout=60)

    admin.create_partitions([NewPartitions("grow", 3, replica_assignment=[[2, 1], [1, 2]])],
                            operation_timeout=30)["grow"].result(timeout=60)
    wait_until(lambda: partition_count(admin, "grow") == 3, message="three partitions in the metadata")
    assert admin.list_topics("grow", timeout=10).topics["grow"].partitions[1].replicas == [2, 1]
    kp_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        kp_admin.create_partitions({"grow": 4})
        wait_until(lambda: partition_count(admin, "grow") == 4, message="four partitions in the metadata")
    finally:
        kp_admin.close()
    # Fewer partitions than there are is Kafka's INVALID_PARTITIONS.
    shrink = admin.create_partitions([NewPartitions("grow", 2)], operation_timeout=30)["grow"]
    assert shrink.exception(timeout=60).args[0].code() == KafkaError.INVALID_PARTITIONS

    wait_for_leaders(cluster.bootstrap, "grow", 4)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("grow", f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    deleted = admin.delete_records([CkTopicPartition("grow", 0, 6)], operation_timeout=30)
    (result,) = deleted.values()
    assert result.result(timeout=60).low_watermark == 6
    listed = admin.list_topics("grow", timeout=10)
    assert listed.topics["grow"].partitions[0].error is None
    # Beyond the high watermark is Kafka's OFFSET_OUT_OF_RANGE.
    (beyond,) = admin.delete_records([CkTopicPartition("grow", 0, 11)], operation_timeout=30).values()
    assert beyond.exception(timeout=60).args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_elect_leaders_from_a_kafka_admin_client_is_forwarded_to_the_controller(
        start_brokers: StartBrokers, start_broker: StartBroker, start_controller: StartController,
        zk_client: KafkaZkClient, wait_until: WaitUntil) -> None:
    """KafkaApis.handleElectReplicaLeader, which a broker hands its controller: the preferred replica, back in
    the ISR, leads again (NONE); a partition already led as asked is ELECTION_NOT_NEEDED."""
    cluster = start_kafka_cluster(start_brokers, start_controller, broker_ids=(1, 2))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("elect", 1, replica_assignment=[[1, 2]])],
                        operation_timeout=30)["elect"].result(timeout=60)
    tp = TopicPartition("elect", 0)

    def leader_and_isr() -> tuple[int, set[int]]:
        state = zk_client.get_partition_state(tp)
        return (-1, set()) if state is None else (state.leader, set(state.isr))

    wait_until(lambda: leader_and_isr() == (1, {1, 2}), message="broker 1 leading with both in the ISR")
    first = cluster.brokers[1]
    first.process.signal(signal.SIGKILL)
    first.process.wait(30)
    wait_until(lambda: leader_and_isr()[0] == 2, message="broker 2 leading")
    start_broker(1)
    wait_until(lambda: leader_and_isr() == (2, {1, 2}), timeout=60, message="broker 1 back in the ISR")

    admin = AdminClient({"bootstrap.servers": cluster.brokers[2].kafka_address})
    wanted = [CkTopicPartition("elect", 0)]
    # confluent-kafka 2.16's elect_leaders takes no operation_timeout (its argument parsing fails): the default.
    elected = admin.elect_leaders(ElectionType.PREFERRED, wanted).result(timeout=60)
    assert [(p.topic, p.partition, error) for p, error in elected.items()] == [("elect", 0, None)]
    wait_until(lambda: leader_and_isr()[0] == 1, message="the preferred replica leading again")

    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        again = admin.elect_leaders(election, wanted).result(timeout=60)
        assert [error.code() for error in again.values()] == [KafkaError.ELECTION_NOT_NEEDED]
    unknown = admin.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition("elect", 7)]).result(timeout=60)
    assert [error.code() for error in unknown.values()] == [KafkaError.UNKNOWN_TOPIC_OR_PART]

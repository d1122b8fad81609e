"""DescribeProducers (KIP-664) on the Kafka listener, read by kafka-python's KafkaAdminClient.describe_producers
(confluent-kafka 2.16 has no describe_producers) and by `minibroker transactions describe-producers`, Kafka's
kafka-transactions.sh: each replica's active producers, with their open transaction's first offset; Kafka's errors
for a broker without a replica and an unknown topic. Transactions are written over the Kafka door
(tests/integration/transaction_wire.py)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import NotLeaderForPartitionError, UnknownTopicOrPartitionError

from tests.integration.admin_and_cli.test_cli import minibroker
from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster
from tests.integration.transaction_wire import TransactionWire

pytestmark = pytest.mark.integration

TOPIC = "txn-producers"
SINGLE = "one-replica"
TP = KpTopicPartition(TOPIC, 0)
HEADERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
           "CurrentTransactionStartOffset"]


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController) -> KafkaCluster:
    cluster = start_kafka_cluster(start_brokers, start_controller)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"}),
                                       NewTopic(SINGLE, 1, replica_assignment=[[1]])],
                                      operation_timeout=30).values():
        future.result(timeout=60)
    return cluster


def replicas(cluster: KafkaCluster) -> tuple[int, list[int]]:
    """The leader of TOPIC-0 and its followers."""
    partition = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(TOPIC, timeout=10).topics[
        TOPIC].partitions[0]
    return partition.leader, [r for r in partition.replicas if r != partition.leader]


def described(admin: KafkaAdminClient, broker_id: int | None = None) -> dict[int, tuple[int, int, int, int, int]]:
    """Producer id -> (epoch, last sequence, coordinator epoch, current transaction start offset, last timestamp)."""
    state = admin.describe_producers([TP], broker_id=broker_id)[TP]
    return {p.producer_id: (p.producer_epoch, p.last_sequence, p.coordinator_epoch, p.current_transaction_start_offset,
                            p.last_timestamp) for p in state.active_producers}


def table(*args: str) -> list[list[str]]:
    result = minibroker("transactions", *args)
    assert result.returncode == 0, result.stderr
    return [line.split() for line in result.stdout.splitlines()]


def test_describe_producers_on_the_leader_and_a_follower(cluster: KafkaCluster, wait_until: WaitUntil) -> None:
    leader, followers = replicas(cluster)
    wire = TransactionWire(cluster.brokers[leader].kafka_address, TOPIC)
    try:
        committed, still_open = wire.init_producer_id(), wire.init_producer_id()
        assert wire.produce([b"c-0", b"c-1"], committed) == 0
        wire.write_marker(committed, commit=True)  # offset 2
        assert wire.produce([b"plain"]) == 3
        assert wire.produce([b"o-0"], still_open) == 4
        assert wire.produce([b"o-1", b"o-2"], still_open) == 5
    finally:
        wire.close()
    # The committed producer's last sequence is 1 and its coordinator epoch the marker's; the open one has no
    # marker yet (-1) and its transaction starts at 4.
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","))
    try:
        on_leader = described(admin)
        timestamps = {pid: state[4] for pid, state in on_leader.items()}
        assert on_leader == {committed: (0, 1, 0, -1, timestamps[committed]),
                             still_open: (0, 2, -1, 4, timestamps[still_open])}
        follower = followers[0]
        expected = on_leader
        wait_until(lambda: described(admin, follower) == expected, 30, "the follower's producer state")
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_producers([KpTopicPartition("no-such-topic", 0)], broker_id=leader)
        # Broker 2 holds no replica of SINGLE-0: Kafka's NOT_LEADER_OR_FOLLOWER (kafka-python's old name for it).
        with pytest.raises(NotLeaderForPartitionError):
            admin.describe_producers([KpTopicPartition(SINGLE, 0)], broker_id=2)
    finally:
        admin.close()

    rows = table("--bootstrap-server", cluster.bootstrap, "describe-producers", "--topic", TOPIC, "--partition", "0")
    assert rows[0] == HEADERS
    # Kafka's columns: no coordinator epoch is -1, no open transaction None.
    assert sorted(rows[1:]) == sorted([
        [str(committed), "0", "0", "1", str(timestamps[committed]), "None"],
        [str(still_open), "0", "-1", "2", str(timestamps[still_open]), "4"]])
    assert table("--bootstrap-server", cluster.bootstrap, "describe-producers", "--topic", TOPIC, "--partition", "0",
                 "--broker-id", str(follower)) == rows
    refused = minibroker("transactions", "--bootstrap-server", cluster.bootstrap, "describe-producers", "--topic",
                         SINGLE, "--partition", "0", "--broker-id", "2")
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"Failed to describe producers for partition {SINGLE}-0 on broker 2: ")
    assert "NOT_LEADER_OR_FOLLOWER" in refused.stderr

"""The project's consumer and console consumer read transactions over gRPC as Kafka's consumer does (issue 25):
read_committed gets only committed transactions' records and stops at the last stable offset while a transaction
is open, read_uncommitted gets every record. The transactions are written over the Kafka door
(tests/integration/transaction_wire.py), as in test_kafka_transactions_partition.py."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from client import Consumer, TopicPartition
from tests.integration.admin_and_cli.test_cli import minibroker
from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster
from tests.integration.transaction_wire import TransactionWire

pytestmark = pytest.mark.integration

TOPIC = "txn-client-reads"
TP = TopicPartition(TOPIC, 0)


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController) -> KafkaCluster:
    cluster = start_kafka_cluster(start_brokers, start_controller)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[TOPIC].result(timeout=60)
    return cluster


def leader_wire(cluster: KafkaCluster) -> TransactionWire:
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(TOPIC, timeout=10)
    return TransactionWire(cluster.brokers[metadata.topics[TOPIC].partitions[0].leader].kafka_address, TOPIC)


def read(cluster: KafkaCluster, isolation_level: str, expected: int, wait_until: WaitUntil) -> tuple[list[bytes], int]:
    """What the project's consumer reads from the beginning over gRPC once it has `expected` records (and
    nothing more in a few further polls), and its position then."""
    consumer = Consumer(bootstrap_servers=cluster.grpc_bootstrap, isolation_level=isolation_level,
                        fetch_max_wait_ms=100)
    try:
        consumer.assign([TP])
        consumer.seek_to_beginning(TP)
        values: list[bytes] = []

        def poll() -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(r.value for r in records if r.value is not None)
            return len(values) >= expected

        wait_until(poll, 60, f"the project's consumer ({isolation_level}) reading {expected} records")
        for _ in range(5):
            poll()
        return values, consumer.position(TP)
    finally:
        consumer.close()


def console_consumer(cluster: KafkaCluster, isolation_level: str, expected: int) -> list[str]:
    result = minibroker("console-consumer", "--bootstrap-server", cluster.grpc_bootstrap, "--topic", TOPIC,
                        "--from-beginning", "--isolation-level", isolation_level, "--max-messages", str(expected),
                        "--timeout-ms", "20000")
    assert result.returncode == 0, result.stderr
    assert f"Processed a total of {expected} messages" in result.stderr
    return result.stdout.splitlines()


def test_the_projects_consumers_read_committed_and_uncommitted(cluster: KafkaCluster, wait_until: WaitUntil) -> None:
    wire = leader_wire(cluster)
    try:
        aborted_pid, committed_pid, open_pid = (wire.init_producer_id() for _ in range(3))
        assert wire.produce([b"plain-0"]) == 0
        assert wire.produce([b"aborted-0", b"aborted-1"], aborted_pid) == 1
        assert wire.produce([b"committed-0"], committed_pid) == 3
        assert wire.produce([b"aborted-2"], aborted_pid) == 4
        assert wire.produce([b"committed-1"], committed_pid) == 5
        wire.write_marker(aborted_pid, commit=False)  # offset 6
        wire.write_marker(committed_pid, commit=True)  # offset 7
        assert wire.produce([b"plain-1"]) == 8
        assert wire.produce([b"open-0"], open_pid) == 9  # open: the LSO stays at 9
        assert wire.produce([b"plain-2"]) == 10
    finally:
        wire.close()
    committed = [b"plain-0", b"committed-0", b"committed-1", b"plain-1"]
    everything = [b"plain-0", b"aborted-0", b"aborted-1", b"committed-0", b"aborted-2", b"committed-1", b"plain-1",
                  b"open-0", b"plain-2"]
    # read_committed stops at the open transaction's first offset, past the markers and the aborted batches.
    assert read(cluster, "read_committed", 4, wait_until) == (committed, 9)
    assert read(cluster, "read_uncommitted", 9, wait_until) == (everything, 11)
    assert console_consumer(cluster, "read_committed", 4) == [v.decode() for v in committed]
    assert console_consumer(cluster, "read_uncommitted", 9) == [v.decode() for v in everything]

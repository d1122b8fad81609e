"""KIP-664's transaction tools against three real brokers: `minibroker transactions list` and `describe`
(ListTransactions / DescribeTransactions, through kafka-python's KafkaAdminClient) show a confluent-kafka
producer's ongoing transaction with its coordinator, state, partitions, timeout and start time, and CompleteCommit
after its commit; `find-hanging` finds the transactions a partition holds open whose producer no coordinator knows
(written over the wire with made-up producers, tests/integration/transaction_wire.py) and not a live one, and
`abort`, by start offset or by producer, writes their ABORT markers so read_committed readers move past them."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from broker.coordinator.transaction.transaction_state_manager import partition_for
from tests.integration.admin_and_cli.test_cli import minibroker
from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster
from tests.integration.transaction_wire import TransactionWire

pytestmark = pytest.mark.integration

TOPIC = "verbs"
STATE_PARTITIONS = 3
OVERRIDES = {"transaction.state.log.num.partitions": str(STATE_PARTITIONS)}
TIMEOUT_MS = 45_000


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController) -> KafkaCluster:
    cluster = start_kafka_cluster(start_brokers, start_controller, overrides=OVERRIDES)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[TOPIC].result(timeout=60)
    return cluster


def transactional_producer(cluster: KafkaCluster, transactional_id: str) -> Producer:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id,
                  "transaction.timeout.ms": TIMEOUT_MS, "linger.ms": 5})
    p.init_transactions(60)
    return p


def leader_of(cluster: KafkaCluster, topic: str, partition: int) -> int:
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=10)
    return int(metadata.topics[topic].partitions[partition].leader)


def tool(cluster: KafkaCluster, *args: str) -> list[list[str]]:
    result = minibroker("transactions", "--bootstrap-server", cluster.bootstrap, *args)
    assert result.returncode == 0, result.stderr
    return [line.split("\t") for line in result.stdout.splitlines()]


def cells(rows: list[list[str]]) -> list[list[str]]:
    """The table's cells without Kafka's padding (each column is followed by a tab, so the last cell is empty)."""
    return [[cell.strip() for cell in row[:-1]] for row in rows]


def last_stable_offset(cluster: KafkaCluster, partition: int = 0) -> int:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused",
                         "isolation.level": "read_committed"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=10)[1])
    finally:
        consumer.close()


def read_committed(cluster: KafkaCluster, partition: int = 0, timeout: float = 30.0) -> list[str]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    deadline = time.monotonic() + timeout
    try:
        consumer.assign([TopicPartition(TOPIC, partition, OFFSET_BEGINNING)])
        values = []
        while True:
            assert time.monotonic() < deadline, f"read_committed never reached the end: {values}"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return values
                raise KafkaException(message.error())
            values.append(message.value().decode())
    finally:
        consumer.close()


def test_list_and_describe_show_an_ongoing_transaction_then_its_commit(cluster: KafkaCluster,
                                                                        wait_until: WaitUntil) -> None:
    app = transactional_producer(cluster, "verbs-app")
    coordinator = leader_of(cluster, "__transaction_state", partition_for("verbs-app", STATE_PARTITIONS))
    before = int(time.time() * 1000)
    app.begin_transaction()
    for partition in (0, 1):
        app.produce(TOPIC, b"v", partition=partition)
    assert app.flush(30) == 0
    after = int(time.time() * 1000)

    listed = cells(tool(cluster, "list"))
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    [(transactional_id, listed_on, producer_id, state)] = listed[1:]
    assert (transactional_id, listed_on, state) == ("verbs-app", str(coordinator), "Ongoing")

    described = cells(tool(cluster, "describe", "--transactional-id", "verbs-app"))
    assert described[0] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                            "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                            "TopicPartitions"]
    [(on, tid, pid, epoch, state, timeout_ms, start_ms, duration_ms, partitions)] = described[1:]
    assert (on, tid, pid, epoch, state, timeout_ms, partitions) == (
        str(coordinator), "verbs-app", producer_id, "0", "Ongoing", str(TIMEOUT_MS), f"{TOPIC}-0,{TOPIC}-1")
    assert before <= int(start_ms) <= after and int(duration_ms) >= 0

    # kafka-python's admin client reads the same, routed to the coordinator by FindCoordinator.
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","))
    try:
        description = admin.describe_transactions(["verbs-app"])["verbs-app"]
        assert (description.coordinator_id, description.state.value, description.transaction_start_time_ms) == (
            coordinator, "Ongoing", int(start_ms))
        # The state filter and the producer id filter, each broker answering for the ids it holds.
        assert [t.transactional_id for ts in admin.list_transactions(state_filters=["Ongoing"]).values()
                for t in ts] == ["verbs-app"]
        assert [t for ts in admin.list_transactions(state_filters=["CompleteCommit"]).values() for t in ts] == []
        assert [t for ts in admin.list_transactions(producer_id_filters=[int(producer_id) + 1]).values()
                for t in ts] == []
    finally:
        admin.close()

    app.commit_transaction(30)

    def completed() -> bool:
        row = cells(tool(cluster, "describe", "--transactional-id", "verbs-app"))[1]
        return row[4] == "CompleteCommit" and row[8] == ""
    wait_until(completed, 30, "CompleteCommit once the markers are written")
    assert cells(tool(cluster, "list"))[1:] == [["verbs-app", str(coordinator), producer_id, "CompleteCommit"]]

    unknown = minibroker("transactions", "--bootstrap-server", cluster.bootstrap, "describe", "--transactional-id",
                         "nobody")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("Failed to describe transaction state of transactional-id `nobody`: ")
    assert "TRANSACTIONAL_ID_NOT_FOUND" in unknown.stderr


def test_find_hanging_finds_what_no_coordinator_knows_and_abort_moves_the_lso_past_it(
        cluster: KafkaCluster, wait_until: WaitUntil) -> None:
    leader = leader_of(cluster, TOPIC, 0)
    wire = TransactionWire(cluster.brokers[leader].kafka_address, TOPIC)
    try:
        first, second = wire.init_producer_id(), wire.init_producer_id()
        assert wire.produce([b"h-0", b"h-1"], first) == 0
        assert wire.produce([b"h-2"], second) == 2
    finally:
        wire.close()
    # A live transaction on the same partition: its coordinator knows it and holds the partition.
    live = transactional_producer(cluster, "verbs-live")
    live.begin_transaction()
    live.produce(TOPIC, b"live", partition=0)
    assert live.flush(30) == 0
    assert last_stable_offset(cluster) == 0


    # --max-transaction-timeout 0: every open transaction is old enough to be looked at.
    found = cells(tool(cluster, "find-hanging", "--broker-id", str(leader), "--max-transaction-timeout", "0"))
    assert found[0] == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                        "LastTimestamp", "Duration(min)"]
    # The wire's batches carry timestamp 0: their last write is as old as can be.
    assert sorted(row[:7] for row in found[1:]) == sorted([
        [TOPIC, "0", str(first), "0", "-1", "0", "0"], [TOPIC, "0", str(second), "0", "-1", "2", "0"]]), found
    # With the default 15 minutes, and by topic, the same two: the live transaction is too young to be looked at
    # and, at any age, its coordinator holds the partition.
    by_topic = cells(tool(cluster, "find-hanging", "--topic", TOPIC))
    assert sorted(row[:7] for row in by_topic[1:]) == sorted(row[:7] for row in found[1:])

    assert tool(cluster, "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "0") == []
    wait_until(lambda: last_stable_offset(cluster) == 2, 30, "the LSO past the first hanging transaction")
    assert tool(cluster, "abort", "--topic", TOPIC, "--partition", "0", "--producer-id", str(second),
                "--producer-epoch", "0", "--coordinator-epoch", "-1") == []
    wait_until(lambda: last_stable_offset(cluster) == 3, 30, "the LSO at the live transaction's start")
    assert [row[2] for row in cells(tool(cluster, "find-hanging", "--topic", TOPIC, "--partition", "0",
                                         "--max-transaction-timeout", "0"))[1:]] == []
    missing = minibroker("transactions", "--bootstrap-server", cluster.bootstrap, "abort", "--topic", TOPIC,
                         "--partition", "0", "--start-offset", "0")
    assert (missing.returncode, missing.stderr.strip()) == (
        1, f"Could not find any open transactions starting at offset 0 on partition {TOPIC}-0")

    live.commit_transaction(30)
    assert read_committed(cluster) == ["live"]

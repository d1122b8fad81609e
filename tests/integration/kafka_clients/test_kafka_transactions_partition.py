"""The partition side of transactions with real consumers (issue 25): confluent-kafka and kafka-python readers
with isolation.level=read_committed stop at the last stable offset while a transaction is open and skip an
aborted transaction's records once its marker is written; read_uncommitted readers see everything.

This test plays the producer's and the coordinator's parts on the wire against the partition leader's Kafka
listener (tests/integration/transaction_wire.py): a producer's Produce of transactional batches and the
coordinator's WriteTxnMarkers, so the partition side is proven alone (the coordinator with real transactional
producers: test_kafka_transaction_matrix.py)."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster
from tests.integration.transaction_wire import TransactionWire

pytestmark = pytest.mark.integration

TOPIC = "txn-reads"


def knows_the_leader(address: str) -> bool:
    partitions = AdminClient({"bootstrap.servers": address}).list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    return 0 in partitions and partitions[0].leader >= 0


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController, wait_until: WaitUntil) -> KafkaCluster:
    cluster = start_kafka_cluster(start_brokers, start_controller)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[TOPIC].result(timeout=60)
    # CreateTopics answers once the topic is in ZooKeeper; a broker's metadata names the partition only after
    # its UpdateMetadata, and the tests ask any broker for the leader.
    for broker_id, broker in cluster.brokers.items():
        wait_until(lambda address=broker.kafka_address: knows_the_leader(address), 60,
                   f"broker {broker_id} knows the leader")
    return cluster


class ConfluentReader:
    """An assigned confluent-kafka consumer from the beginning; librdkafka's statistics report the last stable
    offset our Fetch responses carried."""

    def __init__(self, bootstrap: str, isolation_level: str) -> None:
        self.stats: dict[str, Any] = {}
        self.values: list[bytes] = []
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                                  "isolation.level": isolation_level, "statistics.interval.ms": 200,
                                  "stats_cb": self._on_stats})
        self.consumer.assign([CkTopicPartition(TOPIC, 0, 0)])

    def _on_stats(self, raw: str) -> None:
        self.stats = json.loads(raw)

    def poll(self) -> None:
        message = self.consumer.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None
            self.values.append(value)

    def reported_offsets(self) -> tuple[int, int] | None:
        """(hi_offset, ls_offset) of the partition as the last Fetch response gave them."""
        partition = self.stats.get("topics", {}).get(TOPIC, {}).get("partitions", {}).get("0")
        return None if partition is None else (partition["hi_offset"], partition["ls_offset"])

    def close(self) -> None:
        self.consumer.close()


def kafka_python_values(bootstrap: str, isolation_level: str, expected: int, wait_until: WaitUntil) -> list[bytes]:
    """Every value a kafka-python consumer reads from the beginning, once it has `expected`; and nothing more
    within a further round of fetches (the LSO holds it back)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation_level)
    try:
        tp = KpTopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values: list[bytes] = []

        def read() -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(r.value for r in records)
            return len(values) >= expected

        wait_until(read, 60, f"kafka-python ({isolation_level}) reading {expected} records")
        for _ in range(5):
            read()
        return values
    finally:
        consumer.close()


def leader_address(cluster: KafkaCluster) -> str:
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(TOPIC, timeout=10)
    return cluster.brokers[metadata.topics[TOPIC].partitions[0].leader].kafka_address


def test_read_committed_readers_stop_at_the_lso_and_skip_aborted_records(cluster: KafkaCluster,
                                                                         wait_until: WaitUntil) -> None:
    wire = TransactionWire(leader_address(cluster), TOPIC)
    committed = ConfluentReader(cluster.bootstrap, "read_committed")
    uncommitted = ConfluentReader(cluster.bootstrap, "read_uncommitted")
    try:
        aborted_pid, committed_pid = wire.init_producer_id(), wire.init_producer_id()
        assert wire.produce([b"plain-0"]) == 0
        assert wire.produce([b"aborted-0", b"aborted-1"], aborted_pid) == 1  # open: the LSO is 1
        assert wire.produce([b"plain-1"]) == 3

        def both_read(committed_values: int, hi: int, lso: int) -> bool:
            committed.poll()
            uncommitted.poll()
            # librdkafka reports a read_uncommitted reader's LSO as its high watermark: only its HW is compared.
            uncommitted_hi = uncommitted.reported_offsets()
            return (len(committed.values) == committed_values and committed.reported_offsets() == (hi, lso)
                    and uncommitted_hi is not None and uncommitted_hi[0] == hi)

        wait_until(lambda: both_read(1, 4, 1) and len(uncommitted.values) == 4, 60,
                   "the readers at HW 4 and LSO 1")
        assert uncommitted.values == [b"plain-0", b"aborted-0", b"aborted-1", b"plain-1"]
        # ListOffsets of latest: READ_COMMITTED answers the LSO, READ_UNCOMMITTED the high watermark.
        assert committed.consumer.get_watermark_offsets(CkTopicPartition(TOPIC, 0), timeout=10) == (0, 1)
        assert uncommitted.consumer.get_watermark_offsets(CkTopicPartition(TOPIC, 0), timeout=10) == (0, 4)
        for _ in range(10):  # more fetches: the read_committed reader stays below the LSO
            committed.poll()
        assert committed.values == [b"plain-0"]

        wire.write_marker(aborted_pid, commit=False)  # offset 4
        assert wire.produce([b"committed-0", b"committed-1"], committed_pid) == 5  # open: the LSO is 5
        wait_until(lambda: both_read(2, 7, 5), 60, "the read_committed reader past the aborted transaction")
        assert committed.values == [b"plain-0", b"plain-1"]

        wire.write_marker(committed_pid, commit=True)  # offset 7
        assert wire.produce([b"plain-2"]) == 8
        wait_until(lambda: both_read(5, 9, 9), 60, "the read_committed reader past the committed transaction")

        def uncommitted_read_all() -> bool:
            uncommitted.poll()
            return len(uncommitted.values) == 7

        wait_until(uncommitted_read_all, 30, "the read_uncommitted reader")
    finally:
        committed.close()
        uncommitted.close()
    every_data_record = [b"plain-0", b"aborted-0", b"aborted-1", b"plain-1", b"committed-0", b"committed-1",
                         b"plain-2"]
    assert committed.values == [b"plain-0", b"plain-1", b"committed-0", b"committed-1", b"plain-2"]
    assert uncommitted.values == every_data_record
    assert kafka_python_values(cluster.bootstrap, "read_committed", 5, wait_until) == committed.values
    assert kafka_python_values(cluster.bootstrap, "read_uncommitted", 7, wait_until) == every_data_record


def test_kafka_python_read_committed_stops_at_an_open_transaction(cluster: KafkaCluster,
                                                                  wait_until: WaitUntil) -> None:
    wire = TransactionWire(leader_address(cluster), TOPIC)
    producer_id = wire.init_producer_id()
    wire.produce([b"before"])
    wire.produce([b"open-0"], producer_id)
    wire.produce([b"after"])
    assert kafka_python_values(cluster.bootstrap, "read_uncommitted", 3, wait_until) == [
        b"before", b"open-0", b"after"]
    assert kafka_python_values(cluster.bootstrap, "read_committed", 1, wait_until) == [b"before"]
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, isolation_level="read_committed")
    try:
        tp = KpTopicPartition(TOPIC, 0)
        assert consumer.end_offsets([tp]) == {tp: 1}  # ListOffsets with READ_COMMITTED: the LSO
    finally:
        consumer.close()
    wire.write_marker(producer_id, commit=True)
    assert kafka_python_values(cluster.bootstrap, "read_committed", 3, wait_until) == [
        b"before", b"open-0", b"after"]


def test_a_new_leader_knows_the_open_transaction_and_indexes_its_abort(cluster: KafkaCluster,
                                                                       wait_until: WaitUntil) -> None:
    """The leader is SIGKILLed with a transaction open: the new leader rebuilt its producer state from its own
    replica (a follower applies the leader's batches as they come), so read_committed readers still stop at the
    transaction's first offset, and the abort written to the new leader hides its records."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    old_leader = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].leader
    wire = TransactionWire(cluster.brokers[old_leader].kafka_address, TOPIC)
    producer_id = wire.init_producer_id()
    assert wire.produce([b"before"]) == 0
    assert wire.produce([b"doomed-0", b"doomed-1"], producer_id) == 1  # acks=all: on every in-sync replica
    assert wire.produce([b"after"]) == 3
    wire.close()
    cluster.brokers[old_leader].process.signal(signal.SIGKILL)

    def new_leader() -> int | None:
        leader = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(
            TOPIC, timeout=10).topics[TOPIC].partitions[0].leader
        return leader if leader not in (-1, old_leader) else None

    wait_until(lambda: new_leader() is not None, 60, "a new leader")
    leader = new_leader()
    assert leader is not None
    bootstrap = cluster.brokers[leader].kafka_address
    committed = ConfluentReader(bootstrap, "read_committed")
    try:
        def committed_at(values: int, hi: int, lso: int) -> bool:
            committed.poll()
            return len(committed.values) == values and committed.reported_offsets() == (hi, lso)

        wait_until(lambda: committed_at(1, 4, 1), 60, "the new leader's LSO at the open transaction")
        coordinator = TransactionWire(bootstrap, TOPIC)
        coordinator.write_marker(producer_id, commit=False)  # offset 4
        wait_until(lambda: committed_at(2, 5, 5), 60, "the read_committed reader past the abort")
        assert committed.values == [b"before", b"after"]
    finally:
        committed.close()
    assert kafka_python_values(bootstrap, "read_uncommitted", 4, wait_until) == [
        b"before", b"doomed-0", b"doomed-1", b"after"]

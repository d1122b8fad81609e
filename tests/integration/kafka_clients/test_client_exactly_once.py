"""Exactly-once consume-transform-produce with the project's own clients over gRPC (KIP-98, KIP-447): a group
member (client.Consumer) reads the input, the project's transactional Producer writes each record's transform to
the output and, with send_offsets_to_transaction and the member's group_metadata(), the member's positions in the
same transaction (AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator). A commit moves the output
and the group's offsets together; an abort moves neither. The cluster and the checks (confluent-kafka's
read_committed reader and committed() with require_stable) are those test_kafka_transaction_matrix.py holds
Kafka's clients to."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka.admin import AdminClient, NewTopic

from client import Consumer, OffsetAndMetadata, Producer
from tests.integration.conftest import StartBrokers, StartController
from tests.integration.kafka_clients.test_kafka_transactions import OVERRIDES, PARTITIONS, read_all
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster
from tests.integration.transaction_clients import committed_offsets

pytestmark = pytest.mark.integration

INPUT, OUTPUT, GROUP = "eos-input", "eos-output", "eos-group"


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController) -> KafkaCluster:
    cluster = start_kafka_cluster(start_brokers, start_controller, overrides={
        **OVERRIDES, "group.initial.rebalance.delay.ms": "0"})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"})
                                       for t in (INPUT, OUTPUT)], operation_timeout=30).values():
        future.result(timeout=60)
    return cluster


def produce_input(cluster: KafkaCluster, values: list[str]) -> None:
    producer = ConfluentProducer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for i, value in enumerate(values):
        producer.produce(INPUT, value.encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def committed(cluster: KafkaCluster) -> list[int]:
    return committed_offsets(cluster.bootstrap, GROUP, INPUT, PARTITIONS)


def transform_round(consumer: Consumer, producer: Producer, count: int, commit: bool) -> None:
    """Read `count` input records, write their transforms and the member's positions in one transaction."""
    producer.begin_transaction()
    read = 0
    deadline = time.monotonic() + 60
    while read < count:
        assert time.monotonic() < deadline, f"{read} of {count} input records in a minute"
        for records in consumer.poll(timeout_ms=500).values():
            for record in records:
                producer.send(OUTPUT, record.value.upper(), partition=record.partition)
            read += len(records)
    producer.flush(30)  # written before the commit or abort (an abort fails what is still queued, as Java's)
    positions = {tp: OffsetAndMetadata(consumer.position(tp)) for tp in consumer.assignment()}
    producer.send_offsets_to_transaction(positions, consumer.group_metadata())
    if commit:
        producer.commit_transaction()
    else:
        producer.abort_transaction()


def test_the_projects_consume_transform_produce_commits_output_and_offsets_together(
        cluster: KafkaCluster) -> None:
    produce_input(cluster, [f"first-{i}" for i in range(9)])
    consumer = Consumer(INPUT, bootstrap_servers=cluster.grpc_bootstrap, group_id=GROUP, enable_auto_commit=False,
                        auto_offset_reset="earliest", isolation_level="read_committed")
    producer = Producer(bootstrap_servers=cluster.grpc_bootstrap, transactional_id="project-eos")
    try:
        producer.init_transactions()
        transform_round(consumer, producer, 9, commit=True)
        assert sum(committed(cluster)) == 9
        produce_input(cluster, [f"second-{i}" for i in range(6)])
        transform_round(consumer, producer, 6, commit=False)
    finally:
        producer.close()
        consumer.close(autocommit=False)
    # The abort left the group's offsets where the commit put them, and its output unread.
    assert sum(committed(cluster)) == 9
    assert sorted(read_all(cluster, "read_committed", topic=OUTPUT)) == sorted(f"FIRST-{i}" for i in range(9))
    assert len(read_all(cluster, "read_uncommitted", topic=OUTPUT)) == 15

"""Exactly-once consume-transform-produce with confluent-kafka (KIP-98, KIP-447): a group member reads the input,
a transactional producer writes each record's transform to the output and, with send_offsets_to_transaction
(AddOffsetsToTxn, then TxnOffsetCommit v3 with the member's generation), the member's positions in the same
transaction. A commit moves the output and the group's offsets together; an abort moves neither, and the work
done again after the rewind reaches the output once. The group's offsets are read with librdkafka's committed()
from a read_committed consumer, which asks OffsetFetch with require_stable and so waits out the markers that
follow EndTxn's answer."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import StartBrokers, StartController
from tests.integration.kafka_clients.test_kafka_transactions import OVERRIDES, PARTITIONS, read_all
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster

pytestmark = pytest.mark.integration

INPUT, OUTPUT, GROUP = "eos-input", "eos-output", "eos-group"


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController) -> KafkaCluster:
    cluster = start_kafka_cluster(start_brokers, start_controller, overrides={
        **OVERRIDES, "offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"})
                                       for t in (INPUT, OUTPUT)], operation_timeout=30).values():
        future.result(timeout=60)
    return cluster


def produce_input(cluster: KafkaCluster, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for i, value in enumerate(values):
        producer.produce(INPUT, value.encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def committed(cluster: KafkaCluster) -> list[int]:
    """The group's committed input offsets, per partition, once no commit of theirs is pending."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP,
                         "isolation.level": "read_committed"})
    try:
        answers = consumer.committed([TopicPartition(INPUT, p) for p in range(PARTITIONS)], timeout=30)
        assert all(tp.error is None for tp in answers), answers
        return [tp.offset for tp in answers]
    finally:
        consumer.close()


def poll_records(consumer: Consumer, count: int) -> list[Message]:
    records: list[Message] = []
    deadline = time.monotonic() + 60
    while len(records) < count:
        assert time.monotonic() < deadline, f"{len(records)} of {count} input records in a minute"
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None, message.error()
            records.append(message)
    return records


def transform(consumer: Consumer, producer: Producer, count: int, commit: bool) -> list[str]:
    """One transaction: `count` input records polled, each upper-cased to the output, the member's positions
    sent to the transaction, then committed or aborted. The input values, in poll order."""
    records = poll_records(consumer, count)
    values = []
    producer.begin_transaction()
    for record in records:
        value = record.value()
        assert value is not None
        values.append(value.decode())
        producer.produce(OUTPUT, value.upper(), partition=record.partition())
    # In the log before the outcome: librdkafka's abort purges what it has not sent yet.
    assert producer.flush(30) == 0
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata(), 30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)
    return values


def test_each_input_record_reaches_the_output_once_and_the_offsets_move_with_committed_transactions(
        cluster: KafkaCluster) -> None:
    first = [f"first-{i}" for i in range(12)]
    produce_input(cluster, first)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "eos-app"})
    producer.init_transactions(60)
    consumer.subscribe([INPUT])
    try:
        assert sorted(transform(consumer, producer, len(first), commit=True)) == sorted(first)
        assert committed(cluster) == [4, 4, 4]

        second = [f"second-{i}" for i in range(6)]
        produce_input(cluster, second)
        assert sorted(transform(consumer, producer, len(second), commit=False)) == sorted(second)
        assert committed(cluster) == [4, 4, 4]  # the aborted transaction's offsets went with it
        assert sorted(read_all(cluster, "read_committed", topic=OUTPUT)) == sorted(v.upper() for v in first)

        # The application rewinds to its committed offsets and does the aborted work again.
        for tp in consumer.assignment():
            consumer.seek(TopicPartition(tp.topic, tp.partition, 4))
        assert sorted(transform(consumer, producer, len(second), commit=True)) == sorted(second)
        assert committed(cluster) == [6, 6, 6]
    finally:
        consumer.close()
    assert sorted(read_all(cluster, "read_committed", topic=OUTPUT)) == sorted(v.upper() for v in first + second)
    assert sorted(read_all(cluster, "read_uncommitted", topic=OUTPUT)) == sorted(
        v.upper() for v in first + second + second)

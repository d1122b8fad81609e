"""The project's own transactional producer over gRPC (issue 25) against three real brokers: it commits and
aborts across partitions, and confluent-kafka's read_committed and read_uncommitted consumers and the project's
read_committed consumer see what they should; a second project producer with the same transactional id fences
the first; the transaction coordinator SIGKILLed mid-transaction leaves the producer able to commit (or told to
abort), and every read_committed reader sees the transaction whole or not at all.

The cluster, topic and confluent-kafka readers are test_kafka_transactions.py's, so both producers are held to
the same reads."""

from __future__ import annotations

import signal

import pytest

from broker.coordinator.transaction.transaction_state_manager import partition_for
from client import Consumer, KafkaError, Producer, TopicPartition
from client.errors import ErrorCode, IllegalStateError
from tests.integration.conftest import WaitUntil
from tests.integration.kafka_clients.test_kafka_transactions import (  # noqa: F401 (cluster: the fixture)
    PARTITIONS,
    STATE_PARTITIONS,
    TOPIC,
    cluster,
    leader_of,
    read_all,
    values,
)
from tests.integration.kafka_cluster import KafkaCluster

pytestmark = pytest.mark.integration


def transactional_producer(cluster: KafkaCluster, transactional_id: str) -> Producer:  # noqa: F811
    p = Producer(bootstrap_servers=cluster.grpc_bootstrap, transactional_id=transactional_id, linger_ms=5,
                 max_block_ms=60000)
    p.init_transactions()
    return p


def send_all(p: Producer, prefix: str, count: int) -> None:
    futures = [p.send(TOPIC, f"{prefix}-{i}".encode(), partition=i % PARTITIONS) for i in range(count)]
    p.flush(30)
    for future in futures:
        future.get(0)  # raises if the record failed


def read_with_project_consumer(cluster: KafkaCluster) -> list[str]:  # noqa: F811
    """Every record the project's read_committed consumer reads up to each partition's last stable offset."""
    consumer = Consumer(bootstrap_servers=cluster.grpc_bootstrap, isolation_level="read_committed",
                        enable_auto_commit=False)
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps, 10000)
        read: list[str] = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for records in consumer.poll(timeout_ms=1000).values():
                read += [r.value.decode() for r in records]
        return read
    finally:
        consumer.close()


def test_the_projects_producer_commits_and_aborts_across_partitions(cluster: KafkaCluster) -> None:  # noqa: F811
    p = transactional_producer(cluster, "project-commit-abort")
    try:
        for prefix, commit in (("first", True), ("aborted", False), ("second", True)):
            p.begin_transaction()
            send_all(p, prefix, 30)
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
    finally:
        p.close()
    committed = sorted(values("first", 30) + values("second", 30))
    assert sorted(read_all(cluster, "read_committed")) == committed
    assert sorted(read_all(cluster, "read_uncommitted")) == sorted(committed + values("aborted", 30))
    assert sorted(read_with_project_consumer(cluster)) == committed


def test_a_second_project_producer_fences_the_first(cluster: KafkaCluster) -> None:  # noqa: F811
    first = transactional_producer(cluster, "project-fenced")
    second: Producer | None = None
    try:
        first.begin_transaction()
        send_all(first, "zombie", 9)
        second = transactional_producer(cluster, "project-fenced")  # aborts the open transaction, bumps the epoch
        with pytest.raises(KafkaError) as raised:
            first.commit_transaction()
        assert raised.value.code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH), raised.value
        # Fatal: the fenced producer cannot start over, only close.
        with pytest.raises(KafkaError):
            first.begin_transaction()
        second.begin_transaction()
        send_all(second, "successor", 6)
        second.commit_transaction()
    finally:
        first.close()
        if second is not None:
            second.close()
    assert sorted(read_all(cluster, "read_committed")) == sorted(values("successor", 6))
    assert sorted(read_all(cluster, "read_uncommitted")) == sorted(values("zombie", 9) + values("successor", 6))


def test_send_outside_a_transaction_is_refused(cluster: KafkaCluster) -> None:  # noqa: F811
    p = transactional_producer(cluster, "project-no-begin")
    try:
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.send(TOPIC, b"outside")
    finally:
        p.close()


def test_the_coordinator_killed_mid_transaction(cluster: KafkaCluster, wait_until: WaitUntil) -> None:  # noqa: F811
    transactional_id = "project-coordinator-killed"
    p = transactional_producer(cluster, transactional_id)
    try:
        p.begin_transaction()
        send_all(p, "before", 6)
        coordinator = leader_of(cluster, "__transaction_state", partition_for(transactional_id, STATE_PARTITIONS))
        cluster.brokers[coordinator].process.signal(signal.SIGKILL)
        wait_until(lambda: leader_of(cluster, "__transaction_state",
                                     partition_for(transactional_id, STATE_PARTITIONS)) not in (coordinator, -1),
                   timeout=60, message="a new transaction coordinator")
        send_all(p, "after", 6)  # the partitions' leaders may have moved too
        try:
            p.commit_transaction()  # NOT_COORDINATOR / a dead connection: the new coordinator is looked up
            expected = sorted(values("before", 6) + values("after", 6))
        except KafkaError as exc:
            assert not isinstance(exc, IllegalStateError)
            p.abort_transaction()  # told to abort: the transaction must vanish for read_committed readers
            expected = []
    finally:
        p.close()
    assert sorted(read_all(cluster, "read_committed", timeout=60)) == expected
    assert sorted(read_with_project_consumer(cluster)) == expected

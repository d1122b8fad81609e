"""Transactional offset commits on real brokers (KIP-98, KIP-447): TxnOffsetCommit and the transaction
coordinator's WriteTxnMarkers sent over the Kafka door with the project's codec to the leader of the group's
__consumer_offsets partition, OffsetFetch v7 with and without require_stable before and after each marker (and
the gRPC door's OffsetFetch agreeing), and confluent-kafka's committed() reading the outcome. The pending
offsets of an open transaction survive a SIGKILL of that leader: the new leader loads them from its replica,
still pending, and the marker sent to it commits them."""

from __future__ import annotations

import signal
from typing import Any

import grpc
import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.find_coordinator.v0.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v0.response import FindCoordinatorResponse
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.offset_fetch.v7.response import OffsetFetchResponse
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.schema.txn_offset_commit.v3.response import TxnOffsetCommitResponse
from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32, i64

from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster
from tests.integration.kafka_wire import WireConnection, encode_request
from tests.integration.transaction_wire import TransactionWire

pytestmark = pytest.mark.integration

TOPIC = "txn-offsets-input"
GROUP = "txn-offsets-group"
TRANSACTIONAL_ID = "txn-offsets-producer"
OFFSETS_TOPIC = "__consumer_offsets"
NONE, NOT_COORDINATOR, LOAD_IN_PROGRESS, UNSTABLE_OFFSET_COMMIT = 0, 16, 14, 88


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController) -> KafkaCluster:
    # One __consumer_offsets partition, on every broker: its leader is the group's coordinator.
    cluster = start_kafka_cluster(start_brokers, start_controller, overrides={
        "offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "3"})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)], operation_timeout=30)[TOPIC].result(timeout=60)
    return cluster


def call(address: str, request: Any, response_type: type[Any]) -> Any:
    with WireConnection(address) as conn:
        conn.send(encode_request(request, 1))
        correlation_id, body = conn.receive_body(response_type)
    assert correlation_id == 1
    return body


def coordinator(cluster: KafkaCluster, alive: list[int], wait_until: WaitUntil) -> int:
    """The group's coordinator as the live brokers answer FindCoordinator (the first one creates
    __consumer_offsets)."""
    found: list[int] = []

    def answered() -> bool:
        answer = call(cluster.brokers[alive[0]].kafka_address, FindCoordinatorRequest(key=GROUP),
                      FindCoordinatorResponse)
        if answer.error_code != NONE or int(answer.node_id) not in alive:
            return False
        found.append(int(answer.node_id))
        return True

    wait_until(answered, 60, "a coordinator for the group")
    return found[-1]


def txn_offset_commit(address: str, pid: int, offset: int) -> int:
    answer = call(address, TxnOffsetCommitRequest(
        transactional_id=TransactionalId(TRANSACTIONAL_ID), group_id=GroupId(GROUP), producer_id=ProducerId(pid),
        producer_epoch=i16(0), generation_id=i32(-1), member_id="", group_instance_id=None,
        topics=(TxnOffsetCommitRequestTopic(name=TopicName(TOPIC), partitions=(TxnOffsetCommitRequestPartition(
            partition_index=i32(0), committed_offset=i64(offset), committed_leader_epoch=i32(-1),
            committed_metadata="txn"),)),)), TxnOffsetCommitResponse)
    [topic] = answer.topics
    [partition] = topic.partitions
    return int(partition.error_code)


def offset_fetch(address: str, require_stable: bool) -> tuple[int, int]:
    """(committed offset, partition error) of the input partition, from OffsetFetch v7."""
    answer = call(address, OffsetFetchRequest(group_id=GroupId(GROUP), require_stable=require_stable, topics=(
        OffsetFetchRequestTopic(name=TopicName(TOPIC), partition_indexes=(i32(0),)),)), OffsetFetchResponse)
    if answer.error_code != NONE:
        return -1, int(answer.error_code)
    [topic] = answer.topics
    [partition] = topic.partitions
    return int(partition.committed_offset), int(partition.error_code)


def grpc_offset_fetch(address: str, require_stable: bool) -> tuple[int, int]:
    """The same question on the broker's gRPC door: both doors answer through group_operations."""
    request = pb.OffsetFetchRequest(group_id=GROUP, require_stable=require_stable)
    request.topics.add(name=TOPIC, partition_indexes=[0])
    with grpc.insecure_channel(address) as channel:
        answer = pb_grpc.KafkaClientStub(channel).OffsetFetch(request, timeout=30)
    assert answer.error_code == NONE
    [partition] = answer.topics[0].partitions
    return partition.committed_offset, partition.error_code


def confluent_committed(bootstrap: str) -> int:
    """The group's committed offset as librdkafka's committed() reads it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        [tp] = consumer.committed([CkTopicPartition(TOPIC, 0)], timeout=30)
        assert tp.error is None, tp.error
        return int(tp.offset)
    finally:
        consumer.close()


def test_txn_offsets_are_pending_until_the_marker_and_survive_a_coordinator_failover(
        cluster: KafkaCluster, wait_until: WaitUntil) -> None:
    brokers = sorted(cluster.brokers)
    leader = coordinator(cluster, brokers, wait_until)
    address = cluster.brokers[leader].kafka_address
    wait_until(lambda: offset_fetch(address, False)[1] == NONE, 60, "the coordinator's load of its partition")
    # The transaction coordinator's part: a producer id, and markers to the group's __consumer_offsets partition.
    coordinator_wire = TransactionWire(address, OFFSETS_TOPIC)
    pid = coordinator_wire.init_producer_id()

    # Commit: pending (unstable to a require_stable reader, invisible to the others) until the COMMIT marker.
    assert txn_offset_commit(address, pid, 5) == NONE
    assert offset_fetch(address, require_stable=True) == (-1, UNSTABLE_OFFSET_COMMIT)
    assert offset_fetch(address, require_stable=False) == (-1, NONE)
    grpc_address = cluster.brokers[leader].address
    assert grpc_offset_fetch(grpc_address, require_stable=True) == (-1, UNSTABLE_OFFSET_COMMIT)
    assert grpc_offset_fetch(grpc_address, require_stable=False) == (-1, NONE)
    coordinator_wire.write_marker(pid, commit=True)
    assert grpc_offset_fetch(grpc_address, require_stable=True) == (5, NONE)
    assert offset_fetch(address, require_stable=True) == (5, NONE)
    assert confluent_committed(cluster.bootstrap) == 5

    # Abort: the next transaction's offsets go with its ABORT marker.
    assert txn_offset_commit(address, pid, 9) == NONE
    assert offset_fetch(address, require_stable=True) == (-1, UNSTABLE_OFFSET_COMMIT)
    coordinator_wire.write_marker(pid, commit=False)
    assert offset_fetch(address, require_stable=True) == (5, NONE)

    # An open transaction's offsets, then its coordinator SIGKILLed: the new leader of the partition loads them
    # from its own replica, pending still, and the marker written there commits them.
    assert txn_offset_commit(address, pid, 12) == NONE  # acks=all: on every in-sync replica
    coordinator_wire.close()
    cluster.brokers[leader].process.signal(signal.SIGKILL)
    alive = [b for b in brokers if b != leader]
    new_leader = coordinator(cluster, alive, wait_until)
    new_address = cluster.brokers[new_leader].kafka_address
    wait_until(lambda: offset_fetch(new_address, True)[1] not in (NOT_COORDINATOR, LOAD_IN_PROGRESS), 60,
               "the new coordinator's load")
    assert offset_fetch(new_address, require_stable=True) == (-1, UNSTABLE_OFFSET_COMMIT)
    assert offset_fetch(new_address, require_stable=False) == (5, NONE)
    new_coordinator_wire = TransactionWire(new_address, OFFSETS_TOPIC)
    new_coordinator_wire.write_marker(pid, commit=True)
    new_coordinator_wire.close()
    assert offset_fetch(new_address, require_stable=True) == (12, NONE)
    bootstrap = ",".join(cluster.brokers[b].kafka_address for b in alive)
    assert confluent_committed(bootstrap) == 12

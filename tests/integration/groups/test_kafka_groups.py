"""Real clients' group consumers against the group coordinator on a three-broker cluster (issue 15): kafka-python
and confluent-kafka join, consume, commit and resume from their commits after a restart; a kafka-python and a
confluent-kafka member share one group's partitions; and SIGKILLing the group's coordinator moves the group to
the new leader of its __consumer_offsets partition without losing an acknowledged commit. Static members
(group.instance.id) restart into their old place.
(The exhaustive client x fault matrix lives with the groups-proof work; this is the coordinator's own proof.)"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer
from kio.schema.find_coordinator.v1.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v1.response import FindCoordinatorResponse
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_commit.v8.response import OffsetCommitResponse
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i64

from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC_NAME, partition_for
from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import KAFKA_PYTHON_GROUP_MEMBER, KafkaCluster, start_kafka_cluster
from tests.integration.kafka_wire import WireConnection, encode_request

pytestmark = pytest.mark.integration

OFFSETS_PARTITIONS = 5
PARTITIONS = 4
GROUP_OVERRIDES = {
    # Small clusters may shrink the offsets topic; the replication factor stays Kafka's 3.
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    # Tests (as Kafka's own) do not wait for more members to come to a new group.
    "group.initial.rebalance.delay.ms": "0",
    "replica.lag.time.max.ms": "10000",
}


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController) -> KafkaCluster:
    return start_kafka_cluster(start_brokers, start_controller, overrides=GROUP_OVERRIDES)


def create_topic(cluster: KafkaCluster, name: str) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 3)], operation_timeout=30)[name].result(timeout=60)
    return admin


def produce(cluster: KafkaCluster, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in values:
        producer.produce(topic, str(i).encode(), key=str(i).encode())
    assert producer.flush(30) == 0


def ck_consumer(cluster: KafkaCluster, group: str, **extra: Any) -> Consumer:
    return Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000, **extra})


def kp_consumer(cluster: KafkaCluster, group: str, topic: str) -> KafkaConsumer:
    return KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, auto_offset_reset="earliest",
                         enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=1000,
                         **KAFKA_PYTHON_GROUP_MEMBER)


def ck_poll(consumer: Consumer, wanted: int, timeout: float = 60.0) -> list[int]:
    values: list[int] = []
    deadline = time.monotonic() + timeout
    while len(values) < wanted and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(int(message.value()))
    return values


def kp_poll(consumer: KafkaConsumer, wanted: int, timeout: float = 60.0) -> list[int]:
    values: list[int] = []
    deadline = time.monotonic() + timeout
    while len(values) < wanted and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(int(r.value) for r in records)
    return values


def test_group_consumers_commit_resume_and_share_partitions(cluster: KafkaCluster, wait_until: WaitUntil) -> None:
    ck_admin = create_topic(cluster, "orders")
    produce(cluster, "orders", range(40))

    # kafka-python: consume everything, commit, close; a restarted consumer resumes after the commits.
    kp = kp_consumer(cluster, "kp-group", "orders")
    assert sorted(kp_poll(kp, 40)) == list(range(40))
    kp.commit()
    kp.close()
    # confluent-kafka alike, in its own group: groups do not share commits.
    ck = ck_consumer(cluster, "ck-group")
    ck.subscribe(["orders"])
    assert sorted(ck_poll(ck, 40)) == list(range(40))
    ck.commit(asynchronous=False)
    ck.close()

    produce(cluster, "orders", range(40, 50))
    kp = kp_consumer(cluster, "kp-group", "orders")
    assert sorted(kp_poll(kp, 10)) == list(range(40, 50)), "kafka-python resumed from its committed offsets"
    assert kp_poll(kp, 1, timeout=2) == []
    kp.close()
    ck = ck_consumer(cluster, "ck-group")
    ck.subscribe(["orders"])
    assert sorted(ck_poll(ck, 10)) == list(range(40, 50)), "confluent-kafka resumed from its committed offsets"
    committed = ck.committed([CkTopicPartition("orders", p) for p in range(PARTITIONS)], timeout=10)
    ck.close()
    assert sum(tp.offset for tp in committed) == 40, "the first run's commits, read back through OffsetFetch"

    # A kafka-python and a confluent-kafka member in one group split the partitions between them.
    mixed_kp = kp_consumer(cluster, "mixed", "orders")
    mixed_ck = ck_consumer(cluster, "mixed", **{"partition.assignment.strategy": "range"})
    mixed_ck.subscribe(["orders"])
    seen: list[int] = []

    def both_assigned() -> bool:
        seen.extend(int(r.value) for records in mixed_kp.poll(timeout_ms=200).values() for r in records)
        message = mixed_ck.poll(0.2)
        if message is not None and message.error() is None:
            seen.append(int(message.value()))
        return bool(mixed_kp.assignment()) and bool(mixed_ck.assignment())

    wait_until(both_assigned, timeout=60, message="both members have partitions")
    kp_parts = {tp.partition for tp in mixed_kp.assignment()}
    ck_parts = {tp.partition for tp in mixed_ck.assignment()}
    assert not kp_parts & ck_parts and kp_parts | ck_parts == set(range(PARTITIONS))
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        wait_until(lambda: admin.describe_groups(["mixed"])["mixed"]["group_state"] == "Stable", timeout=30,
                   message="the mixed group is Stable")
        described = admin.describe_groups(["mixed"])["mixed"]
        assert len(described["members"]) == 2 and described["protocol_data"] == "range"
        assert {"kp-group", "ck-group", "mixed"} <= {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()
    mixed_kp.close()
    mixed_ck.close()

    # Static members (KIP-345): a restarted member with the same group.instance.id takes its old place, with its
    # old partitions (librdkafka sends no LeaveGroup for a static member; that no rebalance happens is in the
    # unit tests).
    def static_member(instance: str) -> Consumer:
        member = ck_consumer(cluster, "static", **{"group.instance.id": instance,
                                                   "partition.assignment.strategy": "range"})
        member.subscribe(["orders"])
        return member

    def assigned(*members: Consumer) -> bool:
        for member in members:
            member.poll(0.1)
        return all(member.assignment() for member in members)

    first, second = static_member("i-1"), static_member("i-2")
    wait_until(lambda: assigned(first, second), timeout=60, message="both static members have partitions")
    before = {tp.partition for tp in second.assignment()}
    second.close()
    second = static_member("i-2")
    wait_until(lambda: assigned(first, second), timeout=30, message="the restarted static member has partitions")
    assert {tp.partition for tp in second.assignment()} == before
    static = ck_admin.describe_consumer_groups(["static"])["static"].result(timeout=30)
    assert sorted(m.group_instance_id for m in static.members) == ["i-1", "i-2"]
    first.close()
    second.close()

    # Only the coordinator writes __consumer_offsets (Kafka's INVALID_TOPIC_EXCEPTION for anyone else).
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "message.send.max.retries": 0})
    producer.produce(GROUP_METADATA_TOPIC_NAME, b"garbage", partition=0, on_delivery=lambda e, m: errors.append(e))
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION]


def coordinator_of(admin: AdminClient, group: str) -> int:
    offsets = admin.list_topics(GROUP_METADATA_TOPIC_NAME, timeout=10).topics[GROUP_METADATA_TOPIC_NAME]
    return int(offsets.partitions[partition_for(group, OFFSETS_PARTITIONS)].leader)


def test_killing_the_coordinator_moves_the_group_and_keeps_every_acknowledged_commit(
        cluster: KafkaCluster, wait_until: WaitUntil) -> None:
    admin = create_topic(cluster, "events")
    produce(cluster, "events", range(200))
    consumer = ck_consumer(cluster, "failover")
    consumer.subscribe(["events"])
    consumed: list[int] = []
    acknowledged: dict[int, int] = {}

    def consume_and_commit(seen: int) -> None:
        """Until `seen` distinct records were consumed, committing after each (redeliveries after the group
        moves are expected: at least once)."""
        deadline = time.monotonic() + 90
        while len(set(consumed)) < seen and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            consumed.append(int(message.value()))
            try:
                for tp in consumer.commit(message=message, asynchronous=False) or []:
                    if tp.error is None:
                        acknowledged[tp.partition] = tp.offset
            except Exception:
                continue

    consume_and_commit(100)
    old = coordinator_of(admin, "failover")
    cluster.brokers[old].process.signal(signal.SIGKILL)
    cluster.brokers[old].process.wait()
    before_kill = dict(acknowledged)
    survivors = KafkaCluster({k: v for k, v in cluster.brokers.items() if k != old})
    produce(survivors, "events", range(200, 300))
    consume_and_commit(300)
    assert sorted(set(consumed)) == list(range(300)), "every record consumed after the coordinator died"
    survivors_admin = AdminClient({"bootstrap.servers": survivors.bootstrap})
    new = coordinator_of(survivors_admin, "failover")
    assert new not in (old, -1)
    consumer.close()

    # Read the commits back through a fresh consumer: the new coordinator loaded them from its log.
    reader = Consumer({"bootstrap.servers": survivors.bootstrap, "group.id": "failover"})
    committed = {tp.partition: tp.offset
                 for tp in reader.committed([CkTopicPartition("events", p) for p in range(PARTITIONS)], timeout=30)}
    reader.close()
    for partition, offset in before_kill.items():
        assert committed[partition] >= offset, "a commit acknowledged before the kill survived it"
    assert committed == acknowledged, "the last acknowledged commit of each partition is the committed offset"



def test_a_standalone_commit_naming_a_departed_member_is_stored_on_the_empty_group(
        cluster: KafkaCluster, wait_until: WaitUntil) -> None:
    """Kafka 2.8's GroupCoordinator.doCommitOffsets: an OffsetCommit of generation -1 on an Empty group only stores
    offsets, whatever member id it names (here that of a confluent-kafka member that has left). It was refused
    with UNKNOWN_MEMBER_ID."""
    admin = create_topic(cluster, "departed")
    produce(cluster, "departed", range(20))
    consumer = ck_consumer(cluster, "departed-group")
    consumer.subscribe(["departed"])
    deadline = time.monotonic() + 60
    while not consumer.assignment():
        assert time.monotonic() < deadline, "never assigned"
        consumer.poll(0.2)

    def described() -> Any:
        [future] = admin.describe_consumer_groups(["departed-group"]).values()
        return future.result(timeout=30)

    [member] = described().members
    consumer.close()
    wait_until(lambda: str(described().state).endswith("EMPTY"), timeout=30, message="the group Empty")

    with WireConnection(cluster.brokers[1].kafka_address) as any_broker:
        any_broker.send(encode_request(FindCoordinatorRequest(key=GroupId("departed-group"), key_type=i8(0)), 1))
        _, found = any_broker.receive_body(FindCoordinatorResponse)
    assert found.error_code == 0
    commit = OffsetCommitRequest(
        group_id=GroupId("departed-group"), generation_id_or_member_epoch=i32(-1), member_id=member.member_id,
        group_instance_id=None, topics=(OffsetCommitRequestTopic(name=TopicName("departed"), partitions=(
            OffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(7),
                                         committed_leader_epoch=i32(-1), committed_metadata="standalone"),)),))
    with WireConnection(f"{found.host}:{found.port}") as coordinator:
        coordinator.send(encode_request(commit, 2))
        _, answer = coordinator.receive_body(OffsetCommitResponse)
    assert [p.error_code for t in answer.topics for p in t.partitions] == [0]
    committed = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "departed-group"}).committed(
        [CkTopicPartition("departed", 0)], timeout=30)
    assert [(p.offset, p.metadata) for p in committed] == [(7, "standalone")]

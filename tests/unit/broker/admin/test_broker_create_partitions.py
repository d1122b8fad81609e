"""CreatePartitions (Kafka's ZkAdminManager.createPartitions with AdminZkClient's assignment): the new partitions
continue the topic's round robin, and every request that cannot grow the topic gets Kafka's error and message."""

from __future__ import annotations

import pytest

from broker.admin.admin_manager import AdminManager, NewPartitions
from broker.config.topic_config import TopicConfigs
from proto.errors import ErrorCode
from tests.fakes import FakeZk
from tests.unit.broker.broker_helpers import broker_config
from zk.paths import ReplicaAssignment, TopicAssignment


def fake_zk() -> FakeZk:
    zk = FakeZk()
    zk.add_broker(1, 2, 3)
    zk.add_topic("t", {0: [2, 3], 1: [3, 1]})
    return zk


def create(zk: FakeZk, *requests: NewPartitions, validate_only: bool = False) -> list[tuple[ErrorCode, str]]:
    broker = broker_config()
    manager = AdminManager(broker, zk, TopicConfigs(broker))  # type: ignore[arg-type]
    return [(r.error, r.message) for r in manager.create_partitions(list(requests), validate_only)]


def test_new_partitions_continue_the_round_robin_from_partition_0s_leader() -> None:
    zk = fake_zk()
    assert create(zk, NewPartitions("t", 4)) == [(ErrorCode.NONE, "")]
    # Partition 0 starts at broker 2 (index 1), the start index and first shift: partitions 2 and 3 lead on
    # brokers 1 and 2 ((p + 1) mod 3), the shift growing by one as partition 3 wraps the broker list.
    assignment = zk.topics["t"]
    assert {p: assignment.replicas(p) for p in assignment.partitions} == {
        0: (2, 3), 1: (3, 1), 2: (1, 3), 3: (2, 3)}


def test_an_explicit_assignment_places_the_new_partitions() -> None:
    zk = fake_zk()
    assert create(zk, NewPartitions("t", 3, [[1, 2]])) == [(ErrorCode.NONE, "")]
    assert zk.topics["t"].replicas(2) == (1, 2)


@pytest.mark.parametrize(("request_", "code", "message"), [
    (NewPartitions("t", 1), ErrorCode.INVALID_PARTITIONS,
     "Topic currently has 2 partitions, which is higher than the requested 1."),
    (NewPartitions("t", 2), ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partitions."),
    (NewPartitions("nope", 3), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist."),
    (NewPartitions("t", 4, [[1, 2]]), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Increasing the number of partitions by 2 but 1 assignments provided."),
    (NewPartitions("t", 3, [[1, 9]]), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Unknown broker(s) in replica assignment: 9."),
    (NewPartitions("t", 3, [[1]]), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Inconsistent replication factor between partitions, partition 0 has 2 while partitions [2] have replication"
     " factors [1], respectively."),
    (NewPartitions("t", 3, [[1, 1]]), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Duplicate brokers not allowed in replica assignment: 1, 1 for partition id 2."),
    (NewPartitions("t", 200_000), ErrorCode.INVALID_PARTITIONS, "Number of partitions 200000 is larger than 100000."),
])
def test_requests_that_cannot_grow_the_topic_are_refused(request_: NewPartitions, code: ErrorCode,
                                                         message: str) -> None:
    zk = fake_zk()
    assert create(zk, request_) == [(code, message)]
    assert zk.topic_partition_writes == []


def test_a_topic_being_reassigned_or_deleted_is_refused() -> None:
    zk = fake_zk()
    zk.topics["r"] = TopicAssignment("r", {0: ReplicaAssignment((1, 2), adding_replicas=(2,))})
    zk.add_topic("d", {0: [1]})
    zk.topic_deletions.add("d")
    assert [code for code, _ in create(zk, NewPartitions("r", 2), NewPartitions("d", 2))] == [
        ErrorCode.REASSIGNMENT_IN_PROGRESS, ErrorCode.INVALID_TOPIC_EXCEPTION]
    assert create(zk, NewPartitions("t", 3), validate_only=True) == [(ErrorCode.NONE, "")]
    assert zk.topic_partition_writes == []


def test_an_assignment_zookeeper_cannot_store_is_refused() -> None:
    zk = fake_zk()
    (code, message), = create(zk, NewPartitions("t", 100_000, None))
    assert code is ErrorCode.POLICY_VIOLATION
    assert message.startswith("Topic t cannot be given 100000 partitions: writing its assignment to /brokers/topics/t")
    assert zk.topic_partition_writes == []

"""CreateTopics / DeleteTopics validation: each bad topic gets Kafka's error code and nothing is written."""

from __future__ import annotations

import pytest
from kazoo.exceptions import ConnectionLoss, SessionExpiredError

from broker.admin.admin_manager import AdminManager, NewTopic
from broker.config.topic_config import TopicConfigs
from proto.errors import ErrorCode
from tests.fakes import FakeZk
from tests.unit.broker.broker_helpers import broker_config


def fake_zk(brokers: tuple[int, ...] = (1, 2, 3), topics: tuple[str, ...] = ()) -> FakeZk:
    zk = FakeZk()
    zk.add_broker(*brokers)
    for t in topics:
        zk.add_topic(t, {0: [1]})
    return zk


def admin(zk: FakeZk, **config: str) -> AdminManager:
    broker = broker_config(**config)
    return AdminManager(broker, zk, TopicConfigs(broker))  # type: ignore[arg-type]


def create(zk: FakeZk, *topics: NewTopic, validate_only: bool = False, **config: str) -> list[tuple[ErrorCode, str]]:
    return [(r.error, r.message) for r in admin(zk, **config).create_topics(list(topics), validate_only)]


def test_defaults_and_explicit_counts() -> None:
    zk = fake_zk()
    results = admin(zk, **{"num.partitions": "4", "default.replication.factor": "2"}).create_topics(
        [NewTopic("a", -1, -1), NewTopic("b", 2, 3)], validate_only=False)
    assert [(r.error, r.num_partitions, r.replication_factor) for r in results] == [
        (ErrorCode.NONE, 4, 2), (ErrorCode.NONE, 2, 3)]
    assignment = zk.topics["b"]
    assert sorted(assignment.partitions) == [0, 1] and all(len(set(assignment.replicas(p))) == 3 for p in (0, 1))


@pytest.mark.parametrize(("topic", "code"), [
    (NewTopic("", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (NewTopic("a/b", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (NewTopic("x" * 250, 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (NewTopic("t", 0, 1), ErrorCode.INVALID_PARTITIONS),
    (NewTopic("t", -3, 1), ErrorCode.INVALID_PARTITIONS),
    (NewTopic("t", 2**31 - 1, 1), ErrorCode.INVALID_PARTITIONS),
    (NewTopic("t", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
    (NewTopic("t", 1, 4), ErrorCode.INVALID_REPLICATION_FACTOR),
    (NewTopic("t", 1, 1, configs=[("retention.ms", "soon")]), ErrorCode.INVALID_CONFIG),
    (NewTopic("t", 1, 1, configs=[("bogus", "1")]), ErrorCode.INVALID_CONFIG),
    (NewTopic("t", 1, 1, configs=[("retention.ms", None)]), ErrorCode.INVALID_REQUEST),
    (NewTopic("t", 1, -1, assignments=[(0, [1])]), ErrorCode.INVALID_REQUEST),
    (NewTopic("t", -1, -1, assignments=[(0, [1]), (2, [2])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (NewTopic("t", -1, -1, assignments=[(0, [1]), (0, [2])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (NewTopic("t", -1, -1, assignments=[(0, [1, 1])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (NewTopic("t", -1, -1, assignments=[(0, [1, 2]), (1, [3])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (NewTopic("t", -1, -1, assignments=[(0, [])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (NewTopic("t", -1, -1, assignments=[(0, [1, 9])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (NewTopic("existing", 1, 1), ErrorCode.TOPIC_ALREADY_EXISTS),
    (NewTopic("my.topic", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),  # collides with my_topic
    # Within the partition limit, but /brokers/topics/t would not fit ZooKeeper's jute.maxbuffer.
    (NewTopic("t", 100_000, 1), ErrorCode.POLICY_VIOLATION),
    (NewTopic("t", 70_000, 3), ErrorCode.POLICY_VIOLATION),
    # acks=all could never succeed (Kafka 3 refuses it).
    (NewTopic("t", 1, 2, configs=[("min.insync.replicas", "3")]), ErrorCode.INVALID_CONFIG),
    (NewTopic("t", -1, -1, assignments=[(0, [1])], configs=[("min.insync.replicas", "2")]), ErrorCode.INVALID_CONFIG),
])
def test_invalid_topics_are_refused_and_not_written(topic: NewTopic, code: ErrorCode) -> None:
    zk = fake_zk(topics=("existing", "my_topic"))
    [(error, message)] = create(zk, topic)
    assert error is code, message
    assert message
    assert set(zk.topics) == {"existing", "my_topic"}


def test_explicit_assignment_is_written_as_given() -> None:
    zk = fake_zk()
    [(error, _)] = create(zk, NewTopic("t", -1, -1, assignments=[(1, [3, 1]), (0, [2, 3])]))
    assert error is ErrorCode.NONE
    assert zk.topics["t"].partitions[0].replicas == (2, 3)


def test_duplicates_in_one_request_are_all_refused() -> None:
    zk = fake_zk()
    results = create(zk, NewTopic("t", 1, 1), NewTopic("t", 1, 1), NewTopic("u", 1, 1))
    assert [e for e, _ in results] == [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST, ErrorCode.NONE]
    assert set(zk.topics) == {"u"}


def test_validate_only_writes_nothing() -> None:
    zk = fake_zk()
    assert create(zk, NewTopic("t", 3, 2, configs=[("retention.ms", "1000")]), validate_only=True)[0][0] \
        is ErrorCode.NONE
    assert not zk.topics


def test_validate_only_refuses_an_assignment_zookeeper_cannot_store() -> None:
    [(error, message)] = create(fake_zk(), NewTopic("t", 100_000, 1), validate_only=True)
    assert error is ErrorCode.POLICY_VIOLATION
    assert message.startswith("Topic t cannot be created: writing its assignment to /brokers/topics/t takes a")
    assert "more than jute.maxbuffer (1048575 bytes)" in message


def test_configs_are_stored_with_the_topic() -> None:
    zk = fake_zk()
    create(zk, NewTopic("t", 1, 1, configs=[("min.insync.replicas", "1"), ("retention.ms", "1000")]))
    assert zk.topic_configs["t"] == {"min.insync.replicas": "1", "retention.ms": "1000"}


def test_auto_create_answers_leader_not_available() -> None:
    zk = fake_zk(brokers=(1,))
    manager = admin(zk, **{"default.replication.factor": "1"})
    assert manager.auto_create_topic("fresh") is ErrorCode.LEADER_NOT_AVAILABLE
    assert manager.auto_create_topic("fresh") is ErrorCode.LEADER_NOT_AVAILABLE  # already there: same answer
    assert admin(zk, **{"default.replication.factor": "3"}).auto_create_topic("big") \
        is ErrorCode.INVALID_REPLICATION_FACTOR


def test_delete_topics() -> None:
    zk = fake_zk(topics=("t",))
    results = admin(zk).delete_topics(["t", "unknown", "a/b", "u", "u"])
    assert [r.error for r in results] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                          ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.INVALID_REQUEST,
                                          ErrorCode.INVALID_REQUEST]
    assert zk.topic_deletions == {"t"}
    disabled = admin(zk, **{"delete.topic.enable": "false"}).delete_topics(["t"])
    assert disabled[0].error is ErrorCode.INVALID_REQUEST


class _ZooKeeperGone(FakeZk):
    def get_all_brokers(self) -> list[object]:
        raise ConnectionLoss()

    def get_all_topics(self) -> set[str]:
        raise SessionExpiredError()


def test_without_zookeeper_each_topic_is_unknown_server_error_as_kafka_answers_it() -> None:
    """Kafka's ZkAdminManager answers ApiError.fromThrowable(e): UNKNOWN_SERVER_ERROR, not a failed request."""
    zk = _ZooKeeperGone()
    assert create(zk, NewTopic("a", 1, 1), NewTopic("b", 1, 1)) == [(ErrorCode.UNKNOWN_SERVER_ERROR, "")] * 2
    assert [(r.error, r.message) for r in admin(zk).delete_topics(["a"])] == [(ErrorCode.UNKNOWN_SERVER_ERROR, "")]
    assert not zk.topics

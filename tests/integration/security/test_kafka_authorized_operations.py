"""KIP-430's authorized operations with real clients: confluent-kafka's AdminClient asks Metadata v8 for the
cluster's and each topic's, DescribeGroups v3+ for each group's (kafka-python's, Metadata v8 too, where the
"omitted" value and an empty bit field must be told apart), on a broker with the AclAuthorizer on and SASL
listeners. alice (SCRAM) may Read the topic and the group, bob (PLAIN) may Alter the cluster, admin is a super
user who grants those ACLs with the same client. A broker without an authorizer answers every supported
operation: tests/integration/security/test_kafka_security.py checks that on its broker, to keep to one broker a
module."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import KafkaAdminClient

from tests.integration.secure_cluster import (
    ADMIN,
    ALICE,
    AUTHORIZER_AND_SUPER_USERS,
    BOB,
    SCRAM_USER,
    TOPIC,
    SecureBroker,
    start_secure_broker,
)
from zk.server import LocalZooKeeper

pytestmark = pytest.mark.integration

LISTENER = "SASL_PLAINTEXT"
GROUP = "alices-group"
Op = AclOperation
# AclEntry.supportedOperations: what a super user is told it may do.
TOPIC_OPERATIONS = {Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS,
                    Op.ALTER_CONFIGS}
CLUSTER_OPERATIONS = {Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
                      Op.ALTER, Op.DESCRIBE}
GROUP_OPERATIONS = {Op.DELETE, Op.DESCRIBE, Op.READ}
ANY_ACL = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, Op.ANY,
                           AclPermissionType.ANY)


def admin_client(secure: SecureBroker, user: dict[str, str]) -> AdminClient:
    return AdminClient({"bootstrap.servers": secure.address(LISTENER), **user})


def allow(resource_type: ResourceType, name: str, principal: str, operation: AclOperation) -> AclBinding:
    return AclBinding(resource_type, name, ResourcePatternType.LITERAL, principal, "*", operation,
                      AclPermissionType.ALLOW)


@pytest.fixture(scope="module")
def secure(zookeeper: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    """The broker, with alice's and bob's ACLs granted by admin (and known to the broker's authorizer) and a
    committed offset that makes GROUP exist."""
    # ANONYMOUS is the fixture's PLAINTEXT set-up; admin and it are super users, alice and bob are not.
    broker = start_secure_broker(zookeeper, tmp_path_factory.mktemp("authorized-ops"), {
        **AUTHORIZER_AND_SUPER_USERS, "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1"})
    secure = next(broker)
    try:
        admin = admin_client(secure, ADMIN)
        acls = [allow(ResourceType.TOPIC, TOPIC, f"User:{SCRAM_USER}", Op.READ),
                allow(ResourceType.GROUP, GROUP, f"User:{SCRAM_USER}", Op.READ),
                allow(ResourceType.BROKER, "kafka-cluster", "User:bob", Op.ALTER)]
        for future in admin.create_acls(acls, request_timeout=30).values():
            future.result()
        # DescribeAcls answers from the broker's ACL cache, which follows ZooKeeper's change notifications.
        deadline = time.monotonic() + 30
        while len(admin.describe_acls(ANY_ACL, request_timeout=30).result()) < len(acls):
            assert time.monotonic() < deadline, "the broker never learnt the new ACLs"
            time.sleep(0.1)
        committed = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(GROUP, [CkTopicPartition(TOPIC, 0, 0)])], request_timeout=30)
        committed[GROUP].result()
        yield secure
    finally:
        broker.close()


def topic_operations(secure: SecureBroker, user: dict[str, str], include: bool = True) -> set[AclOperation] | None:
    admin = admin_client(secure, user)  # alive until the answer: its handle serves the future
    described = admin.describe_topics(TopicCollection([TOPIC]), request_timeout=30,
                                      include_authorized_operations=include)
    return as_set(described[TOPIC].result().authorized_operations)


def cluster_operations(secure: SecureBroker, user: dict[str, str], include: bool = True
                       ) -> set[AclOperation] | None:
    admin = admin_client(secure, user)
    described = admin.describe_cluster(request_timeout=30, include_authorized_operations=include)
    return as_set(described.result().authorized_operations)


def group_operations(secure: SecureBroker, user: dict[str, str], include: bool = True) -> set[AclOperation] | None:
    admin = admin_client(secure, user)
    described = admin.describe_consumer_groups([GROUP], request_timeout=30, include_authorized_operations=include)
    return as_set(described[GROUP].result().authorized_operations)


def as_set(operations: list[AclOperation] | None) -> set[AclOperation] | None:
    """The client's list, or its None: the broker answered the "omitted" value (or, confluent-kafka collapses
    them, no operation at all)."""
    return None if operations is None else set(operations)


def kafka_python_admin(secure: SecureBroker, user: dict[str, str]) -> KafkaAdminClient:
    """kafka-python's admin client, which tells an empty bit field (a list) from the "omitted" value (None)."""
    return KafkaAdminClient(bootstrap_servers=secure.address(LISTENER), security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism=user["sasl.mechanisms"], sasl_plain_username=user["sasl.username"],
                            sasl_plain_password=user["sasl.password"])


def test_a_topic_reader_is_told_read_and_describe(secure: SecureBroker) -> None:
    assert topic_operations(secure, ALICE) == {Op.READ, Op.DESCRIBE}
    assert topic_operations(secure, ADMIN) == TOPIC_OPERATIONS
    # Not asked: Metadata's "omitted" value, which the client reports as no answer at all.
    assert topic_operations(secure, ALICE, include=False) is None
    # bob may not describe the topic: refused, and as in Kafka its entry keeps the "omitted" value.
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        topic_operations(secure, BOB)
    bob = kafka_python_admin(secure, BOB)
    try:
        [refused] = bob.describe_topics([TOPIC])  # Metadata v8 asking for both kinds of operations
    finally:
        bob.close()
    assert (refused["error_code"], refused["authorized_operations"]) == (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                                         None)


def test_a_cluster_alterer_is_told_alter_and_describe(secure: SecureBroker) -> None:
    assert cluster_operations(secure, BOB) == {Op.ALTER, Op.DESCRIBE}
    assert cluster_operations(secure, ADMIN) == CLUSTER_OPERATIONS
    assert cluster_operations(secure, BOB, include=False) is None
    # alice may not Describe the cluster: Kafka answers 0, an empty set, not "omitted".
    alice = kafka_python_admin(secure, ALICE)
    try:
        assert alice.describe_cluster()["authorized_operations"] == []
    finally:
        alice.close()


def test_a_group_reader_is_told_read_and_describe(secure: SecureBroker) -> None:
    assert group_operations(secure, ALICE) == {Op.READ, Op.DESCRIBE}
    assert group_operations(secure, ADMIN) == GROUP_OPERATIONS
    assert group_operations(secure, ALICE, include=False) is None

"""What BrokerOperations refuses when the authorizer is on (the checks both front doors share): Metadata's
hiding and auto-creation, Produce refusing before any append, DeleteTopics' order, InitProducerId, the ACL APIs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from broker_helpers import broker_config, live_broker, metadata_state

from broker.api.operations import BrokerOperations
from broker.security.acl import (
    ANY_BINDING,
    CLUSTER_NAME,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.security.authorizer import AclAuthorizer, Session
from broker.security.principal import KafkaPrincipal
from broker.server.admin_manager import DeleteTopicResult
from broker.server.metadata_cache import MetadataCache
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition

T = TypeVar("T")
ALICE = Session(KafkaPrincipal("User", "alice"), "10.0.0.1")
Op = AclOperation


def allow(operation: AclOperation) -> AccessControlEntry:
    return AccessControlEntry("User:alice", "*", operation, AclPermissionType.ALLOW)


def topic(name: str, pattern_type: PatternType = PatternType.LITERAL) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name, pattern_type)


CLUSTER = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)


class Store:
    """The part of ZkAclStore BrokerOperations reads: its authorizer."""

    def __init__(self, acls: dict[ResourcePattern, list[AccessControlEntry]]) -> None:
        self.authorizer = AclAuthorizer()
        self.authorizer.replace_all(acls)


class Admin:
    """Records what reaches the AdminManager."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.deleted: list[str] = []

    def auto_create_topic(self, name: str) -> ErrorCode:
        self.created.append(name)
        return ErrorCode.LEADER_NOT_AVAILABLE

    def delete_topics(self, names: list[str]) -> list[DeleteTopicResult]:
        self.deleted.extend(names)
        return [DeleteTopicResult(n, ErrorCode.NONE if n in ("a", "b", "c") else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                for n in names]


class ProducerIds:
    def generate_producer_id(self) -> int:
        return 4000


def run(acls: dict[ResourcePattern, list[AccessControlEntry]] | None,
        call: Callable[[BrokerOperations, Admin], Awaitable[T]]) -> tuple[T, Admin]:
    """`call` on operations over a cache with topics a, b, c and the given ACLs (None: no authorizer)."""
    admin = Admin()

    async def scenario() -> T:
        cache = MetadataCache(1)
        cache.update_metadata(0, [(TopicPartition(t, 0), metadata_state(1)) for t in ("a", "b", "c")],
                              [live_broker(1)])
        operations = BrokerOperations(
            broker_config(**{"auto.create.topics.enable": "true"}), replica_manager=None,  # type: ignore[arg-type]
            metadata_cache=cache, admin_manager=admin, producer_ids=ProducerIds(),  # type: ignore[arg-type]
            topic_purgatory=None, loop=asyncio.get_running_loop(),  # type: ignore[arg-type]
            acl_store=None if acls is None else Store(acls))  # type: ignore[arg-type]
        return await call(operations, admin)

    return asyncio.run(scenario()), admin


def metadata(acls: dict[ResourcePattern, list[AccessControlEntry]] | None, topics: list[str] | None
             ) -> tuple[dict[str, ErrorCode], list[str]]:
    found, admin = run(acls, lambda ops, _: ops.metadata(ALICE, topics, True, "PLAINTEXT"))
    return {name: error for name, error, _ in found.topics}, admin.created


def test_metadata_for_all_topics_leaves_out_what_may_not_be_described() -> None:
    assert metadata({topic("a"): [allow(Op.READ)], topic("b"): [allow(Op.DESCRIBE_CONFIGS)]}, None) == (
        {"a": ErrorCode.NONE}, [])
    assert metadata(None, None) == ({"a": ErrorCode.NONE, "b": ErrorCode.NONE, "c": ErrorCode.NONE}, [])


def test_named_topics_that_may_not_be_described_are_refused_whether_they_exist_or_not() -> None:
    found, created = metadata({topic("a"): [allow(Op.WRITE)]}, ["a", "b", "new"])
    assert found == {"a": ErrorCode.NONE, "b": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                     "new": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert created == []


def test_auto_creation_needs_create_on_the_cluster_or_the_topic() -> None:
    may_describe = {topic("new-", PatternType.PREFIXED): [allow(Op.DESCRIBE)]}
    assert metadata(may_describe, ["new-1"]) == ({"new-1": ErrorCode.TOPIC_AUTHORIZATION_FAILED}, [])
    on_topic = {topic("new-", PatternType.PREFIXED): [allow(Op.DESCRIBE), allow(Op.CREATE)]}
    assert metadata(on_topic, ["new-1"]) == ({"new-1": ErrorCode.LEADER_NOT_AVAILABLE}, ["new-1"])
    on_cluster = {**may_describe, CLUSTER: [allow(Op.CREATE)]}
    assert metadata(on_cluster, ["new-1"]) == ({"new-1": ErrorCode.LEADER_NOT_AVAILABLE}, ["new-1"])


def test_produce_to_a_topic_that_may_not_be_written_never_reaches_the_log() -> None:
    # No ReplicaManager at all: a refused produce must be answered before any append.
    results, _ = run({topic("a"): [allow(Op.READ)]}, lambda ops, _: ops.produce(
        ALICE, 1000, -1, [(TopicPartition("a", 0), b"batch"), (TopicPartition("b", 0), b"batch")]))
    assert {tp.topic: r.error for tp, r in results.items()} == {"a": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                                "b": ErrorCode.TOPIC_AUTHORIZATION_FAILED}


def test_delete_topics_checks_describe_then_existence_then_delete() -> None:
    acls = {topic("a"): [allow(Op.DELETE)], topic("b"): [allow(Op.DESCRIBE)], topic("gone"): [allow(Op.DELETE)]}
    results, admin = run(acls, lambda ops, _: ops.delete_topics(ALICE, ["a", "b", "c", "gone"]))
    assert [(r.name, r.error) for r in results] == [
        ("a", ErrorCode.NONE), ("b", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("c", ErrorCode.TOPIC_AUTHORIZATION_FAILED), ("gone", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert admin.deleted == ["a", "gone"]


def test_an_idempotent_producer_needs_idempotent_write_or_write_on_some_topic() -> None:
    def init(acls: dict[ResourcePattern, list[AccessControlEntry]]) -> tuple[ErrorCode, int, int]:
        return run(acls, lambda ops, _: ops.init_producer_id(ALICE, None))[0]

    assert init({topic("a"): [allow(Op.READ)]}) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1, -1)
    assert init({CLUSTER: [allow(Op.IDEMPOTENT_WRITE)]}) == (ErrorCode.NONE, 4000, 0)
    assert init({topic("x-", PatternType.PREFIXED): [allow(Op.WRITE)]}) == (ErrorCode.NONE, 4000, 0)


def test_the_acl_apis_need_an_authorizer_and_describe_or_alter_on_the_cluster() -> None:
    def describe(acls: dict[ResourcePattern, list[AccessControlEntry]] | None) -> ErrorCode:
        async def call(ops: BrokerOperations, _: Admin) -> ErrorCode:
            try:
                ops.describe_acls(ALICE, ANY_BINDING)
            except KafkaError as e:
                return e.code
            return ErrorCode.NONE
        return run(acls, call)[0]

    assert describe(None) is ErrorCode.SECURITY_DISABLED
    assert describe({topic("a"): [allow(Op.ALL)]}) is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert describe({CLUSTER: [allow(Op.DESCRIBE)]}) is ErrorCode.NONE
    with pytest.raises(KafkaError, match="CLUSTER_AUTHORIZATION_FAILED"):
        run({CLUSTER: [allow(Op.DESCRIBE)]}, lambda ops, _: ops.create_acls(ALICE, []))


def test_authorized_operations_are_every_supported_one_without_an_authorizer() -> None:
    async def fields(ops: BrokerOperations, _: Admin) -> tuple[int, int, int]:
        return (ops.authorized_operations(ALICE, ResourceType.TOPIC, "a"),
                ops.authorized_operations(ALICE, ResourceType.GROUP, "g"), ops.cluster_authorized_operations(ALICE))

    # KafkaApis' authorizedOperations with no authorizer: AclEntry.supportedOperations of the type.
    assert run(None, fields)[0] == (3576, 328, 8096)
    # With one, the principal's: Read (and its Describe) on topic a, nothing on the group.
    assert run({topic("a"): [allow(Op.READ)]}, fields)[0] == ((1 << Op.READ) | (1 << Op.DESCRIBE), 0, 0)


def test_cluster_operations_are_zero_without_describe_on_the_cluster() -> None:
    def cluster(acls: dict[ResourcePattern, list[AccessControlEntry]]) -> int:
        async def call(ops: BrokerOperations, _: Admin) -> int:
            return ops.cluster_authorized_operations(ALICE)
        return run(acls, call)[0]

    assert cluster({CLUSTER: [allow(Op.ALTER)]}) == (1 << Op.ALTER) | (1 << Op.DESCRIBE)
    # IdempotentWrite does not imply Describe: Kafka answers 0, not the IdempotentWrite bit.
    assert cluster({CLUSTER: [allow(Op.IDEMPOTENT_WRITE)]}) == 0
    assert cluster({CLUSTER: [allow(Op.DESCRIBE), allow(Op.CLUSTER_ACTION)]}) == (
        (1 << Op.DESCRIBE) | (1 << Op.CLUSTER_ACTION))

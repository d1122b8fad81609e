"""What BrokerOperations refuses when the authorizer is on (the checks both front doors share): Metadata's
hiding and auto-creation, Produce refusing before any append, DeleteTopics' order, InitProducerId, the ACL APIs,
ElectLeaders;
and what it tells a principal it may do (KIP-430), as Metadata and DescribeGroups put it on the wire."""

from __future__ import annotations

import asyncio
import datetime
import importlib
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any, TypeVar

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from broker.admin.admin_manager import CreateTopicResult, DeleteTopicResult, NewPartitions
from broker.api.group_operations import GroupOperations
from broker.api.kafka import groups as group_api
from broker.api.kafka import metadata as metadata_api
from broker.api.kafka import partitions as partitions_api
from broker.api.kafka.protocol import Reply, RequestHeader, build
from broker.api.operations import BrokerOperations, TxnMarker
from broker.config.metadata_cache import MetadataCache
from broker.coordinator.group.group_metadata_manager import partition_for
from common.record import ProducerRecord, build_batch
from common.security.acl import (
    ANY_BINDING,
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_NAME,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from common.security.authorizer import AclAuthorizer, Session
from common.security.principal import KafkaPrincipal
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from tests.unit.broker.broker_helpers import broker_config, live_broker, metadata_state
from tests.unit.broker.coordinator.group.test_group_coordinator import NUM_PARTITIONS, PARTITION, Harness, group_here

T = TypeVar("T")
ALICE = Session(KafkaPrincipal("User", "alice"), "10.0.0.1")
Op = AclOperation


def allow(operation: AclOperation) -> AccessControlEntry:
    return AccessControlEntry("User:alice", "*", operation, AclPermissionType.ALLOW)


def topic(name: str, pattern_type: PatternType = PatternType.LITERAL) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name, pattern_type)


CLUSTER = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
TXN_ID = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL)


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

    def create_partitions(self, requests: list[NewPartitions], validate_only: bool) -> list[CreateTopicResult]:
        self.created.extend(r.topic for r in requests)
        return [CreateTopicResult(r.topic, ErrorCode.NONE) for r in requests]

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


def test_transactional_batches_need_the_transactional_id_and_write_on_it() -> None:
    # No ReplicaManager: each refusal is answered for the whole request before any append (KafkaApis).
    txn = build_batch([ProducerRecord(b"v")], producer_id=4000, producer_epoch=0, base_sequence=0,
                      is_transactional=True)
    may_write_a = {topic("a"): [allow(Op.WRITE)]}
    for acls, transactional_id in ((may_write_a, None), (may_write_a, "tx"),
                                   ({**may_write_a, TXN_ID: [allow(Op.DESCRIBE)]}, "tx"), (None, None)):
        results, _ = run(acls, lambda ops, _, tid=transactional_id: ops.produce(
            ALICE, 1000, -1, [(TopicPartition("b", 0), build_batch([ProducerRecord(b"plain")])),
                              (TopicPartition("a", 0), txn)], tid))
        assert {tp.topic: r.error for tp, r in results.items()} == {
            "a": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "b": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    # Write on the transactional id passes this check: the topic's own check comes next (b may not be written).
    results, _ = run({TXN_ID: [allow(Op.WRITE)]}, lambda ops, _: ops.produce(
        ALICE, 1000, -1, [(TopicPartition("b", 0), txn)], "tx"))
    assert results[TopicPartition("b", 0)].error is ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_write_txn_markers_needs_cluster_action_and_known_partitions() -> None:
    # No ReplicaManager: neither answer may append anything.
    marker = TxnMarker(4000, 0, True, 1, [TopicPartition("a", 0), TopicPartition("zz", 3)])
    refused, _ = run({CLUSTER: [allow(Op.DESCRIBE)]}, lambda ops, _: ops.write_txn_markers(ALICE, [marker]))
    assert refused == [{TopicPartition("a", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        TopicPartition("zz", 3): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}]
    unknown = TxnMarker(4000, 0, False, 1, [TopicPartition("zz", 3)])
    answered, _ = run({CLUSTER: [allow(Op.CLUSTER_ACTION)]}, lambda ops, _: ops.write_txn_markers(ALICE, [unknown]))
    assert answered == [{TopicPartition("zz", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}]


def test_describe_producers_needs_read_on_the_topic_then_a_known_topic() -> None:
    # No ReplicaManager: a refused or unknown topic is answered for each partition asked, before any replica.
    async def describe(ops: BrokerOperations, _: Admin) -> Any:
        return ops.describe_producers(ALICE, [("a", [0, 1]), ("b", [0]), ("zz", [2])])

    answers, _ = run({topic("a"): [allow(Op.DESCRIBE)], topic("zz"): [allow(Op.READ)]}, describe)
    assert answers == [("a", [(0, ErrorCode.TOPIC_AUTHORIZATION_FAILED, []),
                              (1, ErrorCode.TOPIC_AUTHORIZATION_FAILED, [])]),
                       ("b", [(0, ErrorCode.TOPIC_AUTHORIZATION_FAILED, [])]),
                       ("zz", [(2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])])]


def test_delete_topics_checks_describe_then_existence_then_delete() -> None:
    acls = {topic("a"): [allow(Op.DELETE)], topic("b"): [allow(Op.DESCRIBE)], topic("gone"): [allow(Op.DELETE)]}
    results, admin = run(acls, lambda ops, _: ops.delete_topics(ALICE, ["a", "b", "c", "gone"]))
    assert [(r.name, r.error) for r in results] == [
        ("a", ErrorCode.NONE), ("b", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("c", ErrorCode.TOPIC_AUTHORIZATION_FAILED), ("gone", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert admin.deleted == ["a", "gone"]


def test_create_partitions_needs_alter_on_each_topic_and_refuses_a_topic_named_twice() -> None:
    """KafkaApis.handleCreatePartitionsRequest: duplicates are INVALID_REQUEST (answered once, never authorized
    or created), topics without Alter TOPIC_AUTHORIZATION_FAILED."""
    requests = [NewPartitions("a", 2), NewPartitions("b", 2), NewPartitions("c", 2), NewPartitions("a", 3)]
    results, admin = run({topic("a"): [allow(Op.ALTER)], topic("b"): [allow(Op.ALTER)]},
                         lambda ops, _: ops.create_partitions(ALICE, requests, False, 0))
    assert [(r.name, r.error) for r in results] == [
        ("b", ErrorCode.NONE), ("c", ErrorCode.TOPIC_AUTHORIZATION_FAILED), ("a", ErrorCode.INVALID_REQUEST)]
    assert results[-1].message == "Duplicate topic in request." and admin.created == ["b"]


def test_an_idempotent_producer_needs_idempotent_write_or_write_on_some_topic() -> None:
    def init(acls: dict[ResourcePattern, list[AccessControlEntry]]) -> tuple[ErrorCode, int, int]:
        return run(acls, lambda ops, _: ops.init_producer_id(ALICE))[0]

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


# ------------------------------------------------------------------ KIP-430 on the Kafka listener's wire


def wire(handler: Callable[..., Awaitable[Reply]], ops: BrokerOperations, api_key: int, version: int,
         request: Any, groups: GroupOperations | None = None) -> Awaitable[Reply]:
    """The handler's answer to `request` from alice, decoded by kio's reader for the version."""
    context = SimpleNamespace(operations=ops, groups=groups, session=ALICE, listener_name="PLAINTEXT",
                              cluster_id="cluster", broker_id=1)
    return handler(context, RequestHeader(api_key, version, 1, "client"), request)


def decoded(api_key: int, version: int, reply: Reply) -> Any:
    return entity_reader(load_response_schema(api_key, version))(b"".join(reply.parts), 0)[0]


def test_metadata_v8_answers_the_operations_asked_for_and_omits_them_on_refused_topics() -> None:
    def ask(version: int, include: bool) -> Any:
        schema = importlib.import_module(f"kio.schema.metadata.v{version}.request")
        request = build(schema.MetadataRequest, topics=tuple(build(schema.MetadataRequestTopic, name=n)
                                                             for n in ("a", "b", "new")),
                        allow_auto_topic_creation=False, include_cluster_authorized_operations=include,
                        include_topic_authorized_operations=include)

        async def call(ops: BrokerOperations, _: Admin) -> Any:
            return decoded(3, version, await wire(metadata_api.handle_metadata, ops, 3, version, request))
        return run({topic("a"): [allow(Op.READ)], topic("new"): [allow(Op.DESCRIBE)],
                    CLUSTER: [allow(Op.ALTER)]}, call)[0]

    answer = ask(8, True)
    by_name = {t.name: (t.error_code, t.topic_authorized_operations) for t in answer.topics}
    assert by_name == {
        "a": (ErrorCode.NONE, (1 << Op.READ) | (1 << Op.DESCRIBE)),
        "b": (ErrorCode.TOPIC_AUTHORIZATION_FAILED, AUTHORIZED_OPERATIONS_OMITTED),  # not among topicMetadata
        "new": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 1 << Op.DESCRIBE)}  # described, so answered
    assert answer.cluster_authorized_operations == (1 << Op.ALTER) | (1 << Op.DESCRIBE)
    not_asked = ask(8, False)
    assert {t.topic_authorized_operations for t in not_asked.topics} == {AUTHORIZED_OPERATIONS_OMITTED}
    assert not_asked.cluster_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    assert not hasattr(ask(7, True), "cluster_authorized_operations")  # v0-v7 have no such fields


def test_describe_groups_answers_operations_only_for_groups_described_without_error() -> None:
    def ask(version: int, group_ids: tuple[str, ...]) -> dict[str, tuple[int, int]]:
        schema = importlib.import_module(f"kio.schema.describe_groups.v{version}.request")
        request = build(schema.DescribeGroupsRequest, groups=group_ids, include_authorized_operations=True)

        async def call(ops: BrokerOperations, _: Admin) -> dict[str, tuple[int, int]]:
            harness = Harness()
            await harness.own_partition()
            groups = GroupOperations(harness.coordinator, ops)
            answer = decoded(15, version, await wire(group_api.handle_describe_groups, ops, 15, version, request,
                                                     groups))
            return {g.group_id: (g.error_code, getattr(g, "authorized_operations", None)) for g in answer.groups}
        return run({ResourcePattern(ResourceType.GROUP, "*", PatternType.LITERAL): [allow(Op.DELETE)]}, call)[0]

    here = group_here("g")
    elsewhere = next(g for g in (f"x-{i}" for i in range(100)) if partition_for(g, NUM_PARTITIONS) != PARTITION)
    # A group the principal may Describe (Delete implies it) is answered even when it does not exist (Dead),
    # as Kafka does; a group another coordinator owns is answered NOT_COORDINATOR, without operations.
    answers = ask(3, (here, elsewhere))
    assert answers[here] == (ErrorCode.NONE, (1 << Op.DELETE) | (1 << Op.DESCRIBE))
    assert answers[elsewhere][1] == AUTHORIZED_OPERATIONS_OMITTED
    assert ask(2, (here,))[here] == (ErrorCode.NONE, None)  # v0-v2 have no such field


# ------------------------------------------------------------------ ElectLeaders on the Kafka listener's wire


class Controller:
    """The part of ControllerChannel BrokerOperations calls: what it forwarded, and NONE for each partition."""

    def __init__(self) -> None:
        self.forwarded: list[tuple[int, list[TopicPartition]]] = []

    def elect_leaders(self, election_type: int, partitions: list[TopicPartition], timeout_ms: int
                      ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        self.forwarded.append((election_type, partitions))
        return dict.fromkeys(partitions, (ErrorCode.NONE, None))


def test_elect_leaders_needs_alter_on_the_cluster_and_null_partitions_are_every_known_one() -> None:
    """KafkaApis.handleElectReplicaLeader: without Alter on the cluster the request and each partition named are
    CLUSTER_AUTHORIZATION_FAILED (v0 has no top-level code); null partitions are the metadata cache's; v0 asks for
    preferred replicas."""
    def ask(acls: dict[ResourcePattern, list[AccessControlEntry]], version: int,
            partitions: dict[str, tuple[int, ...]] | None) -> tuple[Any, list[tuple[int, list[TopicPartition]]]]:
        schema = importlib.import_module(f"kio.schema.elect_leaders.v{version}.request")
        request = build(schema.ElectLeadersRequest, election_type=1, timeout=datetime.timedelta(seconds=5),
                        topic_partitions=None if partitions is None else tuple(
                            schema.TopicPartitions(topic=t, partitions=p) for t, p in partitions.items()))
        controller = Controller()

        async def call(ops: BrokerOperations, _: Admin) -> Any:
            ops.controller_channel = controller  # type: ignore[assignment]
            return decoded(43, version, await wire(partitions_api.handle_elect_leaders, ops, 43, version, request))
        return run(acls, call)[0], controller.forwarded

    refused, forwarded = ask({CLUSTER: [allow(Op.DESCRIBE)]}, 2, {"a": (0,), "b": (0,)})
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and forwarded == []
    assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
            for r in refused.replica_election_results] == [("a", [(0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]),
                                                           ("b", [(0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)])]
    elected, forwarded = ask({CLUSTER: [allow(Op.ALTER)]}, 2, None)
    assert forwarded == [(1, [TopicPartition(t, 0) for t in ("a", "b", "c")])]
    assert elected.error_code == ErrorCode.NONE
    assert [(r.topic, [(p.error_code, p.error_message) for p in r.partition_result])
            for r in elected.replica_election_results] == [(t, [(ErrorCode.NONE, None)]) for t in ("a", "b", "c")]
    _, forwarded = ask({CLUSTER: [allow(Op.ALTER)]}, 0, {"c": (0,)})
    assert forwarded == [(0, [TopicPartition("c", 0)])]

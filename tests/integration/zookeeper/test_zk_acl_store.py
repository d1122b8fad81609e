"""The ACL store against a real ZooKeeper (zk/acl_store.py): Kafka's znodes and JSON, change
notifications another "broker" follows, conditional writes under concurrent writers, deletes by filter."""

from __future__ import annotations

import threading
from collections.abc import Callable

from kazoo.client import KazooClient

from common.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from common.security.authorizer import AclAuthorizer, Session
from common.security.principal import KafkaPrincipal
from tests.integration.conftest import WaitUntil
from zk.acl_store import ZkAclStore
from zk.client import KafkaZkClient

ALICE = Session(KafkaPrincipal("User", "alice"), "10.0.0.1")
ORDERS = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
BILLING = ResourcePattern(ResourceType.GROUP, "billing-", PatternType.PREFIXED)


def read_acl(alice_op: AclOperation = AclOperation.READ, pattern: ResourcePattern = ORDERS) -> AclBinding:
    return AclBinding(pattern, AccessControlEntry("User:alice", "*", alice_op, AclPermissionType.ALLOW))


def started(zk: KafkaZkClient) -> ZkAclStore:
    store = ZkAclStore(zk, AclAuthorizer())
    store.startup()
    return store


def raw(zk_connect: str, path: str) -> bytes:
    servers, _, chroot = zk_connect.partition("/")
    kazoo = KazooClient(hosts=servers)
    kazoo.start(timeout=30)
    try:
        return bytes(kazoo.get(f"/{chroot}{path}")[0])
    finally:
        kazoo.stop()
        kazoo.close()


def test_acls_are_stored_as_kafka_stores_them_and_every_store_follows(
        zk_clients: Callable[..., KafkaZkClient], zk_connect: str, wait_until: WaitUntil) -> None:
    writer, follower = started(zk_clients()), started(zk_clients())
    try:
        assert writer.create_acls([read_acl(), read_acl(AclOperation.READ, BILLING)]) == [None, None]
        assert raw(zk_connect, "/kafka-acl/Topic/orders") == (
            b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",'
            b'"host":"*"}]}')
        assert b'"operation":"Read"' in raw(zk_connect, "/kafka-acl-extended/prefixed/Group/billing-")
        # The writer's own cache has it at once; the other broker's through the change notifications.
        assert writer.authorizer.authorize(ALICE, AclOperation.READ, ResourceType.TOPIC, "orders")
        wait_until(lambda: follower.authorizer.authorize(ALICE, AclOperation.READ, ResourceType.GROUP, "billing-1"),
                   message="the follower's cache to have the prefixed group ACL")
        wait_until(lambda: follower.authorizer.authorize(ALICE, AclOperation.READ, ResourceType.TOPIC, "orders"))
        # A store started later loads what is there.
        late = started(zk_clients())
        assert late.authorizer.acls_by_pattern() == writer.authorizer.acls_by_pattern()
        late.shutdown()
    finally:
        writer.shutdown()
        follower.shutdown()


def test_concurrent_writers_lose_nothing(zk_clients: Callable[..., KafkaZkClient]) -> None:
    """Two brokers adding ACLs to one resource at once: each write is conditional on the znode version, the
    loser re-reads and retries, and the znode ends with every ACL."""
    stores = [started(zk_clients()), started(zk_clients())]
    operations = [AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                  AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS]
    errors: list[object] = []

    def add(store: ZkAclStore, ops: list[AclOperation]) -> None:
        for op in ops:
            errors.extend(e for e in store.create_acls([read_acl(op)]) if e is not None)

    threads = [threading.Thread(target=add, args=(store, operations[i::2])) for i, store in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert errors == []
        checker = started(zk_clients())
        assert {e.operation for e in checker.authorizer.acls_by_pattern()[ORDERS]} == set(operations)
        checker.shutdown()
    finally:
        for store in stores:
            store.shutdown()


def test_deletes_by_filter_remove_the_znode_with_its_last_acl(
        zk_clients: Callable[..., KafkaZkClient], wait_until: WaitUntil) -> None:
    zk = zk_clients()
    writer, follower = started(zk), started(zk_clients())
    try:
        writer.create_acls([read_acl(), read_acl(AclOperation.WRITE)])
        wait_until(lambda: len(follower.authorizer.acls_by_pattern().get(ORDERS, ())) == 2)
        only_write = AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.MATCH),
                                      AccessControlEntryFilter(None, None, AclOperation.WRITE, AclPermissionType.ANY))
        everything = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
                                      AccessControlEntryFilter("User:alice", None, AclOperation.ANY,
                                                               AclPermissionType.ANY))
        (error, deleted), = follower.delete_acls([only_write])
        assert error is None and deleted == [(read_acl(AclOperation.WRITE), None)]
        wait_until(lambda: len(writer.authorizer.acls_by_pattern().get(ORDERS, ())) == 1)
        # Two filters matching one ACL: the first reports it.
        (_, first), (_, second) = writer.delete_acls([everything, everything])
        assert first == [(read_acl(), None)] and second == []
        assert zk.get_versioned_acls("LITERAL", "Topic", "orders") == ([], -2)
        wait_until(lambda: ORDERS not in follower.authorizer.acls_by_pattern())
        # An indefinite filter is refused, not applied.
        unknown = AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN, None, PatternType.ANY),
                                   everything.entry)
        ((refused, none),) = writer.delete_acls([unknown])
        assert refused is not None and "UNKNOWN" in refused.message and none == []
    finally:
        writer.shutdown()
        follower.shutdown()

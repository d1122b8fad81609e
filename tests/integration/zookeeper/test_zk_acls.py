"""zookeeper.set.acl against a real ZooKeeper: znodes created by the cluster's identity can be changed by
nobody else, and the security migration secures an open tree and opens it again (zk/acl.py, Kafka's
ZkSecurityMigrator)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kazoo.exceptions import NoAuthError

from proto.types import EndPoint, TopicPartition
from zk import paths
from zk.acl import ZkCredentials, ZkSecurity
from zk.client import KafkaZkClient
from zk.paths import BrokerInfo, LeaderIsrAndControllerEpoch, TopicAssignment

pytestmark = pytest.mark.integration

CLUSTER = ZkCredentials("minibroker", "s3cret")


@pytest.fixture
def connect(zk_connect: str) -> Iterator[Callable[[ZkSecurity], KafkaZkClient]]:
    clients: list[KafkaZkClient] = []

    def make(security: ZkSecurity) -> KafkaZkClient:
        client = KafkaZkClient.connect(zk_connect, session_timeout_ms=6000, timeout=30, security=security)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def _broker(broker_id: int) -> BrokerInfo:
    return BrokerInfo(id=broker_id, endpoints=(EndPoint("GRPC", "127.0.0.1", 9000 + broker_id, "PLAINTEXT"),))


def _cluster_state(zk: KafkaZkClient) -> None:
    """What a broker and a controller write: persistent paths, a registration, /controller, a topic."""
    zk.ensure_persistent_paths()
    zk.register_broker(_broker(1))
    elected = zk.try_create_controller(1001)
    assert elected is not None
    zk.create_topic(TopicAssignment.of("t", {0: (1,)}))
    zk.create_partition_states({TopicPartition("t", 0): LeaderIsrAndControllerEpoch(1, 0, (1,), elected[0], 0)},
                               elected[1])


def _tamper(zk: KafkaZkClient) -> list[str]:
    """Every way an outsider could change cluster state; returns those that were refused with NoAuth."""
    raw = zk._zk  # the raw kazoo client: the outsider is not bound to KafkaZkClient's manners
    attempts: dict[str, Callable[[], object]] = {
        "create /brokers/ids/99": lambda: raw.create("/brokers/ids/99", b"{}", ephemeral=True),
        "set /brokers/ids/1": lambda: raw.set("/brokers/ids/1", b"{}"),
        "delete /brokers/ids/1": lambda: raw.delete("/brokers/ids/1"),
        "set /brokers/topics/t": lambda: raw.set("/brokers/topics/t", b"{}"),
        "set partition state": lambda: raw.set("/brokers/topics/t/partitions/0/state", b"{}"),
        "set /controller": lambda: raw.set("/controller", b"{}"),
        "delete /controller": lambda: raw.delete("/controller"),
        "set /controller_epoch": lambda: raw.set("/controller_epoch", b"99"),
        "create /admin/reassign_partitions": lambda: raw.create("/admin/reassign_partitions", b"{}"),
        "create /config/topics/eve": lambda: raw.create("/config/topics/eve", b"{}"),
        "create /rogue": lambda: raw.create("/rogue", b""),
    }
    refused = []
    for name, attempt in attempts.items():
        try:
            attempt()
        except NoAuthError:
            refused.append(name)
    return refused


def test_secure_znodes_refuse_a_client_without_the_cluster_credentials(
        connect: Callable[[ZkSecurity], KafkaZkClient]) -> None:
    cluster = connect(ZkSecurity(set_acl=True, credentials=CLUSTER))
    _cluster_state(cluster)
    cluster.migrate_acls(secure=True)  # "/" (this test's chroot) too, as cluster up --security does
    outsider = connect(ZkSecurity())
    wrong_password = connect(ZkSecurity(credentials=ZkCredentials("minibroker", "guess")))
    for client in (outsider, wrong_password):
        refused = _tamper(client)
        assert len(refused) == 11, refused
        # Reads stay open, as in Kafka (clients and tools read metadata), except the sensitive paths.
        assert client.get_controller_id() == 1001
        assert [b.id for b in client.get_all_brokers()] == [1]
    with pytest.raises(NoAuthError):  # /config/brokers is sensitive: not even readable
        outsider._zk.get_children(paths.CONFIG_BROKERS)
    # The cluster itself keeps working: another process with the same identity changes state.
    other_broker = connect(ZkSecurity(set_acl=True, credentials=CLUSTER))
    other_broker.register_broker(_broker(2))
    assert [b.id for b in outsider.get_all_brokers()] == [1, 2]
    assert cluster.get_acls(paths.BROKER_IDS) is not None


def test_migration_secures_an_open_cluster_and_opens_it_again(
        connect: Callable[[ZkSecurity], KafkaZkClient]) -> None:
    open_cluster = connect(ZkSecurity())
    _cluster_state(open_cluster)
    outsider = connect(ZkSecurity())
    # Before: anyone may write (the cluster as it was).
    outsider._zk.set("/brokers/topics/t", outsider._zk.get("/brokers/topics/t")[0])

    # The rolling restart's processes log in; the tool, logged in too, sets the ACLs.
    migrator = connect(ZkSecurity(credentials=CLUSTER))
    count = migrator.migrate_acls(secure=True)
    assert count > 10
    acls = migrator.get_acls("/brokers/topics/t/partitions/0/state")
    assert acls is not None and {(a.id.scheme, a.perms) for a in acls} == {("digest", 31), ("world", 1)}
    assert _tamper(outsider) and "set /brokers/topics/t" in _tamper(outsider)
    # The migrated cluster keeps working for its own identity.
    cluster = connect(ZkSecurity(set_acl=True, credentials=CLUSTER))
    cluster.register_broker(_broker(3))
    cluster.propagate_isr_changes([TopicPartition("t", 0)])

    migrator.migrate_acls(secure=False)
    assert _tamper(outsider) == []

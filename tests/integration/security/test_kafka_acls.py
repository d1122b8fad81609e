"""Kafka's ACLs on a real cluster with `authorizer.class.name=kafka.security.authorizer.AclAuthorizer`, with real
clients (confluent-kafka, kafka-python, kcat) and `minibroker acls`.

On these PLAINTEXT listeners every client is User:ANONYMOUS: the tests grant and deny that principal
(test_kafka_sasl_acls.py does it for authenticated users).
One cluster for the module; each test uses topics of its own."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError as KpTopicAuthorizationFailedError
from kio.schema.metadata.v8.request import MetadataRequest
from kio.schema.metadata.v8.response import MetadataResponse

import client
from local_cluster.cluster import LocalCluster
from local_cluster.cluster_file import ClusterInfo
from proto.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import start_kafka_cluster
from tests.integration.kafka_wire import WireConnection, encode_request

REPO_ROOT = Path(__file__).resolve().parents[3]
AUTHORIZER = "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"
ANONYMOUS = "User:ANONYMOUS"


def minibroker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minibroker.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)


@dataclass(frozen=True)
class AclCluster:
    data_dir: Path
    info: ClusterInfo

    @property
    def bootstrap(self) -> str:
        """The Kafka listeners."""
        return self.info.kafka_bootstrap_servers

    @property
    def kafka_addresses(self) -> list[str]:
        return [b.kafka_address or "" for b in self.info.brokers]

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(b.log_dir) for b in self.info.brokers]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    """A running 3-broker cluster with the authorizer on, where ANONYMOUS may administer ACLs and create topics
    (granted through ZooKeeper, as nobody may alter the ACLs of a new cluster through a broker)."""
    data_dir = tmp_path_factory.mktemp("acls") / "cluster"
    try:
        up = minibroker("cluster", "up", "--data-dir", str(data_dir), "--brokers", "3", "--controllers", "1",
                        "--override", AUTHORIZER)
        assert up.returncode == 0, up.stderr
        info = AclCluster(data_dir, ClusterInfo.load(data_dir))
        grant = acls_zk(info, "--add", "--allow-principal", ANONYMOUS, "--cluster", "--operation", "Alter",
                        "--operation", "Describe", "--operation", "Create")
        assert grant.returncode == 0, grant.stdout + grant.stderr
        yield info
    finally:
        if ClusterInfo.exists(data_dir):
            LocalCluster(data_dir).down(kill=True)


def acls(cluster: AclCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """`minibroker acls` through the brokers' Kafka listeners (found in the data dir's cluster.json)."""
    return minibroker("acls", "--data-dir", str(cluster.data_dir), *args)


def acls_zk(cluster: AclCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """`minibroker acls` straight into ZooKeeper."""
    return minibroker("acls", "--authorizer-properties", f"zookeeper.connect={cluster.info.zookeeper.connect}",
                      *args)


def until_returns(wait_until: WaitUntil, returncode: int, command: Callable[..., subprocess.CompletedProcess[str]],
                  cluster: AclCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the ACL command until it exits with `returncode`: the brokers learn the cluster's ACLs from
    ZooKeeper's change notifications, a moment after they are written."""
    done: list[subprocess.CompletedProcess[str]] = []

    def attempt() -> bool:
        done.append(command(cluster, *args))
        return done[-1].returncode == returncode

    wait_until(attempt, timeout=30, message=f"acls {' '.join(args)} to exit {returncode}")
    return done[-1]


def until_ok(wait_until: WaitUntil, command: Callable[..., subprocess.CompletedProcess[str]], cluster: AclCluster,
             *args: str) -> subprocess.CompletedProcess[str]:
    return until_returns(wait_until, 0, command, cluster, *args)


def create_topics(cluster: AclCluster, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(n, 1, 3) for n in names], operation_timeout=30).values():
        future.result()


def broker_topics(address: str) -> dict[str, int]:
    """An all-topics Metadata request sent to one broker: each topic it lists and its error code."""
    with WireConnection(address) as connection:
        connection.send(encode_request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                       include_cluster_authorized_operations=False,
                                                       include_topic_authorized_operations=False), 1))
        _, response = connection.receive_body(MetadataResponse)
    return {t.name: int(t.error_code) for t in response.topics}


def produce_error(cluster: AclCluster, topic: str, **settings: Any) -> int | None:
    """Produce one record with confluent-kafka; the delivery's error code, None when it was written."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "message.timeout.ms": 10000,
                         **settings})
    reports: list[Any] = []
    producer.produce(topic, b"value", on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(30)
    assert len(reports) == 1
    return None if reports[0] is None else int(reports[0].code())


def high_watermark(cluster: AclCluster, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "acl-watermarks"})
    try:
        return int(consumer.get_watermark_offsets(CkTopicPartition(topic, 0), timeout=30)[1])
    finally:
        consumer.close()


def first_assigned_event(cluster: AclCluster, group: str, topic: str, deadline_s: float = 30) -> Any:
    """The first message or error a confluent consumer assigned partition 0 from offset 0 hands out, past any
    GROUP_AUTHORIZATION_FAILED answered before the group's ACL reached the broker it asked."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    end = time.monotonic() + deadline_s
    try:
        while time.monotonic() < end:
            event = consumer.poll(1.0)
            error = None if event is None else event.error()
            if event is not None and (error is None or error.code() != KafkaError.GROUP_AUTHORIZATION_FAILED):
                return event
        raise AssertionError(f"nothing but group refusals from {topic} in {deadline_s} s")
    finally:
        consumer.close()


def test_a_principal_allowed_read_but_not_write_is_refused_by_every_client_and_nothing_is_appended(
        cluster: AclCluster, wait_until: WaitUntil) -> None:
    create_topics(cluster, "acl-readonly", "acl-readwrite")
    until_ok(wait_until, acls, cluster, "--add", "--allow-principal", ANONYMOUS, "--operation", "Read", "--topic",
             "acl-readonly")
    until_ok(wait_until, acls, cluster, "--add", "--allow-principal", ANONYMOUS, "--operation", "Read", "--operation",
             "Write", "--topic", "acl-readwrite")
    wait_until(lambda: all("acl-readonly" in broker_topics(a) for a in cluster.kafka_addresses))

    # confluent-kafka: the delivery report carries the broker's code.
    assert produce_error(cluster, "acl-readonly") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # kafka-python: the send's future fails with the code's own error.
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, enable_idempotence=False,
                             retries=0, max_block_ms=30000)
    with pytest.raises(KpTopicAuthorizationFailedError):
        producer.send("acl-readonly", b"value").get(timeout=30)
    producer.close()
    # kcat: its delivery report names the error.
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is installed by scripts/setup.sh"
    done = subprocess.run([kcat, "-b", cluster.bootstrap, "-P", "-t", "acl-readonly"],
                          input="value\n", capture_output=True, text=True, timeout=60)
    assert "Topic authorization failed" in done.stderr, done.stderr

    # Nothing was appended: no offset, and every replica's segment is empty.
    assert high_watermark(cluster, "acl-readonly") == 0
    segments = [log_dir / "acl-readonly-0" / "00000000000000000000.log" for log_dir in cluster.log_dirs]
    assert [s.stat().st_size for s in segments] == [0, 0, 0]

    # The same clients may write where Write is allowed, and read back (Read) what they wrote. librdkafka asks
    # for its group's coordinator even for an assigned consumer, so, as in Kafka, the group needs Read too.
    assert produce_error(cluster, "acl-readwrite") is None
    until_ok(wait_until, acls, cluster, "--add", "--allow-principal", ANONYMOUS, "--operation", "Read", "--group",
             "acl-reader")
    message = first_assigned_event(cluster, "acl-reader", "acl-readwrite")
    assert message.error() is None and message.value() == b"value"


def test_metadata_hides_the_topics_the_principal_may_not_describe(cluster: AclCluster,
                                                                  wait_until: WaitUntil) -> None:
    create_topics(cluster, "acl-visible", "acl-hidden")
    until_ok(wait_until, acls, cluster, "--add", "--allow-principal", ANONYMOUS, "--operation", "Describe", "--topic",
             "acl-visible")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    wait_until(lambda: "acl-visible" in admin.list_topics(timeout=10).topics)
    listed = admin.list_topics(timeout=10).topics
    assert "acl-hidden" not in listed
    # Named, it is TOPIC_AUTHORIZATION_FAILED, as is a topic that does not exist (its existence is not told,
    # and without Describe it is not auto-created either).
    for name in ("acl-hidden", "acl-never-created"):
        named = admin.list_topics(topic=name, timeout=10).topics[name]
        error = named.error
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert named.partitions == {}
    assert "acl-never-created" not in broker_topics(cluster.kafka_addresses[0])
    # A consumer without Read on the topic is refused too (Read on its group lets it get as far as the fetch).
    until_ok(wait_until, acls, cluster, "--add", "--allow-principal", ANONYMOUS, "--operation", "Read", "--group",
             "acl-nosy")
    refusal = first_assigned_event(cluster, "acl-nosy", "acl-visible").error()
    assert refusal is not None and refusal.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acl_changes_apply_on_every_broker_without_a_restart(cluster: AclCluster, wait_until: WaitUntil) -> None:
    create_topics(cluster, "acl-late")
    addresses = cluster.kafka_addresses
    assert not any("acl-late" in broker_topics(a) for a in addresses)
    began = time.monotonic()
    until_ok(wait_until, acls, cluster, "--add", "--allow-principal", ANONYMOUS, "--operation", "Describe", "--topic",
             "acl-late")
    wait_until(lambda: all(broker_topics(a).get("acl-late") == 0 for a in addresses),
               message="every broker to describe acl-late")
    print(f"an added ACL applied on all {len(addresses)} brokers {time.monotonic() - began:.2f} s after the"
          " command started")
    listed = acls(cluster, "--list", "--topic", "acl-late")
    assert listed.stdout == ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=acl-late,"
                             " patternType=LITERAL)`: \n \t(principal=User:ANONYMOUS, host=*, operation=DESCRIBE,"
                             " permissionType=ALLOW) \n\n")
    removed = acls(cluster, "--remove", "--force", "--allow-principal", ANONYMOUS, "--operation", "Describe",
                   "--topic", "acl-late")
    assert removed.returncode == 0, removed.stdout
    wait_until(lambda: not any("acl-late" in broker_topics(a) for a in addresses),
               message="every broker to hide acl-late again")


def test_deny_beats_allow(cluster: AclCluster, wait_until: WaitUntil) -> None:
    create_topics(cluster, "acl-mixed-open", "acl-mixed-closed")
    until_ok(wait_until, acls, cluster, "--add", "--allow-principal", ANONYMOUS, "--operation", "All", "--topic",
             "acl-mixed-", "--resource-pattern-type", "prefixed")
    until_ok(wait_until, acls, cluster, "--add", "--deny-principal", ANONYMOUS, "--operation", "Write", "--topic",
             "acl-mixed-closed")
    wait_until(lambda: all("acl-mixed-closed" in broker_topics(a) for a in cluster.kafka_addresses))
    # An idempotent producer too: Write on some topic is enough for InitProducerId (KIP-679).
    assert produce_error(cluster, "acl-mixed-open", **{"enable.idempotence": True}) is None
    assert produce_error(cluster, "acl-mixed-closed") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert high_watermark(cluster, "acl-mixed-closed") == 0  # the prefix's ALL still allows Describe


def test_acl_commands_need_alter_and_describe_on_the_cluster(cluster: AclCluster, wait_until: WaitUntil) -> None:
    revoked = acls_zk(cluster, "--remove", "--force", "--allow-principal", ANONYMOUS, "--cluster", "--operation",
                      "Alter", "--operation", "Describe")
    assert revoked.returncode == 0, revoked.stdout
    try:
        refused = until_returns(wait_until, 1, acls, cluster, "--list")
        assert refused.stdout == "Error while executing ACL command: Cluster authorization failed.\n"
        added = acls(cluster, "--add", "--allow-principal", "User:alice", "--topic", "t")
        assert added.returncode == 1 and "not authorized" in added.stdout, added.stdout
    finally:
        assert acls_zk(cluster, "--add", "--allow-principal", ANONYMOUS, "--cluster", "--operation", "Alter",
                       "--operation", "Describe").returncode == 0
    until_ok(wait_until, acls, cluster, "--list", "--cluster")


def test_super_users_bypass_every_acl(start_brokers: StartBrokers, start_controller: StartController,
                                      zk_connect: str) -> None:
    """A broker whose super.users names the principal: a DENY of everything on every topic does not stop it."""
    deny_all = minibroker("acls", "--authorizer-properties", f"zookeeper.connect={zk_connect}", "--add",
                          "--deny-principal", "User:*", "--topic", "*", "--cluster")
    assert deny_all.returncode == 0, deny_all.stdout + deny_all.stderr
    kafka = start_kafka_cluster(start_brokers, start_controller, broker_ids=(1,), overrides={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:admin;{ANONYMOUS}"})
    bootstrap = kafka.bootstrap
    # The authorizer is on and has the DENYs (of the topic wildcard and the cluster) in its cache.
    assert "Loaded ACLs of 2 resources from ZooKeeper" in kafka.brokers[1].process.log()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("acl-super", 1, 1)], operation_timeout=30)["acl-super"].result()
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    reports: list[Any] = []
    producer.produce("acl-super", b"value", on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(30)
    assert reports == [None]
    assert "acl-super" in admin.list_topics(timeout=10).topics


def test_the_grpc_door_checks_the_same_acls(cluster: AclCluster, wait_until: WaitUntil) -> None:
    """minibroker's own client (gRPC) is ANONYMOUS too: the same Produce check, and the group offsets' checks
    (Read on the group and on each topic to commit)."""
    create_topics(cluster, "acl-grpc-readonly", "acl-grpc-grouped")
    until_ok(wait_until, acls, cluster, "--add", "--allow-principal", ANONYMOUS, "--operation", "Read", "--topic",
             "acl-grpc-readonly")
    until_ok(wait_until, acls, cluster, "--add", "--allow-principal", ANONYMOUS, "--consumer", "--topic",
             "acl-grpc-grouped", "--group", "acl-group")
    grpc = cluster.info.bootstrap_servers
    wait_until(lambda: all("acl-grpc-grouped" in broker_topics(a) for a in cluster.kafka_addresses))
    producer = client.Producer(bootstrap_servers=grpc, retries=0)
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send("acl-grpc-readonly", b"value").get(30)
    producer.close()

    grouped = client.TopicPartition("acl-grpc-grouped", 0)
    outsider = client.Consumer(bootstrap_servers=grpc, group_id="acl-other-group")
    with pytest.raises(GroupAuthorizationFailedError):
        outsider.commit({grouped: 1})
    outsider.close()
    member = client.Consumer(bootstrap_servers=grpc, group_id="acl-group")
    member.commit({grouped: 1})
    assert member.committed(grouped) == 1
    with pytest.raises(TopicAuthorizationFailedError):
        member.commit({client.TopicPartition("acl-grpc-nobody-reads", 0): 1})  # the group may, the topic not
    member.close()

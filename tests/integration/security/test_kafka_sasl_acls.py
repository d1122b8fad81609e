"""ACLs for authenticated principals: a broker with the AclAuthorizer on and SASL listeners, where alice
(SCRAM-SHA-256) may Read a topic but not Write it, bob (PLAIN) may do nothing, and admin is a super user who
manages the ACLs with `minibroker acls --command-config`; a group consumer needs Read on its group too, and
OffsetDelete Delete on the group and Read on the topic; the partition admin requests (CreatePartitions, DeleteRecords,
ElectLeaders, DescribeLogDirs) Kafka's operations. Real clients: confluent-kafka, kafka-python, kcat."""

from __future__ import annotations

import datetime
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka import KafkaAdminClient, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import GroupAuthorizationFailedError, NoError, TopicAuthorizationFailedError
from kio.schema.fetch.v11 import request as fetch_v11
from kio.schema.fetch.v11.response import FetchResponse
from kio.schema.offset_for_leader_epoch.v3 import request as epoch_v3
from kio.schema.offset_for_leader_epoch.v3.response import OffsetForLeaderEpochResponse
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from proto.errors import ErrorCode
from tests.integration.conftest import WaitUntil
from tests.integration.kafka_wire import WireConnection, encode_request
from tests.integration.secure_cluster import (
    ADMIN,
    ALICE,
    AUTHORIZER_AND_SUPER_USERS,
    BOB,
    SCRAM_PASSWORD,
    SCRAM_USER,
    TOPIC,
    SecureBroker,
    start_secure_broker,
)
from tests.integration.security.test_kafka_security import handshake, plain_authenticate
from zk.server import LocalZooKeeper

LISTENER = "SASL_PLAINTEXT"


@pytest.fixture(scope="module")
def secure(zookeeper: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    # ANONYMOUS (the fixture's PLAINTEXT set-up) and admin are super users; alice and bob are not.
    yield from start_secure_broker(zookeeper, tmp_path_factory.mktemp("sasl-acls"), {
        **AUTHORIZER_AND_SUPER_USERS,
        "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "3"})


def acls(secure: SecureBroker, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`minibroker acls` through the SASL listener as admin, with Kafka's client properties file."""
    config = tmp / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.plain.username=admin\n"
                      "sasl.plain.password=admin-secret\n")
    return secure.minibroker("acls", "--bootstrap-server", secure.address(LISTENER), "--command-config",
                             str(config), *args)


def produce_error(secure: SecureBroker, settings: dict[str, str]) -> int | None:
    producer = Producer({"bootstrap.servers": secure.address(LISTENER), "message.timeout.ms": 10000, **settings})
    reports: list[Any] = []
    producer.produce(TOPIC, b"value", partition=0, on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(30)
    assert len(reports) == 1
    return None if reports[0] is None else int(reports[0].code())


def test_a_sasl_principal_allowed_read_but_not_write(secure: SecureBroker, tmp_path: Path,
                                                     wait_until: WaitUntil) -> None:
    added = acls(secure, tmp_path, "--add", "--allow-principal", f"User:{SCRAM_USER}", "--operation", "Read",
                 "--topic", TOPIC)
    assert added.returncode == 0, added.stdout + added.stderr
    assert f"(principal=User:{SCRAM_USER}, host=*, operation=READ, permissionType=ALLOW)" in added.stdout
    alice_admin = AdminClient({"bootstrap.servers": secure.address(LISTENER), **ALICE})
    wait_until(lambda: TOPIC in alice_admin.list_topics(timeout=10).topics, message="alice to see the topic")

    # confluent-kafka, kafka-python and kcat, each authenticated as alice: refused with the broker's code.
    assert produce_error(secure, ALICE) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    producer = KafkaProducer(bootstrap_servers=secure.address(LISTENER), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=SCRAM_USER,
                             sasl_plain_password=SCRAM_PASSWORD, enable_idempotence=False, retries=0)
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send(TOPIC, b"value", partition=0).get(timeout=30)
    producer.close()
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is installed by scripts/setup.sh"
    as_alice = [arg for key, value in ALICE.items() for arg in ("-X", f"{key}={value}")]
    done = subprocess.run([kcat, "-b", secure.address(LISTENER), *as_alice, "-P", "-t", TOPIC, "-p", "0"],
                          input="value\n", capture_output=True, text=True, timeout=60)
    assert "Topic authorization failed" in done.stderr, done.stderr

    # Nothing was appended; alice may read (an empty partition), admin (a super user) may write.
    consumer = Consumer({"bootstrap.servers": secure.address(LISTENER), "group.id": "alice", **ALICE})
    assert consumer.get_watermark_offsets(CkTopicPartition(TOPIC, 0), timeout=30) == (0, 0)
    consumer.close()
    assert produce_error(secure, ADMIN) is None


def test_a_principal_without_acls_sees_nothing_and_a_deny_beats_an_allow(secure: SecureBroker, tmp_path: Path,
                                                                         wait_until: WaitUntil) -> None:
    bob = AdminClient({"bootstrap.servers": secure.address(LISTENER), **BOB})
    assert TOPIC not in bob.list_topics(timeout=10).topics
    assert produce_error(secure, BOB) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Everyone may write; bob is denied: the DENY wins.
    for args in (("--allow-principal", "User:*", "--operation", "Write"),
                 ("--deny-principal", "User:bob", "--operation", "Write")):
        done = acls(secure, tmp_path, "--add", *args, "--topic", TOPIC)
        assert done.returncode == 0, done.stdout + done.stderr
    wait_until(lambda: TOPIC in bob.list_topics(timeout=10).topics)  # Write implies Describe
    assert produce_error(secure, BOB) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(secure, ALICE) is None
    listed = acls(secure, tmp_path, "--list", "--topic", TOPIC, "--principal", "User:bob")
    assert listed.stdout.splitlines()[0] == "ACLs for principal `User:bob`"
    assert "(principal=User:bob, host=*, operation=WRITE, permissionType=DENY)" in listed.stdout


def first_event(consumer: Consumer, deadline_s: float) -> Any:
    """The first message or error a subscribed consumer's poll hands out within the deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        message = consumer.poll(1.0)
        if message is not None:
            return message
    raise AssertionError(f"nothing from the consumer in {deadline_s} s")


def test_a_group_consumer_needs_read_on_its_group(secure: SecureBroker, tmp_path: Path) -> None:
    done = acls(secure, tmp_path, "--add", "--allow-principal", f"User:{SCRAM_USER}", "--operation", "Read",
                "--topic", TOPIC)
    assert done.returncode == 0, done.stdout + done.stderr
    assert produce_error(secure, ADMIN) is None
    settings = {"bootstrap.servers": secure.address(LISTENER), "group.id": "alice-group",
                "auto.offset.reset": "earliest", "enable.auto.commit": "false", **ALICE}
    refused = Consumer(settings)
    refused.subscribe([TOPIC])
    event = first_event(refused, 30)
    refused.close()
    assert event.error() is not None and event.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED, event.error()

    done = acls(secure, tmp_path, "--add", "--allow-principal", f"User:{SCRAM_USER}", "--operation", "Read",
                "--group", "alice-group")
    assert done.returncode == 0, done.stdout + done.stderr
    member = Consumer(settings)
    member.subscribe([TOPIC])
    try:
        event = first_event(member, 60)
        while event.error() is not None and event.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            event = first_event(member, 60)  # a refusal cached before the ACL reached the broker
        assert event.error() is None, event.error()
        committed = member.commit(message=event, asynchronous=False)
        assert committed is not None and committed[0].error is None and committed[0].offset == event.offset() + 1
    finally:
        member.close()


def test_offset_delete_needs_delete_on_the_group_and_read_on_the_topic(secure: SecureBroker, tmp_path: Path,
                                                                     wait_until: WaitUntil) -> None:
    group, tp = "bob-offsets", KpTopicPartition(TOPIC, 0)
    # admin (a super user) commits standalone: a group without members, whose offsets OffsetDelete may delete.
    committer = Consumer({"bootstrap.servers": secure.address(LISTENER), "group.id": group, **ADMIN})
    committer.commit(offsets=[CkTopicPartition(TOPIC, 0, 1)], asynchronous=False)
    committer.close()
    bob = KafkaAdminClient(bootstrap_servers=secure.address(LISTENER), security_protocol="SASL_PLAINTEXT",
                           sasl_mechanism="PLAIN", sasl_plain_username="bob", sasl_plain_password="bob-secret")

    def delete_offsets() -> object:
        try:  # straight to the coordinator (broker 1, the only one): no FindCoordinator, which needs Describe
            return bob.delete_group_offsets(group, [tp], group_coordinator_id=1)
        except GroupAuthorizationFailedError as e:
            return type(e)

    try:
        assert delete_offsets() is GroupAuthorizationFailedError
        for args in (("--operation", "Delete", "--group", group), ("--operation", "Read", "--topic", TOPIC)):
            done = acls(secure, tmp_path, "--add", "--allow-principal", "User:bob", *args)
            assert done.returncode == 0, done.stdout + done.stderr
            answer = {tp: TopicAuthorizationFailedError} if args[-2] == "--group" else {tp: NoError}
            wait_until(lambda answer=answer: delete_offsets() == answer,
                       message=f"bob's OffsetDelete to answer {answer} once allowed {args}")
    finally:
        bob.close()


def follower_requests(secure: SecureBroker, user: str, password: str) -> tuple[FetchResponse,
                                                                             OffsetForLeaderEpochResponse]:
    """A Fetch v11 and an OffsetForLeaderEpoch v3 that claim to come from broker 1's follower (replica_id 1),
    sent by `user` (PLAIN) on the SASL_PLAINTEXT listener."""
    partition = fetch_v11.FetchPartition(partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0),
                                         log_start_offset=i64(0), partition_max_bytes=i32(1 << 20))
    fetch = fetch_v11.FetchRequest(
        replica_id=BrokerId(1), max_wait=i32Timedelta.parse(datetime.timedelta(0)), min_bytes=i32(0),
        max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(fetch_v11.FetchTopic(topic=TopicName(TOPIC), partitions=(partition,)),), forgotten_topics_data=(),
        rack_id="")
    epochs = epoch_v3.OffsetForLeaderEpochRequest(replica_id=BrokerId(1), topics=(epoch_v3.OffsetForLeaderTopic(
        topic=TopicName(TOPIC), partitions=(epoch_v3.OffsetForLeaderPartition(
            partition=i32(0), current_leader_epoch=i32(-1), leader_epoch=i32(0)),)),))
    with WireConnection(secure.address(LISTENER)) as conn:
        assert handshake(conn, "PLAIN").error_code == 0
        assert plain_authenticate(conn, user, password).error_code == 0
        conn.send(encode_request(fetch, 3))
        fetched = conn.receive_body(FetchResponse)[1]
        conn.send(encode_request(epochs, 4))
        return fetched, conn.receive_body(OffsetForLeaderEpochResponse)[1]


def test_a_fetch_claiming_to_be_a_follower_needs_cluster_action(secure: SecureBroker, wait_until: WaitUntil) -> None:
    """KafkaApis.handleFetchRequest and handleOffsetForLeaderEpochRequest: a request with replica_id >= 0 needs
    CLUSTER_ACTION on the Cluster. bob (no ACLs) gets CLUSTER_AUTHORIZATION_FAILED and the authorizer's log
    names him and the operation; admin (super.users) is served as a follower, to the log end."""
    producer = Producer({"bootstrap.servers": secure.address(LISTENER), **ADMIN})
    producer.produce(TOPIC, b"for followers", partition=0)
    assert producer.flush(30) == 0
    fetched, epochs = follower_requests(secure, "bob", "bob-secret")
    refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert fetched.error_code == refused and not fetched.responses[0].partitions[0].records
    assert epochs.topics[0].partitions[0].error_code == refused
    wait_until(lambda: "Principal = User:bob is Denied Operation = ClusterAction from host = 127.0.0.1 on resource"
               " = Cluster:LITERAL:kafka-cluster" in secure.log(), timeout=10, message="the authorizer's log line")
    fetched, epochs = follower_requests(secure, "admin", "admin-secret")
    served = fetched.responses[0].partitions[0]
    assert fetched.error_code == 0 and served.error_code == 0 and served.records, fetched
    assert epochs.topics[0].partitions[0].error_code == 0 and epochs.topics[0].partitions[0].end_offset >= 1


def test_partition_admin_requests_need_kafkas_operations(secure: SecureBroker, tmp_path: Path,
                                                         wait_until: WaitUntil) -> None:
    """KafkaApis: CreatePartitions needs Alter on the topic, DeleteRecords Delete on it, ElectLeaders Alter and
    DescribeLogDirs Describe on the cluster. alice, who may only Describe the topic, is refused each with Kafka's
    code, every denial logged by the authorizer with her principal and the operation; admin (a super user) is
    served."""
    added = acls(secure, tmp_path, "--add", "--allow-principal", f"User:{SCRAM_USER}", "--operation", "Describe",
                 "--topic", TOPIC)
    assert added.returncode == 0, added.stdout + added.stderr
    alice = AdminClient({"bootstrap.servers": secure.address(LISTENER), **ALICE})
    wait_until(lambda: TOPIC in alice.list_topics(timeout=10).topics, message="alice to see the topic")
    grown = alice.create_partitions([NewPartitions(TOPIC, 3)], operation_timeout=30)[TOPIC]
    assert grown.exception(timeout=60).args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    (deleted,) = alice.delete_records([CkTopicPartition(TOPIC, 0, 0)], operation_timeout=30).values()
    assert deleted.exception(timeout=60).args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as elect:
        alice.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition(TOPIC, 0)]).result(timeout=60)
    assert elect.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    kp_alice = KafkaAdminClient(bootstrap_servers=secure.address(LISTENER), security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=SCRAM_USER,
                                sasl_plain_password=SCRAM_PASSWORD)
    try:
        assert [answer["log_dirs"] for answer in kp_alice.describe_log_dirs()] == [[]]
    finally:
        kp_alice.close()
    denied = f"Principal = User:{SCRAM_USER} is Denied Operation = {{}} from host = 127.0.0.1 on resource = {{}}"
    for operation, resource in (("Alter", f"Topic:LITERAL:{TOPIC}"), ("Delete", f"Topic:LITERAL:{TOPIC}"),
                                ("Alter", "Cluster:LITERAL:kafka-cluster"),
                                ("Describe", "Cluster:LITERAL:kafka-cluster")):
        wait_until(lambda op=operation, on=resource: denied.format(op, on) in secure.log(), timeout=10,
                   message=f"the authorizer's line for {operation} on {resource}")

    admin = AdminClient({"bootstrap.servers": secure.address(LISTENER), **ADMIN})
    (kept,) = admin.delete_records([CkTopicPartition(TOPIC, 1, 0)], operation_timeout=30).values()
    assert kept.result(timeout=60).low_watermark == 0
    elected = admin.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition(TOPIC, 1)]).result(timeout=60)
    assert [error.code() for error in elected.values()] == [KafkaError.ELECTION_NOT_NEEDED]

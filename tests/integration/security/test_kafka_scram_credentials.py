"""Describe/AlterUserScramCredentials (KIP-554) with confluent-kafka's AdminClient against a real broker with the
AclAuthorizer on and SASL listeners: SCRAM users made, described and deleted without ZooKeeper access, then
logging in (or not) with real clients; every error code of Kafka's ZkAdminManager, and Alter/Describe on the
cluster (kafka-python reads Describe's refusal: librdkafka crashes on it). admin (PLAIN) is a super user, bob
(PLAIN) has no ACLs. One broker for the module."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaAdminClient
from kafka.errors import ClusterAuthorizationFailedError
from kio.schema.alter_user_scram_credentials.v0 import request as alter_request
from kio.schema.alter_user_scram_credentials.v0.response import AlterUserScramCredentialsResponse
from kio.schema.describe_user_scram_credentials.v0 import request as describe_request
from kio.schema.describe_user_scram_credentials.v0.response import DescribeUserScramCredentialsResponse
from kio.static.primitive import i8, i32

from tests.integration.conftest import WaitUntil
from tests.integration.kafka_wire import WireConnection, encode_request
from tests.integration.secure_cluster import (
    ADMIN,
    AUTHORIZER_AND_SUPER_USERS,
    BOB,
    SCRAM_USER,
    TOPIC,
    SecureBroker,
    start_secure_broker,
)
from zk.server import LocalZooKeeper

LISTENER = "SASL_PLAINTEXT"
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


@pytest.fixture(scope="module")
def secure(zookeeper: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    yield from start_secure_broker(zookeeper, tmp_path_factory.mktemp("scram-api"), {
        **AUTHORIZER_AND_SUPER_USERS,
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"})


def admin(secure: SecureBroker, settings: dict[str, str]) -> AdminClient:
    return AdminClient({"bootstrap.servers": secure.address(LISTENER), **settings})


def scram(user: str, password: str, mechanism: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mechanism, "sasl.username": user,
            "sasl.password": password}


def alter(client: AdminClient, *alterations: Any) -> dict[str, KafkaError | None]:
    """Each user's outcome: None, or the broker's error."""
    outcome: dict[str, KafkaError | None] = {}
    for user, future in client.alter_user_scram_credentials(list(alterations), request_timeout=30).items():
        try:
            future.result()
            outcome[user] = None
        except KafkaException as e:
            outcome[user] = e.args[0]
    return outcome


def upsert(user: str, mechanism: ScramMechanism, iterations: int, password: str) -> UserScramCredentialUpsertion:
    return UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password.encode())


def login_error(bootstrap: str, settings: dict[str, str]) -> KafkaError | None:
    """None if a producer authenticates with `settings` (its metadata request answers), else the error
    librdkafka reports (its error callback runs in poll)."""
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "error_cb": errors.append, **settings})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            producer.list_topics(timeout=0.5)
            return None
        except KafkaException:
            producer.poll(0)
            if errors:
                return errors[0]
    raise AssertionError("the producer neither logged in nor was refused")


def credentials(client: AdminClient, user: str) -> dict[ScramMechanism, int]:
    description = client.describe_user_scram_credentials([user], request_timeout=30)[user].result()
    return {info.mechanism: info.iterations for info in description.scram_credential_infos}


def test_a_user_made_through_the_api_produces_and_consumes_with_both_mechanisms(
        secure: SecureBroker, wait_until: WaitUntil) -> None:
    boss = admin(secure, ADMIN)
    assert alter(boss, upsert("carol", SHA256, 8192, "carol-256"), upsert("carol", SHA512, 4096, "carol-512")) == {
        "carol": None}
    granted = secure.minibroker("acls", "--authorizer-properties", f"zookeeper.connect={secure.zk_connect}",
                                "--add", "--allow-principal", "User:carol", "--producer", "--consumer",
                                "--topic", TOPIC, "--group", "carol")
    assert granted.returncode == 0, granted.stdout + granted.stderr
    as_256, as_512 = scram("carol", "carol-256", "SCRAM-SHA-256"), scram("carol", "carol-512", "SCRAM-SHA-512")
    # The broker learns the credential from the change notification, a moment after the write.
    sasl = secure.address(LISTENER)
    wait_until(lambda: login_error(sasl, as_256) is None, timeout=30, message="carol to log in")

    reports: list[Any] = []
    producer = Producer({"bootstrap.servers": secure.address(LISTENER), **as_256})
    producer.produce(TOPIC, b"from carol", partition=1, on_delivery=lambda err, msg: reports.append((err, msg)))
    assert producer.flush(30) == 0
    (error, message), = reports
    assert error is None, error
    consumer = Consumer({"bootstrap.servers": secure.address(LISTENER), "group.id": "carol",
                         "enable.auto.commit": False, **as_512})
    consumer.assign([TopicPartition(TOPIC, 1, message.offset())])
    deadline, got = time.monotonic() + 30, None
    while got is None and time.monotonic() < deadline:
        got = consumer.poll(1.0)
    consumer.close()
    assert got is not None and got.error() is None and got.value() == b"from carol"

    assert credentials(boss, "carol") == {SHA256: 8192, SHA512: 4096}
    # Without users: everyone with a SCRAM credential (alice is the fixture's, made with `minibroker configs`).
    everyone = boss.describe_user_scram_credentials(request_timeout=30).result()
    assert {SCRAM_USER, "carol"} <= set(everyone)
    assert {i.mechanism: i.iterations for i in everyone[SCRAM_USER].scram_credential_infos} == {
        SHA256: 4096, SHA512: 4096}
    # The configs command reads what the API wrote: the same /config/users/<user> znode.
    described = secure.minibroker("configs", "--zookeeper", secure.zk_connect, "--entity-type", "users",
                                  "--entity-name", "carol", "--describe")
    assert "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096" in described.stdout, described.stdout

    # Deleting one mechanism ends its logins only.
    assert alter(boss, UserScramCredentialDeletion("carol", SHA512)) == {"carol": None}
    wait_until(lambda: login_error(sasl, as_512) is not None, timeout=30, message="carol's SHA-512 login to fail")
    refused = login_error(sasl, as_512)
    assert refused is not None and refused.code() == KafkaError._AUTHENTICATION, refused
    assert "Authentication failed" in refused.str()
    assert login_error(sasl, as_256) is None
    assert credentials(boss, "carol") == {SHA256: 8192}


def test_each_refusal_has_kafkas_code_and_text(secure: SecureBroker) -> None:
    boss = admin(secure, ADMIN)
    assert alter(boss, upsert("erin", SHA256, 4096, "erin-secret")) == {"erin": None}
    outcome = alter(boss,
                    upsert("few", SHA256, 4095, "x"), upsert("many", SHA512, 16385, "x"),
                    UserScramCredentialDeletion("ghost", SHA256),
                    upsert("twice", SHA256, 4096, "a"), upsert("twice", SHA256, 4096, "b"),
                    # erin has no SHA-512: the deletion fails, and so does her upsertion in the same request.
                    upsert("erin", SHA256, 8192, "new"), UserScramCredentialDeletion("erin", SHA512))
    codes = {user: (e.code(), e.str()) for user, e in outcome.items() if e is not None}
    assert codes == {
        "few": (KafkaError.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (KafkaError.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "ghost": (KafkaError.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "twice": (KafkaError.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "erin": (KafkaError.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
    }, outcome
    assert credentials(boss, "erin") == {SHA256: 4096}  # unchanged

    with pytest.raises(KafkaException) as missing:
        credentials(boss, "nobody")
    assert missing.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    assert "Attempt to delete" not in missing.value.args[0].str()
    assert "Attempt to describe a user credential that does not exist: nobody" in missing.value.args[0].str()


def _wire(secure: SecureBroker, body: Any, response_type: type[Any]) -> Any:
    """What confluent-kafka refuses to send (an empty user name, an unknown mechanism, an empty salted password),
    sent as is on the
    PLAINTEXT listener (ANONYMOUS, a super user here)."""
    with WireConnection(secure.address("PLAINTEXT")) as connection:
        connection.send(encode_request(body, 7))
        _, response = connection.receive_body(response_type)
    return response


def test_what_clients_refuse_to_send_is_refused_by_the_broker_too(secure: SecureBroker) -> None:
    def upsertion(name: str, salted_password: bytes, mechanism: int = 1) -> Any:
        return alter_request.ScramCredentialUpsertion(name=name, mechanism=i8(mechanism), iterations=i32(4096),
                                                      salt=b"salt", salted_password=salted_password)

    answer = _wire(secure, alter_request.AlterUserScramCredentialsRequest(
        deletions=(alter_request.ScramCredentialDeletion(name="odd", mechanism=i8(3)),),
        upsertions=(upsertion("", b"x" * 32), upsertion("zero", b"x" * 32, mechanism=0), upsertion("frank", b""))),
        AlterUserScramCredentialsResponse)
    assert {(r.user, int(r.error_code), r.error_message) for r in answer.results} == {
        ("", KafkaError.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        ("odd", KafkaError.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        ("zero", KafkaError.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        # Kafka's HMAC (javax's SecretKeySpec) refuses an empty key: an unexpected error, Kafka's generic text.
        ("frank", KafkaError.UNKNOWN, "The server experienced an unexpected error when processing the request.")}

    users = tuple(describe_request.UserName(name=n) for n in ("", "dup", "dup"))
    described = _wire(secure, describe_request.DescribeUserScramCredentialsRequest(users=users),
                      DescribeUserScramCredentialsResponse)
    assert int(described.error_code) == 0
    assert [(r.user, int(r.error_code), r.error_message) for r in described.results] == [
        ("", KafkaError.RESOURCE_NOT_FOUND, "Username must not be empty"),
        ("dup", KafkaError.DUPLICATE_RESOURCE,
         "Cannot describe SCRAM credentials for the same user twice in a single request: dup")]


def test_alter_needs_alter_and_describe_needs_describe_on_the_cluster(secure: SecureBroker) -> None:
    bob = admin(secure, BOB)
    refused = alter(bob, upsert("mallory", SHA256, 4096, "x"), UserScramCredentialDeletion(SCRAM_USER, SHA256))
    assert {user: e.code() for user, e in refused.items() if e is not None} == {
        "mallory": KafkaError.CLUSTER_AUTHORIZATION_FAILED, SCRAM_USER: KafkaError.CLUSTER_AUTHORIZATION_FAILED}
    # Describe's refusal is a request-level error, which librdkafka 2.16 cannot take (it frees a string it did
    # not allocate, whoever answers: Kafka answers the same): kafka-python's admin client reads it instead.
    kp_bob = KafkaAdminClient(bootstrap_servers=secure.address(LISTENER), security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism="PLAIN", sasl_plain_username="bob", sasl_plain_password="bob-secret")
    try:
        for users in (None, [SCRAM_USER]):
            with pytest.raises(ClusterAuthorizationFailedError):
                kp_bob.describe_user_scram_credentials(users)
    finally:
        kp_bob.close()
    boss = admin(secure, ADMIN)
    assert credentials(boss, SCRAM_USER) == {SHA256: 4096, SHA512: 4096}  # bob's deletion did nothing
    assert "mallory" not in boss.describe_user_scram_credentials(request_timeout=30).result()
    assert alter(boss, upsert("mallory", SHA256, 4096, "x")) == {"mallory": None}
    assert credentials(boss, "mallory") == {SHA256: 4096}

"""TLS and SASL on the Kafka listeners with real clients over real TLS: confluent-kafka and kcat with SASL_SSL
and SCRAM-SHA-256/512, kafka-python with SSL (client certificates) and with SASL_SSL PLAIN, each also with a
wrong password; SCRAM users managed with `minibroker configs` and followed live by the broker. One broker for
the whole module (tests/integration/secure_cluster.py)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaError as KpKafkaError
from kio.schema.describe_configs.v1.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.metadata.v8.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.static.primitive import i8

from broker.api.kafka.api_table import API_TABLE
from tests.integration.kafka_wire import RAW_BYTES, WireConnection, encode_request, frames_from_schemas
from tests.integration.secure_cluster import (
    FAILED_AUTH_DELAY_MS,
    HANDSHAKE_TIMEOUT_MS,
    PLAIN_USERS,
    SCRAM_PASSWORD,
    SCRAM_USER,
    TOPIC,
    SecureBroker,
    start_secure_broker,
)
from zk.server import LocalZooKeeper

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secure(zookeeper: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    # One broker: the offsets topic (test_without_an_authorizer_... describes a group) has one replica.
    yield from start_secure_broker(zookeeper, tmp_path_factory.mktemp("secure"), {
        "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1"})


def confluent_config(secure: SecureBroker, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": secure.address("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": str(secure.ca)}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_sasl_ssl_scram(secure: SecureBroker, mechanism: str) -> None:
    config = confluent_config(secure, mechanism, SCRAM_USER, SCRAM_PASSWORD)
    producer = Producer({**config, "acks": "all", "enable.idempotence": True})
    values = [f"{mechanism}-{i}".encode() for i in range(50)]
    for value in values:
        producer.produce(TOPIC, value, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": f"g-{mechanism}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while not set(values) <= set(got) and time.monotonic() < deadline:
        got += [m.value() for m in consumer.consume(100, timeout=1) if m.error() is None]
    consumer.close()
    assert set(values) <= set(got)


def test_confluent_kafka_sasl_plaintext_scram(secure: SecureBroker) -> None:
    config = {**confluent_config(secure, "SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD),
              "bootstrap.servers": secure.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT"}
    del config["ssl.ca.location"]
    producer = Producer({**config, "acks": "all"})
    producer.produce(TOPIC, b"sasl-plaintext", partition=1)
    assert producer.flush(30) == 0
    # The listener offers PLAIN and SCRAM-SHA-256 only: SCRAM-SHA-512 is refused at the handshake.
    errors: list[KafkaError] = []
    refused = Producer({**config, "sasl.mechanism": "SCRAM-SHA-512", "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        refused.poll(0.2)
    assert errors and "SCRAM-SHA-512" in errors[0].str(), errors


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_confluent_kafka_wrong_password_is_an_authentication_error(secure: SecureBroker, mechanism: str) -> None:
    user = SCRAM_USER if mechanism.startswith("SCRAM") else "bob"
    errors: list[KafkaError] = []
    producer = Producer({**confluent_config(secure, mechanism, user, "wrong"), "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "no error from librdkafka"
    assert errors[0].code() == KafkaError._AUTHENTICATION
    assert "Authentication failed" in errors[0].str()
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=2)


def _kcat(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is installed by scripts/setup.sh"
    return subprocess.run([kcat, *args], input=stdin, capture_output=True, text=True, timeout=60)


def _kcat_security(secure: SecureBroker, mechanism: str, password: str) -> list[str]:
    return ["-b", secure.address("SASL_SSL"), "-X", "security.protocol=SASL_SSL", "-X", f"sasl.mechanism={mechanism}",
            "-X", f"sasl.username={SCRAM_USER}", "-X", f"sasl.password={password}",
            "-X", f"ssl.ca.location={secure.ca}"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kcat_sasl_ssl_scram(secure: SecureBroker, mechanism: str) -> None:
    security = _kcat_security(secure, mechanism, SCRAM_PASSWORD)
    lines = [f"k{i}:kcat-{mechanism}-{i}" for i in range(20)]
    produced = _kcat(*security, "-P", "-t", TOPIC, "-p", "1", "-K:", "-X", "acks=all", stdin="\n".join(lines) + "\n")
    assert produced.returncode == 0, produced.stderr
    consumed = _kcat(*security, "-C", "-t", TOPIC, "-p", "1", "-o", "beginning", "-e", "-f", "%k:%s\n")
    assert consumed.returncode == 0, consumed.stderr
    assert set(lines) <= set(consumed.stdout.splitlines())
    denied = _kcat(*security[:-4], "-X", "sasl.password=wrong", "-X", f"ssl.ca.location={secure.ca}", "-L",
                   "-m", "10")
    assert denied.returncode != 0
    assert "Authentication failed" in denied.stderr


def _kafka_python_ssl(secure: SecureBroker) -> dict[str, Any]:
    return {"bootstrap_servers": secure.address("SSL"), "security_protocol": "SSL", "ssl_cafile": str(secure.ca),
            "ssl_certfile": str(secure.client.certificate), "ssl_keyfile": str(secure.client.key)}


def test_kafka_python_ssl_big_fetches_without_sendfile(secure: SecureBroker) -> None:
    """Several MiB through TLS: the fetch path writes the segment bytes through the TLS transport."""
    producer = KafkaProducer(**_kafka_python_ssl(secure), acks="all", max_request_size=2 << 20,
                             batch_size=1 << 20, linger_ms=20)
    values = [f"{i:06d}".encode() + bytes([i % 251]) * 40_000 for i in range(150)]  # ~6 MB
    for value in values:
        producer.send(TOPIC, value, partition=0)
    producer.flush(60)
    producer.close()
    consumer = KafkaConsumer(**_kafka_python_ssl(secure), max_partition_fetch_bytes=4 << 20,
                             fetch_max_bytes=8 << 20, consumer_timeout_ms=20_000)
    consumer.assign([KpTopicPartition(TOPIC, 0)])
    consumer.seek_to_beginning()
    wanted = set(values)
    for record in consumer:
        wanted.discard(record.value)
        if not wanted:
            break
    consumer.close()
    assert not wanted, f"{len(wanted)} records never came back over TLS"


def _kafka_python_plain(secure: SecureBroker, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap_servers": secure.address("SASL_SSL"), "security_protocol": "SASL_SSL",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": password,
            "ssl_cafile": str(secure.ca)}


def test_kafka_python_sasl_ssl_plain(secure: SecureBroker, caplog: pytest.LogCaptureFixture) -> None:
    config = _kafka_python_plain(secure, "bob", PLAIN_USERS["bob"])
    producer = KafkaProducer(**config, acks="all")
    producer.send(TOPIC, b"plain-over-tls", partition=1).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(**config, consumer_timeout_ms=15_000)
    consumer.assign([KpTopicPartition(TOPIC, 1)])
    consumer.seek_to_beginning()
    assert any(r.value == b"plain-over-tls" for r in consumer)  # stops at the first match
    consumer.close()
    # kafka-python gives up bootstrapping with a timeout; why is in its log: Kafka's error and message.
    with caplog.at_level("WARNING", logger="kafka"), pytest.raises(KpKafkaError):
        KafkaProducer(**_kafka_python_plain(secure, "bob", "wrong"), bootstrap_timeout_ms=5000)
    assert "SaslAuthenticationFailedError: Authentication failed: Invalid username or password" in caplog.text


# ------------------------------------------------------------------ users, live


def _can_log_in(secure: SecureBroker, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> bool:
    errors: list[KafkaError] = []
    producer = Producer({**confluent_config(secure, mechanism, user, password), "error_cb": errors.append})
    try:
        producer.list_topics(timeout=3)
        return True
    except KafkaException:
        producer.poll(1)  # error_cb is served by poll()
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        return False


def test_scram_users_follow_configs_live(secure: SecureBroker) -> None:
    assert not _can_log_in(secure, "carol", "carol-1")
    secure.set_scram_password("carol", "carol-1", "SCRAM-SHA-256")
    described = secure.minibroker("configs", "--zookeeper", secure.zk_connect, "--entity-type", "users",
                                  "--entity-name", "carol", "--describe")
    assert described.stdout.strip() == ("SCRAM credential configs for user-principal 'carol' are"
                                        " SCRAM-SHA-256=iterations=4096")
    assert _wait_for(lambda: _can_log_in(secure, "carol", "carol-1"))
    assert not _can_log_in(secure, "carol", "carol-1", "SCRAM-SHA-512")  # no credential for that mechanism
    secure.set_scram_password("carol", "carol-2", "SCRAM-SHA-256")
    assert _wait_for(lambda: not _can_log_in(secure, "carol", "carol-1"))
    assert _can_log_in(secure, "carol", "carol-2")
    deleted = secure.minibroker("configs", "--zookeeper", secure.zk_connect, "--entity-type", "users",
                                "--entity-name", "carol", "--alter", "--delete-config", "SCRAM-SHA-256")
    assert deleted.returncode == 0 and deleted.stdout.strip() == "Completed updating config for user carol."
    assert _wait_for(lambda: not _can_log_in(secure, "carol", "carol-2"))
    # Kafka's bounds on iterations, and only SCRAM mechanisms for users here.
    for bad, message in (("SCRAM-SHA-256=[iterations=100,password=x]", "Invalid iterations 100"),
                         ("SCRAM-SHA-256=[iterations=4096]", "Invalid credential config"),
                         ("producer_byte_rate=1024", "Invalid config(s): producer_byte_rate")):
        refused = secure.minibroker("configs", "--zookeeper", secure.zk_connect, "--entity-type", "users",
                                    "--entity-name", "carol", "--alter", "--add-config", bad)
        assert refused.returncode == 1 and message in refused.stdout, refused.stdout + refused.stderr
    # Stored as Kafka stores it: salted keys, never the password.
    from zk.client import KafkaZkClient
    with KafkaZkClient.connect(secure.zk_connect, timeout=15) as zk:
        stored = zk.get_entity_config("users", SCRAM_USER)
    assert sorted(stored) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert stored["SCRAM-SHA-256"].startswith("salt=") and "stored_key=" in stored["SCRAM-SHA-256"]
    assert SCRAM_PASSWORD not in "".join(stored.values())


def _wait_for(condition: Any, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)  # a condition polled under a deadline: the broker's watch on /config/changes
    return True


def test_without_an_authorizer_every_supported_operation_is_authorized(secure: SecureBroker) -> None:
    """KIP-430 on a broker with no authorizer.class.name: Kafka's authorizedOperations answers all of
    AclEntry.supportedOperations of the resource type, to anyone (here ANONYMOUS on PLAINTEXT); the ACL
    cases are in test_kafka_authorized_operations.py."""
    admin = AdminClient({"bootstrap.servers": secure.address("PLAINTEXT")})
    committed = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("described", [TopicPartition(TOPIC, 0, 0)])], request_timeout=30)
    committed["described"].result()
    topic = admin.describe_topics(TopicCollection([TOPIC]), request_timeout=30, include_authorized_operations=True)
    cluster = admin.describe_cluster(request_timeout=30, include_authorized_operations=True)
    group = admin.describe_consumer_groups(["described"], request_timeout=30, include_authorized_operations=True)
    Op = AclOperation
    assert set(topic[TOPIC].result().authorized_operations) == {
        Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
    assert set(cluster.result().authorized_operations) == {
        Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.ALTER,
        Op.DESCRIBE}
    assert set(group["described"].result().authorized_operations) == {Op.DELETE, Op.DESCRIBE, Op.READ}


# ------------------------------------------------------------------ hostile input


def metadata_request(correlation_id: int) -> bytes:
    return encode_request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                          include_cluster_authorized_operations=False,
                                          include_topic_authorized_operations=False), correlation_id)


def handshake(conn: WireConnection, mechanism: str, correlation_id: int = 1) -> SaslHandshakeResponse:
    conn.send(encode_request(SaslHandshakeRequest(mechanism=mechanism), correlation_id))
    received_id, body = conn.receive_body(SaslHandshakeResponse)
    assert received_id == correlation_id
    return body


def plain_authenticate(conn: WireConnection, user: str, password: str) -> SaslAuthenticateResponse:
    conn.send(encode_request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), 2))
    return conn.receive_body(SaslAuthenticateResponse)[1]


def _peer_logged(secure: SecureBroker, conn: WireConnection, text: str, timeout: float = 10.0) -> bool:
    """The broker logged `text` on a line naming this connection's peer address."""
    peer = f"127.0.0.1:{conn.local_port}"
    return _wait_for(lambda: any(peer in line and text in line for line in secure.log().splitlines()), timeout)


def test_requests_before_authentication_are_refused(secure: SecureBroker) -> None:
    address = secure.address("SASL_PLAINTEXT")
    with WireConnection(address) as conn:  # before the handshake: no answer, closed (Kafka's way)
        conn.send(metadata_request(7))
        assert conn.closed_by_peer()
        assert _peer_logged(secure, conn, "ILLEGAL_SASL_STATE): Unexpected Kafka request of type Metadata during"
                                          " SASL handshake.")
    with WireConnection(address) as conn:  # after it, only SaslAuthenticate
        assert handshake(conn, "PLAIN").error_code == 0
        conn.send(metadata_request(8))
        assert conn.closed_by_peer()
        assert _peer_logged(secure, conn, "during SASL authentication.")
    with WireConnection(address) as conn:
        body = handshake(conn, "GSSAPI")
        assert body.error_code == 33  # UNSUPPORTED_SASL_MECHANISM, with what the listener offers
        assert list(body.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
        assert conn.closed_by_peer()
    with WireConnection(address) as conn:  # a 2 GiB size before authentication: nothing is allocated
        conn.send(b"\x7f\xff\xff\xff")
        assert conn.closed_by_peer()
        assert _peer_logged(secure, conn, "request size 2147483647 is larger than sasl.server.max.receive.size")
    with WireConnection(address) as conn:  # the exchange done, the connection is served as usual
        assert handshake(conn, "PLAIN").error_code == 0
        assert plain_authenticate(conn, "bob", PLAIN_USERS["bob"]).error_code == 0
        conn.send(metadata_request(9))
        assert conn.receive()[0] == 9
        conn.send(encode_request(SaslHandshakeRequest(mechanism="PLAIN"), 10))  # no re-authentication
        assert conn.receive_body(SaslHandshakeResponse)[1].error_code == 34  # ILLEGAL_SASL_STATE


def test_wrong_password_is_answered_after_the_delay_then_closed(secure: SecureBroker) -> None:
    with WireConnection(secure.address("SASL_SSL"), tls=secure.client_tls()) as conn:
        assert handshake(conn, "PLAIN").error_code == 0
        began = time.monotonic()
        body = plain_authenticate(conn, "bob", "guess")
        elapsed = time.monotonic() - began
        assert body.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert body.error_message == "Authentication failed: Invalid username or password"
        assert elapsed >= FAILED_AUTH_DELAY_MS / 1000 * 0.9
        assert conn.closed_by_peer()
        assert _peer_logged(secure, conn, "SASL_AUTHENTICATION_FAILED): Authentication failed: Invalid username")


def test_bad_tls_clients_are_refused_and_others_unaffected(secure: SecureBroker) -> None:
    config = confluent_config(secure, "SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)
    bystander = Producer({**config, "acks": "all"})
    bystander.produce(TOPIC, b"before", partition=0)
    assert bystander.flush(30) == 0
    # A TLS handshake that never finishes (a client that connects and says nothing) is cut.
    began = time.monotonic()
    with WireConnection(secure.address("SSL")) as silent:
        assert silent.closed_by_peer(timeout=HANDSHAKE_TIMEOUT_MS / 1000 + 10)
        assert time.monotonic() - began >= HANDSHAKE_TIMEOUT_MS / 1000 * 0.9
        assert _peer_logged(secure, silent, "Failed TLS handshake with")
    # A plaintext Kafka client on the TLS port.
    with WireConnection(secure.address("SSL")) as plaintext:
        plaintext.send(metadata_request(1))
        assert plaintext.closed_by_peer()
        assert _peer_logged(secure, plaintext, "Failed TLS handshake with")
    # Client certificates from another CA, expired, or none where ssl.client.auth=required.
    for certificate, reason in ((secure.foreign, "certificate verify failed"),
                                (secure.expired, "certificate has expired"), (None, "certificate")):
        try:
            with WireConnection(secure.address("SSL"), tls=secure.client_tls(certificate)) as conn:
                # TLS 1.3: the client learns of the refusal on its first read.
                conn.send(metadata_request(1))
                assert conn.closed_by_peer()
        except (ssl.SSLError, ConnectionError):
            pass
        assert _wait_for(lambda r=reason: any("Failed TLS handshake with 127.0.0.1:" in line and r in line
                                              for line in secure.log().splitlines())), reason
    # A valid client certificate gets through, and the bystander never noticed.
    with WireConnection(secure.address("SSL"), tls=secure.client_tls(secure.client)) as conn:
        conn.send(metadata_request(5))
        assert conn.receive()[0] == 5
    bystander.produce(TOPIC, b"after", partition=0)
    assert bystander.flush(30) == 0


# The fuzz test of the plaintext listener (test_kafka_protocol.py), on the SASL paths: before and after a
# handshake, in clear and inside TLS, and raw bytes at the TLS listeners.
_SASL_KEYS = [spec.key for spec in API_TABLE]


@st.composite
def _sasl_session(draw: st.DrawFn) -> tuple[str, list[bytes]]:
    listener = draw(st.sampled_from(["SASL_PLAINTEXT", "SASL_SSL", "SSL-raw", "SASL_SSL-raw"]))
    frames = []
    if not listener.endswith("-raw") and draw(st.booleans()):
        frames.append(encode_request(SaslHandshakeRequest(mechanism=draw(st.sampled_from(
            ["PLAIN", "SCRAM-SHA-256", "nope"]))), 1))
        if draw(st.booleans()):
            frames.append(encode_request(SaslAuthenticateRequest(auth_bytes=draw(st.binary(max_size=200))), 2))
    frames += draw(st.lists(st.one_of(frames_from_schemas(_SASL_KEYS), RAW_BYTES), min_size=1, max_size=3))
    return listener, frames


def test_fuzz_sasl_and_tls_paths(secure: SecureBroker) -> None:
    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_sasl_session())
    def send_anything(session: tuple[str, list[bytes]]) -> None:
        listener, frames = session
        name = listener.removesuffix("-raw")
        tls = secure.client_tls() if name == "SASL_SSL" and not listener.endswith("-raw") else None
        with WireConnection(secure.address(name), timeout=10, tls=tls) as conn:
            try:
                for frame in frames:
                    conn.send(frame)
                conn.sock.settimeout(0.05)
                conn.sock.recv(65536)
            except (TimeoutError, ConnectionError, ssl.SSLError):
                pass

    send_anything()
    assert secure.broker.popen.poll() is None
    assert _can_log_in(secure, SCRAM_USER, SCRAM_PASSWORD)
    assert "Traceback" not in secure.log()


def test_a_sasl_ssl_consumer_reads_while_zookeeper_is_paused_under_describe_configs(
        secure: SecureBroker, zookeeper: LocalZooKeeper) -> None:
    """Requests that need no ZooKeeper never wait for it: ZooKeeper calls have their own threads
    (zookeeper.max.in.flight.requests) and TLS fetch reads theirs (num.io.threads), as Kafka's network threads
    never wait on ZooKeeper. With ZooKeeper paused and 40 DescribeConfigs waiting on it (more than the loop's
    default executor holds on any machine), a SASL_SSL consumer read 0 of 2,000 records in 12 s: their reads
    queued behind the ZooKeeper calls."""
    topic, count = "zk-paused", 2000
    plaintext = {"bootstrap.servers": secure.address("PLAINTEXT")}
    admin = AdminClient(plaintext)
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(timeout=60)
    producer = Producer({**plaintext, "acks": "all"})
    for i in range(count):  # 1 KiB each: fetch responses over SENDFILE_MIN_BYTES, read off the loop under TLS
        producer.produce(topic, (b"%d" % i).ljust(1024, b"x"), partition=0)
    assert producer.flush(30) == 0
    config = {**confluent_config(secure, "SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD), "group.id": "zk-paused",
              "enable.auto.commit": False}
    # The group's coordinator first (it creates __consumer_offsets in ZooKeeper): the consumer asks for it on the
    # connection it fetches on, and an answer waiting on ZooKeeper would hold the fetches behind it.
    consumer = Consumer(config)
    consumer.committed([TopicPartition(topic, 0)], timeout=30)
    consumer.close()
    describe = encode_request(DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=i8(2), resource_name=topic, configuration_keys=None),), include_synonyms=False), 1)
    zk_pid = zookeeper.pid
    assert zk_pid is not None
    waiting = [WireConnection(secure.address("PLAINTEXT")) for _ in range(40)]
    os.kill(zk_pid, signal.SIGSTOP)
    try:
        for conn in waiting:
            conn.send(describe)
        consumer = Consumer(config)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = 0
        deadline = time.monotonic() + 10  # well inside the ZooKeeper sessions' 18 s
        while got < count and time.monotonic() < deadline:
            got += sum(m.error() is None for m in consumer.consume(500, timeout=0.5))
        consumer.close()
        still_waiting = sum(_unanswered(conn) for conn in waiting)
    finally:
        os.kill(zk_pid, signal.SIGCONT)
    for conn in waiting:
        conn.close()
    assert still_waiting == len(waiting), "the DescribeConfigs did not wait on ZooKeeper all along"
    assert got == count, f"the SASL_SSL consumer read {got} of {count} records while ZooKeeper was paused"


def _unanswered(conn: WireConnection) -> bool:
    """Nothing came back on the connection yet, neither an answer nor a close."""
    conn.sock.setblocking(False)
    try:
        conn.sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    except ConnectionError:
        return False
    finally:
        conn.sock.setblocking(True)
    return False

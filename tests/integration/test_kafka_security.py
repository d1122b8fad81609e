"""TLS and SASL on the Kafka listeners with real clients over real TLS: confluent-kafka and kcat with SASL_SSL
and SCRAM-SHA-256/512, kafka-python with SSL (client certificates) and with SASL_SSL PLAIN, each also with a
wrong password; SCRAM users managed with `minibroker configs` and followed live by the broker. One broker for
the whole module (tests/integration/secure_cluster.py)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaError as KpKafkaError

from tests.integration.secure_cluster import (
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
    yield from start_secure_broker(zookeeper, tmp_path_factory.mktemp("secure"))


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
    assert b"plain-over-tls" in [r.value for r in consumer]
    consumer.close()
    # kafka-python gives up bootstrapping with a timeout; why is in its log: Kafka's error and message.
    with caplog.at_level("WARNING", logger="kafka"), pytest.raises(KpKafkaError):
        KafkaProducer(**_kafka_python_plain(secure, "bob", "wrong"))
    assert "SaslAuthenticationFailedError: Authentication failed: Invalid username or password" in caplog.text

"""The secure docker-compose variant as a user meets it (scripts/compose_system_test.sh runs this after
test_compose.py): `docker-compose -f docker-compose.yml -f docker-compose.secure.yml up -d`, every service
healthy over TLS; the admin's tools inside the containers with the `security` volume's admin.properties; from
the host, confluent-kafka and kcat with SASL_SSL + SCRAM on the published Kafka listeners and minibroker's client
over mutual TLS on the gRPC ones; a client without credentials or with a wrong password refused; ZooKeeper's
cluster znodes closed to a session without the cluster's credentials."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaException
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from client import Consumer
from common.grpc_tls import client_security
from common.properties import format_properties, load_properties
from tests.system.compose_cluster import ComposeCluster, compose_cluster, wait

SECURITY_DIR = "/var/lib/minibroker/security"
TOPIC = "compose-secure"


@pytest.fixture(scope="module")
def cluster() -> Iterator[ComposeCluster]:
    yield from compose_cluster(["docker-compose.yml", "docker-compose.secure.yml"], "mbsecuretest")


@pytest.fixture(scope="module")
def admin_properties(cluster: ComposeCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The admin's client properties as a host user makes them: the `security` volume's files copied out of a
    container, their paths made local."""
    local = tmp_path_factory.mktemp("security")
    copied = subprocess.run(["docker", "cp", f"{cluster.services.container('broker-1')}:{SECURITY_DIR}/.",
                             str(local)], capture_output=True, text=True, timeout=60, check=False)
    assert copied.returncode == 0, copied.stderr
    properties = {key: value.replace(SECURITY_DIR, str(local))
                  for key, value in load_properties(local / "admin.properties").items()}
    (local / "host-admin.properties").write_text(format_properties(properties))
    return properties


def in_container(cluster: ComposeCluster, service: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "exec", cluster.services.container(service), *argv], capture_output=True,
                          text=True, timeout=120, check=False)


def test_the_admin_creates_a_topic_inside_and_kafka_clients_use_it_from_the_host(
        cluster: ComposeCluster, admin_properties: dict[str, str]) -> None:
    created = in_container(cluster, "broker-1", "minibroker", "topics", "--bootstrap-server", "broker-1:29192",
                           "--command-config", f"{SECURITY_DIR}/admin.properties", "--create", "--topic", TOPIC,
                           "--partitions", "3", "--replication-factor", "3")
    assert created.returncode == 0 and f"Created topic {TOPIC}." in created.stdout, created.stdout + created.stderr

    producer = KafkaProducer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "all",
                              "enable.idempotence": True, **admin_properties})
    for i in range(20):
        producer.produce(TOPIC, f"secure-{i}".encode(), key=f"k{i}".encode())
    assert producer.flush(60) == 0

    consumer = KafkaConsumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": "compose-secure",
                              "auto.offset.reset": "earliest", **admin_properties})
    consumer.subscribe([TOPIC])
    values: list[str] = []

    def read_all() -> bool:
        for message in consumer.consume(100, timeout=1):
            value = message.value()
            assert message.error() is None and value is not None, message.error()
            values.append(value.decode())
        return len(values) >= 20
    wait(read_all, 90, "the group consumer to read the 20 records over SASL_SSL")
    consumer.close()
    assert sorted(values) == sorted(f"secure-{i}" for i in range(20))

    properties_file = Path(admin_properties["ssl.ca.location"]).parent / "host-admin.properties"
    listing = subprocess.run(["kcat", "-F", str(properties_file), "-b", cluster.kafka_bootstrap, "-L", "-t", TOPIC],
                             capture_output=True, text=True, timeout=60, check=False)
    assert listing.returncode == 0 and listing.stdout.count("partition ") == 3, listing.stdout + listing.stderr


def test_minibroker_client_over_mutual_tls_from_the_host(cluster: ComposeCluster,
                                                         admin_properties: dict[str, str]) -> None:
    security = client_security(admin_properties)
    wait(lambda: all(len(p.isr) == 3 for p in cluster.partitions(TOPIC, security.channel_factory)), 60,
         "three in-sync replicas per partition over TLS")
    with Consumer(TOPIC, bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                  channel_factory=security.channel_factory) as consumer:
        values: list[bytes] = []

        def read_all() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(record.value for record in records if record.value is not None)
            return len(values) >= 20
        wait(read_all, 60, "minibroker's consumer to read the 20 records over TLS")
    assert sorted(values) == sorted(f"secure-{i}".encode() for i in range(20))


@pytest.mark.parametrize("who", ["no credentials", "a wrong password"])
def test_a_stranger_is_refused(cluster: ComposeCluster, admin_properties: dict[str, str], who: str) -> None:
    settings = ({"security.protocol": "PLAINTEXT"} if who == "no credentials"
                else {**admin_properties, "sasl.password": "not-the-password"})
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap, **settings})
    # librdkafka reports either as no metadata in time (the broker closed the connection, logging the peer).
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=10)


def test_zookeeper_refuses_a_session_without_the_clusters_credentials(cluster: ComposeCluster) -> None:
    zk = KazooClient(hosts=",".join(f"127.0.0.1:{port}" for port in cluster.zookeeper_host_ports), timeout=30)
    zk.start(timeout=60)
    try:
        assert zk.exists("/brokers/ids/1") is not None  # readable, as Kafka's default ACLs leave it
        with pytest.raises(NoAuthError):
            zk.set("/controller_epoch", b"999")
        with pytest.raises(NoAuthError):
            zk.create("/brokers/ids/99", b"{}")
        with pytest.raises(NoAuthError):
            zk.get("/config/users/admin")
    finally:
        zk.stop()
        zk.close()

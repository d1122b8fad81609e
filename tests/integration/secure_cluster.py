"""A broker with every Kafka security protocol on its listeners, for the tests of TLS and SASL with real
clients: PLAINTEXT, SSL (client certificates required), SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and
SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256), certificates from the development CA (local_cluster/certificates.py),
SCRAM users made with `minibroker configs`. One broker and one controller, started once per test module."""

from __future__ import annotations

import datetime
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from local_cluster.certificates import CertificateAuthority, CertificateFiles
from tests.integration.conftest import CLUSTER_CREDENTIAL, REPO_ROOT, LoggedProcess, broker_argv, wait_until_serving
from zk.server import LocalZooKeeper, free_port

KEY_PASSWORD = "broker-key-secret"
PLAIN_USERS = {"admin": "admin-secret", "bob": "bob-secret"}
SCRAM_USER, SCRAM_PASSWORD = "alice", "alice-secret"
FAILED_AUTH_DELAY_MS = 400
HANDSHAKE_TIMEOUT_MS = 1500
TOPIC = "secured"
# confluent-kafka's settings for the SASL_PLAINTEXT listener as each user: alice by SCRAM, bob and admin by PLAIN.
ALICE = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": SCRAM_USER,
         "sasl.password": SCRAM_PASSWORD}
BOB = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN", "sasl.username": "bob",
       "sasl.password": "bob-secret"}
ADMIN = {**BOB, "sasl.username": "admin", "sasl.password": "admin-secret"}
# The AclAuthorizer on, with admin (PLAIN) and ANONYMOUS (this fixture's own PLAINTEXT set-up) as super users.
AUTHORIZER_AND_SUPER_USERS = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                              "super.users": "User:admin;User:ANONYMOUS"}


@dataclass
class SecureBroker:
    zk_connect: str
    directory: Path
    ports: dict[str, int]
    broker: LoggedProcess
    controller: LoggedProcess
    ca: Path
    client: CertificateFiles  # CN=alice-client,OU=clients, signed by the CA
    foreign: CertificateFiles  # signed by another CA
    expired: CertificateFiles  # signed by the CA, expired

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def log(self) -> str:
        return self.broker.log()

    def client_tls(self, certificate: CertificateFiles | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        if certificate is not None:
            context.load_cert_chain(certificate.keystore)
        return context

    def minibroker(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "minibroker.cli", *args], capture_output=True, text=True,
                              timeout=60, cwd=REPO_ROOT)

    def set_scram_password(self, user: str, password: str, *mechanisms: str) -> None:
        config = ",".join(f"{m}=[iterations=4096,password={password}]" for m in mechanisms)
        done = self.minibroker("configs", "--zookeeper", self.zk_connect, "--entity-type", "users",
                               "--entity-name", user, "--alter", "--add-config", config)
        assert done.returncode == 0, done.stdout + done.stderr


def jaas_plain(users: dict[str, str]) -> str:
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin"'
            f' password="admin-secret" {entries};')


def _certificates(directory: Path) -> tuple[Path, CertificateFiles, CertificateFiles, CertificateFiles, Path]:
    ca = CertificateAuthority.create()
    ca_path = ca.write(directory / "ca")
    broker = ca.issue("CN=broker-1,OU=brokers", hosts=["localhost", "127.0.0.1"])
    keystore = broker.write_keystore(directory / "broker-1.pem", KEY_PASSWORD)
    client = ca.issue("CN=alice-client,OU=clients").write_files(directory, "client")
    foreign = CertificateAuthority.create("CN=another CA").issue("CN=mallory").write_files(directory, "foreign")
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=10)
    expired = ca.issue("CN=old-client", not_before=past, not_after=past + datetime.timedelta(days=1)).write_files(
        directory, "expired")
    return ca_path, client, foreign, expired, keystore


def _start(name: str, argv: list[str], directory: Path) -> LoggedProcess:
    log_path = directory / f"{name}.log"
    with log_path.open("wb") as log_file:
        popen = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    return LoggedProcess(name, popen, log_path)


def start_secure_broker(zookeeper: LocalZooKeeper, directory: Path,
                        extra: dict[str, str] | None = None) -> Generator[SecureBroker, None, None]:
    """A generator for a module fixture: the broker and its controller SIGKILLed at the end."""
    zk_connect = f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}"
    ca, client, foreign, expired, keystore = _certificates(directory)
    ports = {name: free_port() for name in ("GRPC", "PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT")}
    props = {
        "broker.id": "1",
        "zookeeper.connect": zk_connect,
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "log.dirs": str(directory / "logs"),
        "cluster.credential": CLUSTER_CREDENTIAL,
        "zookeeper.session.timeout.ms": "6000",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.handshake.timeout.ms": str(HANDSHAKE_TIMEOUT_MS),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_plain(PLAIN_USERS),
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_plain(PLAIN_USERS),
        "connection.failed.authentication.delay.ms": str(FAILED_AUTH_DELAY_MS),
        **(extra or {}),
    }
    config_path = directory / "server.properties"
    config_path.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
    broker = _start("broker-1", broker_argv(config_path), directory)
    # With an authorizer, the controller's too, with admin alone as a super user: the broker's forwarded
    # requests prove themselves with the cluster credential, not as the super user ANONYMOUS.
    authorizer = [] if "authorizer.class.name" not in props else [
        "--override", f"authorizer.class.name={props['authorizer.class.name']}", "--override", "super.users=User:admin"]
    controller = _start("controller", [
        sys.executable, "-m", "controller.main", "--zookeeper", zk_connect, "--controller-id", "1000",
        "--override", f"cluster.credential={CLUSTER_CREDENTIAL}", "--override", "zookeeper.session.timeout.ms=6000",
        *authorizer,
    ], directory)
    secure = SecureBroker(zk_connect, directory, ports, broker, controller, ca, client, foreign, expired)
    try:
        wait_until_serving(f"127.0.0.1:{ports['GRPC']}", broker)
        secure.set_scram_password(SCRAM_USER, SCRAM_PASSWORD, "SCRAM-SHA-256", "SCRAM-SHA-512")
        admin = AdminClient({"bootstrap.servers": secure.address("PLAINTEXT")})
        deadline = time.monotonic() + 60
        while not admin.list_topics(timeout=10).brokers:  # the controller's first UpdateMetadata
            assert time.monotonic() < deadline, broker.log()[-3000:]
            time.sleep(0.1)
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        yield secure
    finally:
        for process in (broker, controller):
            if process.popen.poll() is None:
                process.popen.kill()
            process.popen.wait(30)

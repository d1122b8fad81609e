"""What `minibroker cluster up --security` adds to a data dir: a development CA, certificates, the ZooKeeper
identity, the admin super user and its client properties, and the security keys of every config.

Under `<data dir>/security/` (keys and secrets readable by their owner only):

    ca.pem, ca-key.pem                       the development CA (local_cluster/certificates.py); kept across runs
    broker-<id>.pem, controller-<id>.pem     each process's key and CA-signed chain (Kafka's PEM key store)
    admin.pem, admin-cert.pem, admin-key.pem the admin client's certificate (mutual TLS on the gRPC listeners)
    zookeeper-jaas.conf                      Client { DigestLoginModule username password }: the cluster's
                                             ZooKeeper identity (zookeeper.set.acl, zk/acl.py)
    admin.properties                         the admin client's properties: Kafka / librdkafka names, for
                                             `--command-config`, `kcat -F` and confluent-kafka

The cluster it describes: Kafka listeners SASL_SSL (SCRAM-SHA-256/512; the admin's SCRAM credential stored in
/config/users/admin), gRPC listeners SSL with client certificates required (brokers, controllers and the
admin tools all show one: the inter-broker principal is the certificate's), controllers on SSL, Kafka's ACLs
on brokers and controllers with the admin and every broker's and controller's certificate principal in
super.users, ZooKeeper znodes created with ACLs only the cluster's identity can change. Passwords are generated
once and read back from these files on the next run.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from broker.security.scram import SCRAM_MECHANISMS, make_credential
from common.grpc_tls import PLAINTEXT, GrpcSecurity, client_security
from common.properties import format_properties, load_properties
from local_cluster.certificates import CertificateAuthority
from local_cluster.cluster_file import ClusterInfo, SecurityEntry
from local_cluster.configs import write_private
from zk.acl import JAAS_CONFIG_KEY, OPEN, ZkCredentials, ZkSecurity
from zk.client import KafkaZkClient
from zk.paths import USERS_ENTITY

SECURITY_DIR = "security"
ADMIN_USER = "admin"
ZOOKEEPER_USER = "minibroker"
CLIENT_CONFIG = "admin.properties"
ZOOKEEPER_JAAS = "zookeeper-jaas.conf"
# The admin client's mechanism (librdkafka's default SCRAM one).
ADMIN_MECHANISM = "SCRAM-SHA-256"
GRPC_PROTOCOL = "SSL"
KAFKA_LISTENER = "SASL_SSL"
# Every process's certificate names the hosts it is reached at: TLS clients check the name they dialled.
CERTIFICATE_HOSTS = ("127.0.0.1", "localhost")


def broker_subject(broker_id: int) -> str:
    return f"CN=broker-{broker_id},OU=minibroker"


def controller_subject(controller_id: int) -> str:
    return f"CN=controller-{controller_id},OU=minibroker"


def admin_subject() -> str:
    return f"CN={ADMIN_USER},OU=minibroker"


def super_users(broker_ids: Iterable[int], controller_ids: Iterable[int]) -> str:
    """`super.users` of the brokers and controllers: the admin (its SASL user, and its certificate, which is
    what the controller, knowing no SASL users, sees), every broker's and every controller's certificate
    principal. Kafka asks CLUSTER_ACTION on the cluster of LeaderAndIsr, UpdateMetadata, StopReplica, a
    follower's Fetch and ControlledShutdown; its brokers get it the same way, through super.users."""
    subjects = [admin_subject(), *map(broker_subject, broker_ids), *map(controller_subject, controller_ids)]
    return ";".join([f"User:{ADMIN_USER}", *(f"User:{subject}" for subject in subjects)])


@dataclass(frozen=True)
class ClusterSecurity:
    """The files of one data dir's security directory, made (or kept) by `prepare`."""

    directory: Path
    admin_password: str
    zookeeper: ZkCredentials
    broker_ids: tuple[int, ...]
    controller_ids: tuple[int, ...]

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    def keystore(self, name: str) -> Path:
        return self.directory / f"{name}.pem"

    @property
    def client_config(self) -> Path:
        return self.directory / CLIENT_CONFIG

    @property
    def zookeeper_jaas(self) -> Path:
        return self.directory / ZOOKEEPER_JAAS

    def entry(self) -> SecurityEntry:
        return SecurityEntry(ca=str(self.ca), client_config=str(self.client_config),
                             zookeeper_jaas=str(self.zookeeper_jaas), admin_user=ADMIN_USER)

    def zookeeper_props(self) -> dict[str, str]:
        """What brokers and controllers alike need: ZooKeeper ACLs and the identity to write them."""
        return {"zookeeper.set.acl": "true", JAAS_CONFIG_KEY: str(self.zookeeper_jaas)}

    def authorizer_props(self) -> dict[str, str]:
        """Kafka's ACLs, on brokers and controllers alike: the admin and the cluster's own processes above them
        all; anyone else needs ACLs (`minibroker acls`)."""
        return {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": super_users(self.broker_ids, self.controller_ids)}

    def broker_props(self, broker_id: int) -> dict[str, str]:
        """The security keys of broker `broker_id`'s server.properties (its listeners are the launcher's)."""
        return {
            "listener.security.protocol.map": f"GRPC:{GRPC_PROTOCOL},{KAFKA_LISTENER}:{KAFKA_LISTENER}",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore(f"broker-{broker_id}")),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
            # Mutual TLS between brokers and from controllers and tools; Kafka clients authenticate with SASL.
            "listener.name.grpc.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": ",".join(SCRAM_MECHANISMS),
            **self.authorizer_props(),
            **self.zookeeper_props(),
        }

    def controller_props(self, controller_id: int) -> dict[str, str]:
        return {
            "listeners": f"{GRPC_PROTOCOL}://127.0.0.1:0",
            "ssl.keystore.location": str(self.keystore(f"controller-{controller_id}")),
            "ssl.truststore.location": str(self.ca),
            **self.authorizer_props(),
            **self.zookeeper_props(),
        }

    def client_props(self) -> dict[str, str]:
        """The admin's client properties: librdkafka's names (kcat -F, confluent-kafka), which
        minibroker's tools read too (common/grpc_tls.py)."""
        return {
            "security.protocol": KAFKA_LISTENER,
            "sasl.mechanism": ADMIN_MECHANISM,
            "sasl.username": ADMIN_USER,
            "sasl.password": self.admin_password,
            "ssl.ca.location": str(self.ca),
            "ssl.certificate.location": str(self.directory / "admin-cert.pem"),
            "ssl.key.location": str(self.directory / "admin-key.pem"),
        }


def _existing_admin_password(path: Path) -> str | None:
    return load_properties(path).get("sasl.password") if path.is_file() else None


def prepare(data_dir: Path, broker_ids: Iterable[int], controller_ids: Iterable[int],
            hosts: Sequence[str] = CERTIFICATE_HOSTS, directory: Path | None = None) -> ClusterSecurity:
    """The security directory of `data_dir` (or `directory`): the CA and secrets it has, and what is missing made
    (a certificate for each process naming `hosts`, the admin's, the JAAS file, the client properties)."""
    directory = directory or data_dir / SECURITY_DIR
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    ca = CertificateAuthority.load_or_create(directory)
    jaas = directory / ZOOKEEPER_JAAS
    zookeeper = (ZkCredentials.from_jaas_file(jaas) if jaas.is_file()
                 else ZkCredentials(ZOOKEEPER_USER, secrets.token_urlsafe(24)))
    broker_ids, controller_ids = tuple(broker_ids), tuple(controller_ids)
    security = ClusterSecurity(directory, _existing_admin_password(directory / CLIENT_CONFIG)
                               or secrets.token_urlsafe(24), zookeeper, broker_ids, controller_ids)
    subjects = {f"broker-{i}": broker_subject(i) for i in broker_ids}
    subjects.update({f"controller-{i}": controller_subject(i) for i in controller_ids})
    subjects["admin"] = admin_subject()
    for name, subject in subjects.items():
        if not security.keystore(name).is_file():
            ca.issue(subject, hosts=hosts).write_files(directory, name)
    if not jaas.is_file():
        write_private(jaas, zookeeper.jaas_file_text())
    if not security.client_config.is_file():
        write_private(security.client_config, format_properties(security.client_props()))
    return security



def zookeeper_security(info: ClusterInfo) -> ZkSecurity:
    """How a tool or the launcher logs in to a cluster's ZooKeeper: as the cluster, with Kafka's ACLs on what it
    creates, when cluster.json says the cluster is secure; else open."""
    if info.security is None:
        return OPEN
    return ZkSecurity(set_acl=True, credentials=ZkCredentials.from_jaas_file(Path(info.security.zookeeper_jaas)))


def grpc_security(info: ClusterInfo) -> GrpcSecurity:
    """How a tool or the launcher reaches a cluster's gRPC listeners: as its admin client when it is secure."""
    if info.security is None:
        return PLAINTEXT
    return client_security(load_properties(Path(info.security.client_config)))


def secure_zookeeper(zk: KafkaZkClient, security: ClusterSecurity) -> int:
    """Before any process starts: every znode of the cluster (an open cluster's too: Kafka's
    zookeeper-security-migration --zookeeper.acl secure) changeable by the cluster's ZooKeeper identity only
    (`zk` must be logged in as it), and the admin's SCRAM credentials in /config/users/admin. Returns how many
    znodes got secure ACLs."""
    count = zk.migrate_acls(secure=True)
    zk.ensure_persistent_paths()
    config = zk.get_entity_config(USERS_ENTITY, ADMIN_USER)
    if not all(m in config for m in SCRAM_MECHANISMS):
        zk.set_entity_config(USERS_ENTITY, ADMIN_USER, {
            **config, **{m: make_credential(m, security.admin_password).to_text() for m in SCRAM_MECHANISMS}})
    return count

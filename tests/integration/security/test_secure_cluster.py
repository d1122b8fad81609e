"""`minibroker cluster up --security`, end to end with real processes: one secure cluster for the module (three
brokers, one controller), reached with the admin client properties it records in cluster.json.

TLS gRPC with mutual TLS inside the cluster: the project's client produces and consumes over it, a broker with a
certificate from another CA cannot replicate, and hostile connections (plaintext, no / foreign / expired client
certificate, a handshake that never finishes, a wrong SASL password) are refused while everyone else carries on.
ZooKeeper is locked: a process without the cluster's ZooKeeper credentials cannot change /brokers or /controller.
A SCRAM user made through one broker's AlterUserScramCredentials logs in at another.
"""

from __future__ import annotations

import datetime
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kazoo.exceptions import NoAuthError

from client import Admin, Consumer, NewTopic, Producer, TopicPartition
from common.grpc_tls import GrpcSecurity, KeyStore, client_security, read_truststore
from common.properties import load_properties
from common.record import ProducerRecord, build_batch
from local_cluster.certificates import CertificateAuthority, CertificateFiles
from local_cluster.cluster import LocalCluster
from local_cluster.cluster_file import ClusterInfo
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.errors import ErrorCode
from tests.integration.admin_and_cli.test_cli import minibroker
from tests.integration.conftest import REPO_ROOT, WaitUntil, broker_argv
from tests.integration.security.test_kafka_scram_credentials import login_error
from zk import paths
from zk.client import KafkaZkClient
from zk.server import free_port

pytestmark = pytest.mark.integration

HANDSHAKE_TIMEOUT_MS = 2000
FAILED_AUTH_DELAY_MS = 2000
LAG_TIME_MS = 3000


@dataclass
class SecureCluster:
    data_dir: Path
    info: ClusterInfo

    @property
    def security_dir(self) -> Path:
        return self.data_dir / "security"

    @property
    def client_props(self) -> dict[str, str]:
        assert self.info.security is not None
        return load_properties(Path(self.info.security.client_config))

    @property
    def admin(self) -> GrpcSecurity:
        return client_security(self.client_props)

    def log(self, name: str) -> str:
        return (self.data_dir / "logs" / f"{name}.log").read_text(errors="replace")

    def issue(self, ca: CertificateAuthority, name: str, **validity: datetime.datetime) -> CertificateFiles:
        return ca.issue(f"CN={name},OU=outsiders", hosts=["127.0.0.1"], **validity).write_files(
            self.data_dir / "outsiders", name)


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    data_dir = tmp_path_factory.mktemp("secure") / "cluster"
    try:
        up = minibroker("cluster", "up", "--data-dir", str(data_dir), "--brokers", "3", "--controllers", "1",
                        "--security", "--override", f"ssl.handshake.timeout.ms={HANDSHAKE_TIMEOUT_MS}",
                        "--override", f"replica.lag.time.max.ms={LAG_TIME_MS}",
                        "--override", f"connection.failed.authentication.delay.ms={FAILED_AUTH_DELAY_MS}", timeout=120)
        assert up.returncode == 0, up.stderr
        yield SecureCluster(data_dir, ClusterInfo.load(data_dir))
    finally:
        if ClusterInfo.exists(data_dir):
            LocalCluster(data_dir).down(kill=True)


def _metadata(security: GrpcSecurity, address: str) -> pb.MetadataResponse:
    with security.channel(address) as channel:
        return pb_grpc.KafkaClientStub(channel).Metadata(pb.MetadataRequest(), timeout=10)


def _refused(security: GrpcSecurity, address: str) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as refused:
        _metadata(security, address)
    return refused.value.code()  # type: ignore[attr-defined, no-any-return]


def test_the_cluster_file_records_a_secure_cluster(secure: SecureCluster) -> None:
    assert secure.info.security is not None
    props = secure.client_props
    assert props["security.protocol"] == "SASL_SSL" and props["sasl.username"] == "admin"
    assert Path(props["ssl.ca.location"]).is_file()
    assert (secure.security_dir / "zookeeper-jaas.conf").stat().st_mode & 0o077 == 0
    assert "gRPC over TLS" in secure.log("broker-1")
    assert "Kafka protocol, SASL_SSL" in secure.log("broker-1")


def test_the_project_client_produces_and_consumes_over_tls(secure: SecureCluster) -> None:
    factory = secure.admin.channel_factory
    with Admin(secure.info.bootstrap_servers, channel_factory=factory) as admin:
        admin.create_topics([NewTopic("over-tls", num_partitions=3, replication_factor=3)])
    with Producer(secure.info.bootstrap_servers, acks="all", channel_factory=factory) as producer:
        futures = [producer.send("over-tls", f"record-{i}".encode(), partition=i % 3) for i in range(30)]
        producer.flush(30)
        assert all(f.get(30).offset >= 0 for f in futures)
    consumer = Consumer(bootstrap_servers=secure.info.bootstrap_servers, auto_offset_reset="earliest",
                        enable_auto_commit=False, consumer_timeout_ms=15_000, channel_factory=factory)
    with consumer:
        consumer.assign([TopicPartition("over-tls", p) for p in range(3)])
        values = set()
        while len(values) < 30:
            batch = consumer.poll(timeout_ms=10_000)
            assert batch, f"only {len(values)} records came back"
            values |= {r.value for records in batch.values() for r in records}
    assert values == {f"record-{i}".encode() for i in range(30)}
    # The same through the tools: --data-dir alone finds the admin's client properties.
    listed = minibroker("topics", "--data-dir", str(secure.data_dir), "--list")
    assert listed.returncode == 0 and "over-tls" in listed.stdout.split(), listed.stderr


def test_kcat_and_confluent_kafka_connect_with_the_client_properties(secure: SecureCluster) -> None:
    config_file = secure.info.security.client_config if secure.info.security else ""
    kcat = subprocess.run(["kcat", "-F", config_file, "-b", secure.info.kafka_bootstrap_servers, "-L"],
                          capture_output=True, text=True, timeout=60)
    assert kcat.returncode == 0 and "3 brokers" in kcat.stdout, kcat.stderr
    config = {"bootstrap.servers": secure.info.kafka_bootstrap_servers, **secure.client_props}
    producer = KafkaProducer(config)
    producer.produce("from-librdkafka", b"hello", partition=0)
    assert producer.flush(30) == 0
    consumer = KafkaConsumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    try:
        consumer.assign([KafkaTopicPartition("from-librdkafka", 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        message = None
        while message is None or message.error():
            assert time.monotonic() < deadline, "nothing consumed"
            message = consumer.poll(1)
        assert message.value() == b"hello"
    finally:
        consumer.close()


def test_a_scram_user_made_through_one_broker_logs_in_at_another(secure: SecureCluster,
                                                                   wait_until: WaitUntil) -> None:
    """AlterUserScramCredentials through broker-1's Kafka listener, with the admin's client properties:
    broker-3 follows the change notification, so the new user logs in there, and no longer does once the
    credential is deleted (through broker-2)."""
    first, second, third = (b.kafka_address or "" for b in secure.info.brokers[:3])
    carol = {**secure.client_props, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol",
             "sasl.password": "carol-secret"}
    upsertion = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                             b"carol-secret")
    through_first, through_second = (AdminClient({"bootstrap.servers": address, **secure.client_props})
                                     for address in (first, second))
    through_first.alter_user_scram_credentials([upsertion])["carol"].result(30)
    wait_until(lambda: login_error(third, carol) is None, timeout=30, message="carol to log in at broker-3")
    through_second.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)])["carol"].result(30)
    wait_until(lambda: login_error(third, carol) is not None, timeout=30, message="carol's login to be refused")
    refused = login_error(third, carol)
    assert refused is not None and refused.code() == KafkaError._AUTHENTICATION, refused


def test_a_broker_with_a_foreign_ca_certificate_cannot_replicate(secure: SecureCluster) -> None:
    """Broker 4, configured as the others (ZooKeeper identity included) but for a certificate another CA signed:
    it registers, yet neither the controller nor a leader completes a TLS handshake with it, so it never
    becomes a replica in sync and holds no record of the partition it was assigned."""
    foreign = secure.issue(CertificateAuthority.create("CN=rogue CA"), "broker-4")
    props = load_properties(secure.data_dir / "broker-1" / "server.properties")
    grpc_port, kafka_port = free_port(), free_port()
    rogue_dir = secure.data_dir.parent / "rogue-broker-4"  # not the data dir's: `cluster down` leaves it alone
    rogue_dir.mkdir()
    log_dir = rogue_dir / "data"
    props.update({"broker.id": "4", "listeners": f"GRPC://127.0.0.1:{grpc_port},SASL_SSL://127.0.0.1:{kafka_port}",
                  "log.dirs": str(log_dir), "ssl.keystore.location": str(foreign.keystore),
                  # It could not reach the controller anyway; SIGTERM then deregisters it at once.
                  "controlled.shutdown.enable": "false"})
    config = rogue_dir / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    rogue_log = rogue_dir / "broker-4.log"
    with rogue_log.open("wb") as log:
        rogue = subprocess.Popen(broker_argv(config), stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    try:
        with KafkaZkClient.connect(secure.info.zookeeper.connect) as zk:
            deadline = time.monotonic() + 60
            while zk.get_broker(4) is None:
                assert rogue.poll() is None and time.monotonic() < deadline, rogue_log.read_text()[-3000:]
                time.sleep(0.1)
            with Admin(secure.info.bootstrap_servers, channel_factory=secure.admin.channel_factory) as admin:
                admin.create_topics([NewTopic("with-rogue", replica_assignments={0: [1, 4]})])
            with Producer(secure.info.bootstrap_servers, acks=1, channel_factory=secure.admin.channel_factory) as p:
                p.send("with-rogue", b"secret", partition=0).get(30)
            tp = TopicPartition("with-rogue", 0)
            # The leader drops the silent follower from the ISR after replica.lag.time.max.ms.
            while (state := zk.get_partition_state(tp)) is None or 4 in state.isr:
                assert time.monotonic() < deadline + 30, state
                time.sleep(0.2)
            assert state.leader == 1 and state.isr == (1,)
        assert "to broker 4" in secure.log("controller-1001")  # the controller's requests never got through
        assert not list(log_dir.glob("with-rogue-0/*.log")) or all(
            f.stat().st_size == 0 for f in log_dir.glob("with-rogue-0/*.log"))
        # The leader refuses its fetches at the handshake, whatever the request says.
        rogue_client = GrpcSecurity(read_truststore(str(secure.security_dir / "ca.pem")),
                                    KeyStore.load(str(foreign.keystore)))
        assert _refused(rogue_client, secure.info.brokers[0].address) is grpc.StatusCode.UNAVAILABLE
    finally:
        rogue.terminate()
        rogue.wait(30)
    with KafkaZkClient.connect(secure.info.zookeeper.connect) as zk:
        deadline = time.monotonic() + 30
        while zk.get_broker(4) is not None:  # gone, so the next tests' clients are not pointed at it
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_hostile_connections_are_refused_and_others_carry_on(secure: SecureCluster) -> None:
    address = secure.info.brokers[0].address
    ca_pem = read_truststore(str(secure.security_dir / "ca.pem"))
    ca = CertificateAuthority.load(secure.security_dir)
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)
    expired = secure.issue(ca, "expired", not_before=past, not_after=past + datetime.timedelta(days=1))
    foreign = secure.issue(CertificateAuthority.create("CN=foreign CA"), "foreign")
    # A connection that opens and never says a word: cut after ssl.handshake.timeout.ms.
    stalled = socket.create_connection(("127.0.0.1", secure.info.brokers[0].port))
    stalled.settimeout(HANDSHAKE_TIMEOUT_MS / 1000 * 5)
    opened = time.monotonic()
    try:
        assert _refused(GrpcSecurity(), address) is grpc.StatusCode.UNAVAILABLE  # plaintext on a TLS port
        assert _refused(GrpcSecurity(ca_pem), address) is grpc.StatusCode.UNAVAILABLE  # no client certificate
        for outsider in (expired, foreign):
            assert _refused(GrpcSecurity(ca_pem, KeyStore.load(str(outsider.keystore))), address) \
                is grpc.StatusCode.UNAVAILABLE
        props = secure.client_props
        wrong_password = GrpcSecurity(ca_pem, secure.admin.keystore, props["sasl.username"], "not-the-password")
        assert _refused(wrong_password, address) is grpc.StatusCode.UNAUTHENTICATED
        # Meanwhile the admin, with its certificate and password, is served as ever.
        assert len(_metadata(secure.admin, address).brokers) >= 3
        assert stalled.recv(1) == b""
        assert HANDSHAKE_TIMEOUT_MS / 1000 * 0.5 <= time.monotonic() - opened < HANDSHAKE_TIMEOUT_MS / 1000 * 5
    finally:
        stalled.close()
    log = secure.log("broker-1")
    assert "Handshake failed" in log  # gRPC core's line, with OpenSSL's reason
    assert "Failed authentication with ipv4:127.0.0.1:" in log and "user admin" in log


def test_without_the_zookeeper_credentials_nothing_changes(secure: SecureCluster) -> None:
    with KafkaZkClient.connect(secure.info.zookeeper.connect) as outsider:
        raw = outsider._zk
        attempts = [
            lambda: raw.set(paths.broker_id_path(1), b"{}"),
            lambda: raw.delete(paths.broker_id_path(2)),
            lambda: raw.create(paths.broker_id_path(99), b"{}", ephemeral=True),
            lambda: raw.set(paths.CONTROLLER, b"{}"),
            lambda: raw.delete(paths.CONTROLLER),
            lambda: raw.set(paths.CONTROLLER_EPOCH, b"1000"),
            lambda: raw.create("/brokers/topics/planted", b"{}"),
            lambda: raw.get("/config/users/admin"),  # SCRAM credentials: not even readable
        ]
        for attempt in attempts:
            with pytest.raises(NoAuthError):
                attempt()
        assert {b.id for b in outsider.get_all_brokers()} >= {1, 2, 3}
    # The cluster keeps working.
    with Producer(secure.info.bootstrap_servers, acks="all", channel_factory=secure.admin.channel_factory) as p:
        assert p.send("over-tls", b"after the tampering", partition=0).get(30).offset > 0


def test_tools_without_credentials_are_refused(secure: SecureCluster) -> None:
    # --bootstrap-server with no --command-config: a plaintext client on a TLS port.
    plain = subprocess.run([sys.executable, "-m", "minibroker.cli", "topics", "--bootstrap-server",
                            secure.info.bootstrap_servers, "--list"], capture_output=True, text=True, timeout=120,
                           cwd=REPO_ROOT)
    assert plain.returncode != 0 and "Traceback" not in plain.stderr
    # With the admin's properties as --command-config it works.
    assert secure.info.security is not None
    listed = minibroker("topics", "--bootstrap-server", secure.info.bootstrap_servers, "--command-config",
                        secure.info.security.client_config, "--list")
    assert listed.returncode == 0 and "over-tls" in listed.stdout.split(), listed.stderr


def test_grpc_principals_are_authorized_as_kafka_principals(secure: SecureCluster) -> None:
    """The gRPC door's principal is the SASL user (checked against its SCRAM credential): alice, without ACLs,
    may not write; after `minibroker acls --add` she may. The admin (super.users) always could."""
    data_dir = str(secure.data_dir)
    added = minibroker("configs", "--data-dir", data_dir, "--entity-type", "users", "--entity-name", "alice",
                       "--alter", "--add-config", "SCRAM-SHA-512=[password=alice-secret]")
    assert added.returncode == 0, added.stderr
    laptop = secure.issue(CertificateAuthority.load(secure.security_dir), "alice-laptop")
    alice = GrpcSecurity(read_truststore(str(secure.security_dir / "ca.pem")), KeyStore.load(str(laptop.keystore)),
                         "alice", "alice-secret")
    request = pb.ProduceRequest(acks=1, timeout_ms=10_000)
    request.topics.add(name="over-tls").partitions.add(index=0, records=build_batch([ProducerRecord(b"by alice")]))
    address = secure.info.brokers[0].address

    def produce_error() -> int:
        deadline = time.monotonic() + 30
        while True:  # the credential reaches the brokers through /config/changes
            try:
                with alice.channel(address) as channel:
                    response = pb_grpc.KafkaClientStub(channel).Produce(request, timeout=10)
                return int(response.responses[0].partitions[0].error_code)
            except grpc.RpcError as e:
                assert e.code() is grpc.StatusCode.UNAUTHENTICATED and time.monotonic() < deadline, e
                time.sleep(0.2)

    # Partition 0 of over-tls may be led elsewhere: any answer but an authorization failure is not the point.
    assert produce_error() == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    allowed = minibroker("acls", "--data-dir", data_dir, "--add", "--allow-principal", "User:alice",
                         "--operation", "Write", "--topic", "over-tls")
    assert allowed.returncode == 0, allowed.stderr
    deadline = time.monotonic() + 30
    while (error := produce_error()) == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
        assert time.monotonic() < deadline, "the ACL never reached the broker"
        time.sleep(0.2)
    assert error in (ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER)


def _leader(security: GrpcSecurity, address: str, topic: str) -> int:
    with security.channel(address) as channel:
        metadata = pb_grpc.KafkaClientStub(channel).Metadata(pb.MetadataRequest(topics=[topic]), timeout=10)
    return next(p.leader_id for t in metadata.topics if t.name == topic for p in t.partitions if p.partition_index == 0)


def test_a_ca_signed_certificate_without_cluster_action_is_refused_every_cluster_request(
        secure: SecureCluster, wait_until: WaitUntil) -> None:
    """Kafka's KafkaApis asks the authorizer for CLUSTER_ACTION on the Cluster before LeaderAndIsr,
    UpdateMetadata, StopReplica, OffsetsForLeaderEpoch and a Fetch that claims to come from a follower
    (replica_id >= 0): a certificate the cluster's CA signed for CN=alice, with no ACL, passes the TLS handshake
    but gets CLUSTER_AUTHORIZATION_FAILED for each, and the broker's authorizer log names her and the operation.
    Her StopReplica(delete_partitions) deletes nothing and her controller_epoch=999 does not make the broker
    ignore the real controller; the brokers' own certificates (super.users) still replicate."""
    topic = "cluster-only"
    with Admin(secure.info.bootstrap_servers, channel_factory=secure.admin.channel_factory) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])
    with Producer(secure.info.bootstrap_servers, acks="all", channel_factory=secure.admin.channel_factory) as p:
        p.send(topic, b"not for alice", partition=0).get(30)
    alice_files = secure.issue(CertificateAuthority.load(secure.security_dir), "alice")
    alice = GrpcSecurity(read_truststore(str(secure.security_dir / "ca.pem")), KeyStore.load(str(alice_files.keystore)))
    leader = _leader(secure.admin, secure.info.brokers[0].address, topic)
    broker = next(b for b in secure.info.brokers if b.id == leader)
    follower = next(b.id for b in secure.info.brokers if b.id != leader)
    denied = ("Principal = User:CN=alice,OU=outsiders is Denied Operation = ClusterAction from host = 127.0.0.1 on"
              " resource = Cluster:LITERAL:kafka-cluster")
    assert denied not in secure.log(f"broker-{leader}")
    refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with alice.channel(broker.address) as channel:
        cluster = pb_grpc.KafkaClusterStub(channel)
        fetch = pb.FetchRequest(replica_id=follower, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
        fetch.topics.add(topic=topic).partitions.add(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                     log_start_offset=0, partition_max_bytes=1 << 20)
        fetched = pb_grpc.KafkaClientStub(channel).Fetch(fetch, timeout=10)
        assert fetched.error_code == refused and fetched.responses[0].partitions[0].records == b""
        stop = cluster.StopReplica(pb.StopReplicaRequest(
            controller_id=1001, controller_epoch=999, broker_epoch=-1, delete_partitions=True,
            partitions=[pb.TopicPartition(topic_name=topic, partition_index=0)]), timeout=10)
        assert stop.error_code == refused
        state = pb.LeaderAndIsrPartitionState(topic_name=topic, partition_index=0, controller_epoch=999,
                                              leader=follower, leader_epoch=999, isr=[follower], zk_version=999,
                                              replicas=[follower])
        assert cluster.LeaderAndIsr(pb.LeaderAndIsrRequest(controller_id=1001, controller_epoch=999, broker_epoch=-1,
                                                           partition_states=[state]), timeout=10).error_code == refused
        assert cluster.UpdateMetadata(pb.UpdateMetadataRequest(controller_id=1001, controller_epoch=999,
                                                               broker_epoch=-1), timeout=10).error_code == refused
        epochs = pb.OffsetsForLeaderEpochRequest(replica_id=follower)
        epochs.topics.add(topic=topic).partitions.add(partition=0, current_leader_epoch=-1, leader_epoch=0)
        answer = cluster.OffsetsForLeaderEpoch(epochs, timeout=10)
        assert answer.topics[0].partitions[0].error_code == refused
    assert list((Path(broker.log_dir) / f"{topic}-0").glob("*.log")), "her StopReplica deleted the log"
    wait_until(lambda: denied in secure.log(f"broker-{leader}"), timeout=10, message="the authorizer's log line")
    # The real controller (epoch < 999) is still obeyed and the brokers still replicate with their certificates.
    with Admin(secure.info.bootstrap_servers, channel_factory=secure.admin.channel_factory) as admin:
        admin.create_topics([NewTopic("after-alice", num_partitions=1, replication_factor=3)])
    with Producer(secure.info.bootstrap_servers, acks="all", channel_factory=secure.admin.channel_factory) as p:
        assert p.send("after-alice", b"still replicated", partition=0).get(30).offset == 0
        assert p.send(topic, b"still led", partition=0).get(30).offset == 1


def test_the_controller_asks_the_authorizer_before_elect_leaders_and_controlled_shutdown(
        secure: SecureCluster, wait_until: WaitUntil) -> None:
    """Kafka's KafkaApis: ElectLeaders needs ALTER on the Cluster, ControlledShutdown CLUSTER_ACTION. The
    controller reads the brokers' ACLs from ZooKeeper: alice's CA-signed certificate, without an ACL, is refused
    an UNCLEAN election and a ControlledShutdown with CLUSTER_AUTHORIZATION_FAILED, each logged by its
    authorizer with her principal and the operation; the admin (super.users) may elect, a broker's certificate
    may ask to shut down (STALE_BROKER_EPOCH here: an epoch it never had, so nothing moves), and alice may elect
    once an ACL allows her Alter on the cluster."""
    topic = "elect-me"
    with Admin(secure.info.bootstrap_servers, channel_factory=secure.admin.channel_factory) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])
    with KafkaZkClient.connect(secure.info.zookeeper.connect) as zk:
        endpoint = zk.get_controller_endpoint()
    assert endpoint is not None
    truststore = read_truststore(str(secure.security_dir / "ca.pem"))
    alice = GrpcSecurity(truststore, KeyStore.load(str(
        secure.issue(CertificateAuthority.load(secure.security_dir), "alice-at-the-controller").keystore)))
    broker = GrpcSecurity(truststore, KeyStore.load(str(secure.security_dir / "broker-1.pem")))
    election = pb.ElectLeadersRequest(election_type=1, timeout_ms=10_000)
    election.topic_partitions.add(topic=topic, partitions=[0])
    shutdown = pb.ControlledShutdownRequest(broker_id=1, broker_epoch=0)
    refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with alice.channel(endpoint) as channel:
        stub = pb_grpc.KafkaControllerStub(channel)
        assert stub.ElectLeaders(election, timeout=20).error_code == refused
        assert stub.ControlledShutdown(shutdown, timeout=20).error_code == refused
    denied = ("Principal = User:CN=alice-at-the-controller,OU=outsiders is Denied Operation = {} from host ="
              " 127.0.0.1 on resource = Cluster:LITERAL:kafka-cluster")
    for operation in ("Alter", "ClusterAction"):
        wait_until(lambda op=operation: denied.format(op) in secure.log("controller-1001"), timeout=10,
                   message=f"the controller's authorizer to log {operation}")
    with secure.admin.channel(endpoint) as channel:
        elected = pb_grpc.KafkaControllerStub(channel).ElectLeaders(election, timeout=20)
    assert elected.error_code == ErrorCode.NONE
    assert elected.replica_election_results[0].partition_result[0].error_code == ErrorCode.ELECTION_NOT_NEEDED
    with broker.channel(endpoint) as channel:
        answer = pb_grpc.KafkaControllerStub(channel).ControlledShutdown(shutdown, timeout=20)
    assert answer.error_code == ErrorCode.STALE_BROKER_EPOCH
    # An ACL written through a broker reaches the controller through ZooKeeper's change notifications.
    allowed = minibroker("acls", "--data-dir", str(secure.data_dir), "--add", "--allow-principal",
                         "User:CN=alice-at-the-controller,OU=outsiders", "--operation", "Alter", "--cluster")
    assert allowed.returncode == 0, allowed.stderr

    def alice_may_elect() -> bool:
        with alice.channel(endpoint) as channel:
            return bool(pb_grpc.KafkaControllerStub(channel).ElectLeaders(election, timeout=20).error_code
                        == ErrorCode.NONE)

    wait_until(alice_may_elect, timeout=30, message="the controller to follow the ACL")


def test_a_wrong_password_and_an_unknown_user_get_the_same_answer_after_the_delay(secure: SecureCluster) -> None:
    """As on the Kafka listeners (SaslServerAuthenticator, connection.failed.authentication.delay.ms): a wrong
    password for a user that exists and any password for one that does not are refused alike, UNAUTHENTICATED
    with the same message, each after the failed-authentication delay, and logged alike."""
    ca_pem = read_truststore(str(secure.security_dir / "ca.pem"))
    address = secure.info.brokers[0].address
    answers = {}
    for user in ("admin", "nobody-at-all"):
        began = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            _metadata(GrpcSecurity(ca_pem, secure.admin.keystore, user, "not-the-password"), address)
        assert time.monotonic() - began >= FAILED_AUTH_DELAY_MS / 1000, f"{user} was answered before the delay"
        answers[user] = (refused.value.code(), refused.value.details())  # type: ignore[attr-defined]
    assert answers["admin"] == answers["nobody-at-all"] == (
        grpc.StatusCode.UNAUTHENTICATED, "Authentication failed: invalid username or password")
    log = secure.log("broker-1")
    assert all(f"user {user} on gRPC listener GRPC: invalid credentials" in log for user in answers)


def test_the_consoles_replica_state_and_forwarded_events_need_describe_on_the_topic(secure: SecureCluster) -> None:
    """DescribeReplicaState (`minibroker console`'s own request) shows a principal only the partitions, and the
    partition events, of the topics it may Describe, as Metadata does; so does a broker's DescribeEvents, which it
    forwards to the controller as a broker (a cluster action: all the events) and filters for its caller."""
    data_dir = str(secure.data_dir)
    created = minibroker("topics", "--data-dir", data_dir, "--create", "--topic", "watched", "--partitions", "3",
                         "--replication-factor", "3")
    assert created.returncode == 0, created.stderr
    added = minibroker("configs", "--data-dir", data_dir, "--entity-type", "users", "--entity-name", "carol",
                       "--alter", "--add-config", "SCRAM-SHA-512=[password=carol-secret]")
    assert added.returncode == 0, added.stderr
    laptop = secure.issue(CertificateAuthority.load(secure.security_dir), "carol-laptop")
    carol = GrpcSecurity(read_truststore(str(secure.security_dir / "ca.pem")), KeyStore.load(str(laptop.keystore)),
                         "carol", "carol-secret")
    address = secure.info.brokers[0].address

    def described(security: GrpcSecurity) -> tuple[set[str], set[str], set[str]]:
        """(topics of the partitions, topics of the partition events, topics of the controller's partition events)
        broker 1 shows `security`'s principal."""
        deadline = time.monotonic() + 30
        while True:  # a new SCRAM credential reaches the brokers through /config/changes
            try:
                with security.channel(address) as channel:
                    stub = pb_grpc.KafkaClientStub(channel)
                    response = stub.DescribeReplicaState(pb.DescribeReplicaStateRequest(), timeout=10)
                    forwarded = stub.DescribeEvents(pb.DescribeEventsRequest(), timeout=10)
                assert forwarded.error_code == ErrorCode.NONE and forwarded.controller_epoch >= 1, forwarded
                return ({p.topic for p in response.partitions}, {e.topic for e in response.events if e.topic},
                        {e.topic for e in forwarded.events if e.topic})
            except grpc.RpcError as e:
                assert e.code() is grpc.StatusCode.UNAUTHENTICATED and time.monotonic() < deadline, e
                time.sleep(0.2)

    deadline = time.monotonic() + 30
    while "watched" not in described(secure.admin)[0]:  # the super user sees it once broker 1 hosts it
        assert time.monotonic() < deadline, "broker 1 never described its replicas of watched"
        time.sleep(0.2)
    assert "watched" in described(secure.admin)[1]
    assert "watched" in described(secure.admin)[2]  # the controller's Election of its partitions
    assert described(carol) == (set(), set(), set())
    allowed = minibroker("acls", "--data-dir", data_dir, "--add", "--allow-principal", "User:carol",
                         "--operation", "Describe", "--topic", "watched")
    assert allowed.returncode == 0, allowed.stderr
    deadline = time.monotonic() + 30
    while described(carol) != ({"watched"}, {"watched"}, {"watched"}):
        assert time.monotonic() < deadline, f"carol still sees {described(carol)}"
        time.sleep(0.2)

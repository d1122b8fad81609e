"""Two listeners per broker (Kafka's listeners / advertised.listeners / listener.security.protocol.map /
inter.broker.listener.name) on real processes: each client is told the endpoints of the listener it connected
to, and replication and the controller use the inter-broker one. EXTERNAL advertises `localhost`, INTERNAL
`127.0.0.1`, so which listener a metadata answer describes shows in its host names. A tool given the other kind
of listener (gRPC / Kafka) says which one it needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc
import pytest

from client import Admin, Consumer, NewTopic, Producer
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.types import EndPoint, TopicPartition
from tests.integration.admin_and_cli.test_cli import minibroker
from tests.integration.conftest import wait_until_serving
from zk.client import KafkaZkClient
from zk.server import free_port

if TYPE_CHECKING:
    from conftest import StartBroker, StartController, WaitUntil

pytestmark = pytest.mark.integration

TOPIC = "two-listeners"
BROKER_IDS = (1, 2)


def metadata(address: str) -> pb.MetadataResponse:
    with grpc.insecure_channel(address) as channel:
        return pb_grpc.KafkaClientStub(channel).Metadata(pb.MetadataRequest(topics=[TOPIC]), timeout=10)


def test_clients_are_told_the_endpoints_of_the_listener_they_connected_to(
    start_broker: StartBroker, start_controller: StartController, zk_client: KafkaZkClient, wait_until: WaitUntil
) -> None:
    internal = {b: free_port() for b in BROKER_IDS}
    external = {b: free_port() for b in BROKER_IDS}
    for b in BROKER_IDS:
        broker = start_broker(b, wait=False, overrides={
            "listeners": f"INTERNAL://127.0.0.1:{internal[b]},EXTERNAL://127.0.0.1:{external[b]}",
            "advertised.listeners": f"INTERNAL://127.0.0.1:{internal[b]},EXTERNAL://localhost:{external[b]}",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "grpc.listener.names": "INTERNAL,EXTERNAL",
            "replica.fetch.wait.max.ms": "200",
        })
        wait_until_serving(f"127.0.0.1:{external[b]}", broker.process)
    start_controller(overrides={"inter.broker.listener.name": "INTERNAL"})

    registration = zk_client.get_broker(1)
    assert registration is not None
    assert registration.endpoints == (EndPoint("INTERNAL", "127.0.0.1", internal[1]),
                                      EndPoint("EXTERNAL", "localhost", external[1]))

    bootstrap = f"localhost:{external[1]}"
    admin = Admin(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 2)], timeout_ms=30_000)
    finally:
        admin.close()
    tp = TopicPartition(TOPIC, 0)

    def full_isr() -> bool:
        state = zk_client.get_partition_state(tp)
        return state is not None and sorted(state.isr) == [1, 2]

    # The follower reached its leader, which it only knows through the controller's INTERNAL endpoint.
    wait_until(full_isr, message="both replicas in the ISR")

    for b in BROKER_IDS:
        answer = metadata(f"127.0.0.1:{external[b]}")
        assert [(n.node_id, n.host, n.port) for n in answer.brokers] == [
            (i, "localhost", external[i]) for i in BROKER_IDS
        ]
        answer = metadata(f"127.0.0.1:{internal[b]}")
        assert [(n.node_id, n.host, n.port) for n in answer.brokers] == [
            (i, "127.0.0.1", internal[i]) for i in BROKER_IDS
        ]
        [partition] = answer.topics[0].partitions
        assert partition.error_code == 0 and partition.leader_id in BROKER_IDS

    # A client outside sees only EXTERNAL addresses, and acks=all needs the follower to fetch over INTERNAL.
    producer = Producer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    try:
        for i in range(20):
            producer.send(TOPIC, f"v{i}".encode())
        producer.flush(timeout=30)
    finally:
        producer.close()
    consumer = Consumer(TOPIC, bootstrap_servers=f"localhost:{external[2]}", auto_offset_reset="earliest",
                        consumer_timeout_ms=10_000)
    try:
        values = [record.value for record in consumer]
    finally:
        consumer.close()
    assert values[:20] == [f"v{i}".encode() for i in range(20)]
    assert len(values) == 20


WRONG_LISTENER_TOOLS = [
    ("topics", "--list"),
    ("configs", "--describe", "--entity-type", "topics", "--entity-name", "t"),
    ("consumer-groups", "--list"),
    ("get-offsets", "--topic", "t"),
    ("console-consumer", "--topic", "t", "--timeout-ms", "1000"),
    ("console-producer", "--topic", "t"),
    ("perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1"),
    ("health",),
]


def test_a_tool_given_the_other_listener_names_the_one_it_needs(start_broker: StartBroker,
                                                                start_controller: StartController) -> None:
    """The port a Kafka user types first is the Kafka listener: every gRPC tool given it says in one line that it
    needs the gRPC listener and where this broker has it (it printed `UNAVAILABLE ... Socket closed` or waited
    60 s); `acls --bootstrap-server`, which speaks Kafka's protocol as kafka-acls.sh, given the gRPC listener
    says the converse. Each ends while the 60 s its wait used to take have not passed."""
    broker = start_broker(1)
    start_controller()  # the broker learns the cluster's brokers (its own id among them) from the controller
    for tool in WRONG_LISTENER_TOOLS:
        result = minibroker(*tool, "--bootstrap-server", broker.kafka_address, stdin="", timeout=60)
        said = [line for line in (result.stderr or result.stdout).splitlines() if line.strip()]
        assert result.returncode != 0 and "Traceback" not in result.stderr, (tool, result.stdout, result.stderr)
        assert (f"{broker.kafka_address} is a Kafka listener: minibroker {tool[0]} needs a broker's gRPC listener,"
                f" {broker.address} on this broker") in said[-1], (tool, said)
    acls = minibroker("acls", "--list", "--bootstrap-server", broker.address, timeout=60)
    assert acls.returncode != 0
    assert (f"{broker.address} is a gRPC listener: minibroker acls needs a broker's Kafka listener,"
            f" {broker.kafka_address} on this broker") in acls.stdout + acls.stderr, acls.stdout + acls.stderr

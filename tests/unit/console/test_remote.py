"""The rules a --bootstrap-server console learns the rest of the cluster by, through the brokers alone: a broker's
Kafka listener among those it advertises, ZooKeeper as the controller's forwarded DescribeEvents shows it, and
the controller's ring asked again from its start after a failover."""

from __future__ import annotations

from typing import Any

from client.metadata import ClusterMetadata
from client.structs import BrokerMetadata
from common.grpc_tls import PLAINTEXT
from console.collector import CONTROLLER_SOURCE, Collector
from console.remote import ControllerUnavailable, advertised_endpoints, kafka_listener, zookeeper_picture
from proto import minibroker_pb2 as pb
from proto.types import EndPoint

# As docker-compose.yml's brokers describe themselves: two listeners per protocol, in-container names and localhost.
COMPOSE_BROKER = {
    "listeners": "PLAINTEXT://0.0.0.0:29092,PLAINTEXT_HOST://0.0.0.0:9092,GRPC://0.0.0.0:29192,GRPC_HOST://0.0.0.0:9192",
    "advertised.listeners": "PLAINTEXT://broker-2:29092,PLAINTEXT_HOST://localhost:9093,GRPC://broker-2:29192,"
                            "GRPC_HOST://localhost:9193",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT,GRPC:PLAINTEXT,"
                                      "GRPC_HOST:PLAINTEXT",
    "grpc.listener.names": "GRPC,GRPC_HOST",
}


def test_a_compose_brokers_kafka_listener_is_the_one_on_the_host_the_console_reached() -> None:
    endpoints = advertised_endpoints(COMPOSE_BROKER)
    assert kafka_listener(endpoints, ["GRPC", "grpc_host"], "localhost") == "localhost:9093"


def test_without_advertised_listeners_the_listeners_are_advertised() -> None:
    configs = {"listeners": "GRPC://127.0.0.1:9192,PLAINTEXT://127.0.0.1:9092", "grpc.listener.names": "GRPC"}
    assert advertised_endpoints(configs) == (EndPoint("GRPC", "127.0.0.1", 9192), EndPoint("PLAINTEXT", "127.0.0.1",
                                                                                            9092))


def test_without_one_on_that_host_the_first_kafka_listener_is_taken_and_grpc_ones_never() -> None:
    local = (EndPoint("GRPC", "127.0.0.1", 9192), EndPoint("SASL_SSL", "127.0.0.1", 9093, "SASL_SSL"))
    assert kafka_listener(local, ["GRPC"], "broker-1") == "127.0.0.1:9093"
    assert kafka_listener((EndPoint("GRPC", "127.0.0.1", 9193),), ["GRPC"], "127.0.0.1") == ""


def test_zookeeper_is_shown_as_the_controller_reaches_it() -> None:
    response = pb.DescribeEventsResponse(controller_id=1001, controller_epoch=3, zookeeper_servers=[
        pb.DescribeEventsResponse.ZooKeeperServer(connect="zookeeper-1:2181", mode="follower"),
        pb.DescribeEventsResponse.ZooKeeperServer(connect="zookeeper-2:2181", mode="none")])
    assert zookeeper_picture(response) == {
        "servers": [{"name": "zookeeper-1:2181", "connect": "zookeeper-1:2181", "mode": "follower"},
                    {"name": "zookeeper-2:2181", "connect": "zookeeper-2:2181", "mode": "none"}],
        "controller_id": 1001, "controller_epoch": 3}


class _Controllers:
    """The brokers' forwarded answers, as RemoteCluster.describe_events gives them: one controller's ring, then
    another's after a failover."""

    def __init__(self) -> None:
        self.active = 1001
        self.rings: dict[int, list[pb.ReplicationEvent]] = {1001: [], 1002: []}
        self.asked: list[int] = []
        self.away = False

    def describe_events(self, metadata: ClusterMetadata, events_after: int, timeout_s: float) -> Any:
        self.asked.append(events_after)
        if self.away:
            raise ControllerUnavailable("no active controller answers (NOT_CONTROLLER)")
        return pb.DescribeEventsResponse(controller_id=self.active, events=[
            e for e in self.rings[self.active] if e.sequence > events_after])

    def record(self, controller_id: int, kind: str) -> None:
        ring = self.rings[controller_id]
        recorded = sum(len(r) for r in self.rings.values())  # the timeline is in time order
        ring.append(pb.ReplicationEvent(sequence=len(ring) + 1, time_ms=1000 + recorded, kind=kind))


def test_a_new_controllers_ring_is_read_from_its_start() -> None:
    controllers = _Controllers()
    collector = Collector("127.0.0.1:1", PLAINTEXT, remote=controllers)  # type: ignore[arg-type]
    metadata = ClusterMetadata([BrokerMetadata(1, "localhost", 9192)])
    errors: list[str] = []
    for kind in ("ControllerFailover", "BrokerStartup", "Election"):
        controllers.record(1001, kind)
    collector._poll_controller(metadata, errors)
    assert collector._events_after[CONTROLLER_SOURCE] == 3

    # 1002 takes over: its ring starts at 1, below the cursor of 1001's.
    controllers.active = 1002
    controllers.record(1002, "ControllerFailover")
    controllers.record(1002, "BrokerFailure")
    collector._poll_controller(metadata, errors)
    assert controllers.asked == [0, 3, 0]
    assert [(e["source"], e["kind"]) for e in collector._timeline()][3:] == [
        ("controller-1002", "ControllerFailover"), ("controller-1002", "BrokerFailure")]
    assert errors == []

    controllers.away = True
    collector._poll_controller(metadata, errors)
    assert errors == ["controller: no active controller answers (NOT_CONTROLLER)"]

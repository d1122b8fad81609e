"""The rules a --bootstrap-server console finds the rest of the cluster by: ZooKeeper's members in
zookeeper.connect, and each broker's Kafka listener among those its registration advertises."""

from __future__ import annotations

from console.remote import kafka_listeners
from console.zookeeper import connect_members
from proto.types import EndPoint
from zk.paths import BrokerInfo


def test_connect_members_are_the_hosts_without_the_chroot() -> None:
    assert connect_members("zk1:2181, zk2:2182/kafka") == [("zk1:2181", "zk1:2181"), ("zk2:2182", "zk2:2182")]
    assert connect_members("127.0.0.1:2181") == [("127.0.0.1:2181", "127.0.0.1:2181")]


def _compose_broker(broker_id: int, host_port: int) -> BrokerInfo:
    # As docker-compose.yml's brokers: two listeners per protocol, in-container names and localhost.
    return BrokerInfo(broker_id, (EndPoint("PLAINTEXT", f"broker-{broker_id}", 29092),
                                  EndPoint("PLAINTEXT_HOST", "localhost", host_port),
                                  EndPoint("GRPC", f"broker-{broker_id}", 9090),
                                  EndPoint("GRPC_HOST", "localhost", host_port + 100)))


def test_a_compose_brokers_kafka_listener_is_the_one_on_the_host_the_console_reached() -> None:
    brokers = [_compose_broker(2, 9093), _compose_broker(1, 9092)]
    assert kafka_listeners(brokers, ["GRPC", "grpc_host"], {1: "localhost", 2: "localhost"}) == \
        "localhost:9092,localhost:9093"


def test_without_one_on_that_host_the_first_kafka_listener_is_taken_and_grpc_ones_never() -> None:
    local = BrokerInfo(1, (EndPoint("GRPC", "127.0.0.1", 9192), EndPoint("SASL_SSL", "127.0.0.1", 9093, "SASL_SSL")))
    only_grpc = BrokerInfo(2, (EndPoint("GRPC", "127.0.0.1", 9193),))
    assert kafka_listeners([local, only_grpc], ["GRPC"], {1: "broker-1"}) == "127.0.0.1:9093"
    assert kafka_listeners([only_grpc], ["GRPC"], {}) == ""

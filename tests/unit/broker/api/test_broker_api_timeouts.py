"""KafkaApis bounds the requests that wait on ZooKeeper (InitProducerId, Metadata with auto-create, CreateTopics,
config changes) by the request's timeout and zookeeper.connection.timeout.ms: during an outage the ZooKeeper call
retries until reconnected, and the client must get REQUEST_TIMED_OUT naming ZooKeeper, not a wait as long as the
outage. The stores below block until released, as kazoo does while
ZooKeeper is away; the request's deadline is a short gRPC time_remaining."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from broker.api.grpc_apis import KafkaApis
from broker.api.operations import BrokerOperations
from broker.config.kafka_config import KafkaConfig
from broker.security.grpc_authentication import GrpcAuthenticator
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode

DEADLINE_S = 0.2


class Deadline:
    """The part of grpc.aio.ServicerContext the handlers read."""

    def time_remaining(self) -> float:
        return DEADLINE_S

    def peer(self) -> str:
        return "ipv4:127.0.0.1:40000"

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}  # a plaintext call: no certificate


class Outage:
    """Every ZooKeeper-bound call blocks until the outage ends."""

    def __init__(self) -> None:
        self.over = threading.Event()

    def block(self, *_: object) -> Any:
        self.over.wait()
        raise ConnectionError("ZooKeeper was away")


class Cache:
    controller_id = None

    def get_all_topics(self) -> list[str]:
        return []

    def get_topic_metadata(self, names: list[str], listener: str) -> list[object]:
        return []

    def get_alive_brokers(self, listener: str) -> list[object]:
        return []

    def contains(self, tp: object) -> bool:
        return True


class Blocking:
    zookeeper_connected = False  # the broker's session is suspended: ZooKeeper is away

    def __init__(self, outage: Outage) -> None:
        self.generate_producer_id = outage.block
        self.auto_create_topic = outage.block
        self.create_topics = outage.block
        self.incremental_alter_configs = outage.block
        self.delete_topics = outage.block
        self.describe_configs = outage.block


def handle(call: Callable[[KafkaApis], Awaitable[Any]]) -> Any:
    outage = Outage()
    blocking = Blocking(outage)

    async def scenario() -> Any:
        config = KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": "127.0.0.1:1",
                                         "auto.create.topics.enable": "true",
                                         "zookeeper.connection.timeout.ms": str(int(DEADLINE_S * 1000))})
        loop = asyncio.get_running_loop()
        operations = BrokerOperations(config, replica_manager=None, metadata_cache=Cache(),  # type: ignore[arg-type]
                                      admin_manager=blocking, producer_ids=blocking,  # type: ignore[arg-type]
                                      topic_purgatory=None, loop=loop,  # type: ignore[arg-type]
                                      config_admin=blocking)  # type: ignore[arg-type]
        apis = KafkaApis(config, operations=operations, groups=None, transactions=None,  # type: ignore[arg-type]
                         topic_configs=None, zk=None, topic_purgatory=None,  # type: ignore[arg-type]
                         broker_epoch=lambda: 0, cluster_id="c", metrics=None,  # type: ignore[arg-type]
                         listener_name="GRPC", authenticator=GrpcAuthenticator.for_listener(config, "GRPC"),
                         controller_requests=None)  # type: ignore[arg-type]
        try:
            return await asyncio.wait_for(call(apis), 20 * DEADLINE_S)
        except TimeoutError:
            pytest.fail("the handler waited past the request's deadline")
        finally:
            outage.over.set()

    return asyncio.run(scenario())


def test_init_producer_id_times_out_with_request_timed_out() -> None:
    response = handle(lambda apis: apis.InitProducerId(pb.InitProducerIdRequest(), Deadline()))  # type: ignore[arg-type]
    assert (response.error_code, response.producer_id) == (ErrorCode.REQUEST_TIMED_OUT, -1)


def test_metadata_auto_create_times_out_with_request_timed_out() -> None:
    request = pb.MetadataRequest(topics=["new-topic"], allow_auto_topic_creation=True)
    response = handle(lambda apis: apis.Metadata(request, Deadline()))  # type: ignore[arg-type]
    assert [(t.name, t.error_code) for t in response.topics] == [("new-topic", ErrorCode.REQUEST_TIMED_OUT)]


ZOOKEEPER_AWAY = ("ZooKeeper at 127.0.0.1:1 did not answer within 200 ms: this broker is not connected to it"
                  " (unreachable)")


def test_create_topics_says_zookeeper_did_not_answer(caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's ZooKeeperClient stops waiting for a connection after zookeeper.connection.timeout.ms; the topic's
    answer and the broker's log say ZooKeeper is what did not answer (the tool waited 60 s for REQUEST_TIMED_OUT
    or DEADLINE_EXCEEDED that named nothing)."""
    request = pb.CreateTopicsRequest(timeout_ms=30_000)
    request.topics.add(name="t", num_partitions=1, replication_factor=1)
    response = handle(lambda apis: apis.CreateTopics(request, Deadline()))  # type: ignore[arg-type]
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("t", ErrorCode.REQUEST_TIMED_OUT, ZOOKEEPER_AWAY)]
    assert f"CreateTopics: {ZOOKEEPER_AWAY}" in caplog.text


def test_config_changes_say_zookeeper_did_not_answer(caplog: pytest.LogCaptureFixture) -> None:
    request = pb.IncrementalAlterConfigsRequest()
    resource = request.resources.add(resource_type=2, resource_name="t")
    resource.configs.add(name="retention.ms", config_operation=0, value="1000")
    response = handle(lambda apis: apis.IncrementalAlterConfigs(request, Deadline()))  # type: ignore[arg-type]
    assert [(r.resource_name, r.error_code, r.error_message) for r in response.responses] == [
        ("t", ErrorCode.REQUEST_TIMED_OUT, ZOOKEEPER_AWAY)]
    assert f"IncrementalAlterConfigs: {ZOOKEEPER_AWAY}" in caplog.text


def test_delete_topics_and_describe_configs_say_zookeeper_did_not_answer(caplog: pytest.LogCaptureFixture) -> None:
    """Every request that waits on ZooKeeper is bounded so, not only the writes: a connection answers in order, so
    one DescribeConfigs waiting out an outage held up every later request on it."""
    deleted = handle(lambda apis: apis.DeleteTopics(pb.DeleteTopicsRequest(topic_names=["t"]),  # type: ignore[arg-type]
                                                    Deadline()))
    assert [(t.name, t.error_code, t.error_message) for t in deleted.responses] == [
        ("t", ErrorCode.REQUEST_TIMED_OUT, ZOOKEEPER_AWAY)]
    request = pb.DescribeConfigsRequest()
    request.resources.add(resource_type=2, resource_name="t")
    described = handle(lambda apis: apis.DescribeConfigs(request, Deadline()))  # type: ignore[arg-type]
    assert [(r.resource_name, r.error_code, r.error_message) for r in described.results] == [
        ("t", ErrorCode.REQUEST_TIMED_OUT, ZOOKEEPER_AWAY)]
    assert f"DeleteTopics: {ZOOKEEPER_AWAY}" in caplog.text and f"DescribeConfigs: {ZOOKEEPER_AWAY}" in caplog.text

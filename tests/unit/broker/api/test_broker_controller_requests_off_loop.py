"""LeaderAndIsr and StopReplica run off the event loop (Kafka's request handler threads: the network threads never
wait on disk), one at a time in arrival order.

Creating a 1000-partition topic used to freeze every connection of a broker for seconds, because log creation and
leader-epoch checkpoint fsyncs ran on the loop. The replica manager below blocks inside the request until the test,
running on the loop, answers a probe: the probe can only be answered if the loop is free while the request is
being applied."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from broker.api.grpc_apis import KafkaApis
from broker.api.operations import BrokerOperations
from broker.config.kafka_config import KafkaConfig
from broker.replication.delayed_fetch import LogReadResult
from broker.replication.replica_manager import ControllerResponse
from broker.security.grpc_authentication import GrpcAuthenticator
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode
from proto.types import TopicPartition

# How long the blocked request waits for the probe before giving up (only reached when the loop is blocked).
PROBE_WAIT_S = 5.0


class Context:
    """The part of grpc.aio.ServicerContext the controller handlers read: a plaintext call, no credential needed."""

    def time_remaining(self) -> None:
        return None

    def peer(self) -> str:
        return "ipv4:127.0.0.1:40000"

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()


class BlockingReplicaManager:
    """Applies a controller request only once the loop has answered the probe (or PROBE_WAIT_S passed)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.probe_answered = threading.Event()
        self.applied: list[tuple[str, int, bool]] = []  # (request, thread, probe answered meanwhile)

    def get_partition(self, tp: object) -> None:
        return None

    def _apply(self, name: str) -> ControllerResponse:
        self.entered.set()
        answered = self.probe_answered.wait(PROBE_WAIT_S)
        self.applied.append((name, threading.get_ident(), answered))
        return ControllerResponse(ErrorCode.NONE, {})

    def become_leader_or_follower(self, *_: Any) -> ControllerResponse:
        return self._apply("LeaderAndIsr")

    def stop_replicas(self, *_: Any) -> ControllerResponse:
        return self._apply("StopReplica")

    def maybe_update_metadata_cache(self, *_: Any) -> ErrorCode:
        self.applied.append(("UpdateMetadata", threading.get_ident(), True))
        return ErrorCode.NONE


class Zk:
    def get_topic_config(self, topic: str) -> dict[str, str]:
        return {}


class TopicConfigs:
    def load(self, topic: str, overrides: dict[str, str]) -> None:
        return None


def run(call: Callable[[KafkaApis], Awaitable[Any]], manager: BlockingReplicaManager,
        then: Callable[[KafkaApis], Awaitable[Any]] | None = None) -> tuple[Any, int]:
    """Send the request, answer the probe on the loop once the request is being applied; (response, loop thread).
    With `then`, that request is sent while the first is being applied, before the probe is answered."""
    async def scenario() -> tuple[Any, int]:
        config = KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": "127.0.0.1:1"})
        operations = BrokerOperations(config, replica_manager=manager, metadata_cache=None,  # type: ignore[arg-type]
                                      admin_manager=None, producer_ids=None,  # type: ignore[arg-type]
                                      topic_purgatory=None, loop=asyncio.get_running_loop())  # type: ignore[arg-type]
        with ThreadPoolExecutor(1) as controller_requests:
            apis = KafkaApis(config, operations=operations, groups=None, transactions=None,  # type: ignore[arg-type]
                             topic_configs=TopicConfigs(), zk=Zk(), topic_purgatory=None,  # type: ignore[arg-type]
                             broker_epoch=lambda: 0, cluster_id="c", metrics=None,  # type: ignore[arg-type]
                             listener_name="GRPC", authenticator=GrpcAuthenticator.for_listener(config, "GRPC"),
                             controller_requests=controller_requests)
            request = asyncio.create_task(call(apis))  # type: ignore[arg-type]
            deadline = asyncio.get_running_loop().time() + 2 * PROBE_WAIT_S
            while not manager.entered.is_set() and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.001)
            if then is not None:
                second = asyncio.create_task(then(apis))  # type: ignore[arg-type]
                for _ in range(10):
                    await asyncio.sleep(0)  # every chance to be applied, were it not queued behind the first
            manager.probe_answered.set()  # the probe: the loop ran while the request was being applied
            response = await request
            if then is not None:
                await second
            operations.pools.shutdown()
            return response, threading.get_ident()

    return asyncio.run(scenario())


def test_leader_and_isr_is_applied_on_a_handler_thread_while_the_loop_serves() -> None:
    manager = BlockingReplicaManager()
    request = pb.LeaderAndIsrRequest(controller_id=0, controller_epoch=1, partition_states=[
        pb.LeaderAndIsrPartitionState(topic_name="t", partition_index=0, controller_epoch=1, leader=1,
                                      leader_epoch=0, isr=[1], replicas=[1], is_new=True)])
    response, loop_thread = run(lambda apis: apis.LeaderAndIsr(request, Context()), manager)  # type: ignore[arg-type]
    assert response.error_code == ErrorCode.NONE
    [(name, thread, answered)] = manager.applied
    assert name == "LeaderAndIsr"
    assert thread != loop_thread, "LeaderAndIsr was applied on the event loop"
    assert answered, "the loop could not answer a probe while LeaderAndIsr was applied"


def test_stop_replica_is_applied_on_a_handler_thread_while_the_loop_serves() -> None:
    manager = BlockingReplicaManager()
    request = pb.StopReplicaRequest(controller_id=0, controller_epoch=1, delete_partitions=True,
                                    partitions=[pb.TopicPartition(topic_name="t", partition_index=0)])
    response, loop_thread = run(lambda apis: apis.StopReplica(request, Context()), manager)  # type: ignore[arg-type]
    assert response.error_code == ErrorCode.NONE
    [(name, thread, answered)] = manager.applied
    assert name == "StopReplica"
    assert thread != loop_thread, "StopReplica was applied on the event loop"
    assert answered, "the loop could not answer a probe while StopReplica was applied"


def test_update_metadata_is_applied_after_the_leader_and_isr_before_it() -> None:
    """Kafka applies a controller's requests in the order its connection carried them: an UpdateMetadata that
    names this broker leader must not reach clients before the LeaderAndIsr that made it one was applied (a
    produce would get UNKNOWN_TOPIC_OR_PARTITION from the leader the metadata named)."""
    manager = BlockingReplicaManager()
    leader_and_isr = pb.LeaderAndIsrRequest(controller_id=0, controller_epoch=1, partition_states=[
        pb.LeaderAndIsrPartitionState(topic_name="t", partition_index=0, controller_epoch=1, leader=1,
                                      leader_epoch=0, isr=[1], replicas=[1], is_new=True)])
    update_metadata = pb.UpdateMetadataRequest(controller_id=0, controller_epoch=1)
    run(lambda apis: apis.LeaderAndIsr(leader_and_isr, Context()), manager,  # type: ignore[arg-type]
        then=lambda apis: apis.UpdateMetadata(update_metadata, Context()))  # type: ignore[arg-type]
    assert [name for name, _, _ in manager.applied] == ["LeaderAndIsr", "UpdateMetadata"]


class RecordsRead:
    """A fetched file slice that says on which thread its bytes were read."""

    size = 3

    def __init__(self) -> None:
        self.read_on: list[int] = []

    def read(self) -> bytes:
        self.read_on.append(threading.get_ident())
        return b"abc"


def test_a_grpc_fetch_reads_its_records_on_a_disk_thread_not_the_event_loop() -> None:
    """Followers and gRPC consumers get their records in the protobuf response: the pread of the segment happens on
    the broker's disk pool, never on the loop."""
    records = RecordsRead()

    async def scenario() -> tuple[pb.FetchResponse, int]:
        config = KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": "127.0.0.1:1"})
        operations = BrokerOperations(config, replica_manager=None, metadata_cache=None,  # type: ignore[arg-type]
                                      admin_manager=None, producer_ids=None,  # type: ignore[arg-type]
                                      topic_purgatory=None, loop=asyncio.get_running_loop())  # type: ignore[arg-type]

        async def fetch(*_: object) -> list[tuple[TopicPartition, LogReadResult]]:
            return [(TopicPartition("t", 0), LogReadResult(ErrorCode.NONE, records, 10, 0))]  # type: ignore[arg-type]

        operations.fetch = fetch  # type: ignore[method-assign]
        try:
            apis = KafkaApis(config, operations=operations, groups=None, transactions=None,  # type: ignore[arg-type]
                             topic_configs=TopicConfigs(), zk=Zk(), topic_purgatory=None,  # type: ignore[arg-type]
                             broker_epoch=lambda: 0, cluster_id="c", metrics=None,  # type: ignore[arg-type]
                             listener_name="GRPC", authenticator=GrpcAuthenticator.for_listener(config, "GRPC"),
                             controller_requests=None)  # type: ignore[arg-type]
            request = pb.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
            request.topics.add(topic="t").partitions.add(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
            response = await apis._fetch(request, Context())  # type: ignore[arg-type]
        finally:
            operations.pools.shutdown()
        return response, threading.get_ident()

    response, loop_thread = asyncio.run(scenario())
    assert response.responses[0].partitions[0].records == b"abc"
    assert records.read_on and loop_thread not in records.read_on


class ReadOn:
    """A controller request whose per-partition list says on which threads it was read."""

    def __init__(self, request: Any, field: str) -> None:
        self._request = request
        self._field = field
        self.read_on: set[int] = set()

    def __getattr__(self, name: str) -> Any:
        if name == self._field:
            self.read_on.add(threading.get_ident())
        return getattr(self._request, name)


def test_a_controller_requests_partitions_are_read_on_the_handler_thread_not_the_loop() -> None:
    """A new topic's LeaderAndIsr names each of its partitions, an UpdateMetadata after a fail-over every partition
    of the cluster, a deleted topic's StopReplica each of its partitions: decoding and answering thousands held the
    loop for a quarter of a second at 1,000 partitions (asyncio's slow-callback report)."""
    state = pb.LeaderAndIsrPartitionState(topic_name="t", partition_index=0, controller_epoch=1, leader=1,
                                          leader_epoch=0, isr=[1], replicas=[1], is_new=True)
    requests = {
        "LeaderAndIsr": ReadOn(pb.LeaderAndIsrRequest(controller_id=0, controller_epoch=1, partition_states=[state]),
                               "partition_states"),
        "UpdateMetadata": ReadOn(pb.UpdateMetadataRequest(controller_id=0, controller_epoch=1, partition_states=[
            pb.UpdateMetadataPartitionState(topic_name="t", partition_index=0, leader=1, isr=[1], replicas=[1])]),
            "partition_states"),
        "StopReplica": ReadOn(pb.StopReplicaRequest(controller_id=0, controller_epoch=1, delete_partitions=True,
                                                    partitions=[pb.TopicPartition(topic_name="t", partition_index=0)]),
                              "partitions"),
    }
    for name, request in requests.items():
        manager = BlockingReplicaManager()
        manager.entered.set()  # nothing to probe here: only where the partitions are read
        manager.probe_answered.set()

        class Purgatory:
            def check_and_complete(self, _key: object) -> None:
                return None

        def call(apis: KafkaApis, name: str = name, request: ReadOn = request) -> Awaitable[Any]:
            apis._topic_purgatory = Purgatory()  # type: ignore[assignment]
            return getattr(apis, name)(request, Context())  # type: ignore[no-any-return]

        response, loop_thread = run(call, manager)
        assert response.error_code == ErrorCode.NONE
        assert request.read_on and loop_thread not in request.read_on, f"{name}'s partitions were read on the loop"

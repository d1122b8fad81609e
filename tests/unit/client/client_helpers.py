"""Small fakes shared by the client tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from client.metadata import ClusterMetadata
from client.structs import BrokerMetadata, PartitionMetadata
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode, KafkaError


def cluster(topics: dict[str, int], leaders: dict[tuple[str, int], int] | None = None,
            nodes: tuple[int, ...] = (1, 2, 3)) -> ClusterMetadata:
    """Metadata with brokers `nodes`; partition p of a topic led by nodes[p % len(nodes)] unless `leaders` says."""
    leaders = leaders or {}
    partitions = [
        PartitionMetadata(t, p, leaders.get((t, p), nodes[p % len(nodes)]), 0, nodes, nodes, (), 0)
        for t, n in topics.items()
        for p in range(n)
    ]
    return ClusterMetadata([BrokerMetadata(n, "127.0.0.1", 9000 + n) for n in nodes], partitions, controller_id=1,
                           cluster_id="test")


class FakeFuture:
    """A ResponseFuture the test settles by hand."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[FakeFuture], object]] = []
        self._done = False
        self._response: object = None
        self._error: Exception | None = None

    def done(self) -> bool:
        return self._done

    def result(self, timeout_s: float | None = None) -> object:
        assert self._done, "not answered yet"
        if self._error is not None:
            raise self._error
        return self._response

    def add_done_callback(self, fn: Callable[[FakeFuture], object]) -> None:
        if self._done:
            fn(self)
        else:
            self._callbacks.append(fn)

    def cancel(self) -> None:
        pass

    def settle(self, response: object = None, error: Exception | None = None) -> None:
        self._response, self._error, self._done = response, error, True
        for fn in self._callbacks:
            fn(self)


class RecordingStub:
    """Stands in for a KafkaClientStub: `lambda stub: stub.Produce` picks the method's name."""

    def __getattr__(self, name: str) -> str:
        return name


class FakeConnection:
    """Records every call; async calls get a FakeFuture, blocking ones an answer from `answers`. A Produce
    request comes as its bytes (BrokerConnection.produce_bytes) and is recorded parsed, as a broker reads it."""

    produce_bytes = "Produce"

    def __init__(self, address: str) -> None:
        self.address = address
        self.calls: list[tuple[str, Any, FakeFuture]] = []
        self.answers: dict[str, list[object]] = {}

    def call_async(self, rpc, request: object, timeout_ms: float | None = None) -> FakeFuture:  # type: ignore[no-untyped-def]
        future = FakeFuture()
        if isinstance(request, bytes):
            request = pb.ProduceRequest.FromString(request)
        self.calls.append((rpc(RecordingStub()), request, future))
        return future

    def call(self, rpc, request: object, timeout_ms: float | None = None) -> object:  # type: ignore[no-untyped-def]
        answers = self.answers.get(rpc(RecordingStub()))
        if not answers:  # nothing scripted: the broker is unreachable
            raise KafkaError(f"{self.address} is down", ErrorCode.NETWORK_EXCEPTION)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class FakePool:
    request_timeout_ms = 30_000

    def __init__(self) -> None:
        self.connections: dict[str, FakeConnection] = {}

    def get(self, address: str) -> FakeConnection:
        return self.connections.setdefault(address, FakeConnection(address))

    def in_backoff(self, address: str) -> bool:
        return False


class FakeMetadata:
    """What Sender and Fetcher use of Metadata, with a fixed cluster and a record of update requests."""

    def __init__(self, cluster: ClusterMetadata) -> None:
        self.cluster = cluster
        self.pool = FakePool()
        self.updates_requested = 0
        self.topics: set[str] = set()
        self.any_answers: dict[str, list[object]] = {}
        self.any_calls: list[tuple[str, object]] = []

    def add_topics(self, *topics: str) -> None:
        self.topics.update(topics)

    def request_update(self) -> None:
        self.updates_requested += 1

    def time_to_next_update(self, now_ms: float) -> float:
        return float("inf")

    def maybe_refresh(self, timeout_ms: float | None = None) -> bool:
        return False

    def call_any(self, rpc, request: object, timeout_ms: float | None = None) -> object:  # type: ignore[no-untyped-def]
        name = rpc(RecordingStub())
        self.any_calls.append((name, request))
        answer = self.any_answers[name].pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def connection(self, node_id: int) -> FakeConnection:
        return self.pool.get(self.cluster.brokers[node_id].address)

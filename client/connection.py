"""Connections to brokers: one gRPC channel per broker address, deadlines on every call.

The API is synchronous (call) or future-based (call_async) for the client's
threads; underneath, one asyncio I/O thread per process owns the channels and
makes the calls (IoThread says why not gRPC's sync futures).

Every call carries a deadline (request_timeout_ms unless the caller gives a
shorter one), so no call hangs on a dead or paused broker. Transport failures
become the KafkaError a Kafka client would see (NETWORK_EXCEPTION,
REQUEST_TIMED_OUT, ...), so callers handle one error type and read its
`retriable` / `invalid_metadata` flags instead of inspecting gRPC status codes.

Channels reconnect by themselves; their reconnect backoff is set from
reconnect_backoff_ms / reconnect_backoff_max_ms so a restarted broker is found
again within a second, not after gRPC's default two minutes. On top of that
each connection remembers its consecutive failures, so a client picking "any
broker" tries the healthy ones first (Kafka's leastLoadedNode skips nodes in
reconnect backoff).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Generic, TypeAlias, TypeVar

import grpc

from client.retry import exponential_backoff_ms
from client.structs import format_address
from common.limits import MESSAGE_SIZE_OPTIONS
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.errors import ErrorCode, KafkaError

# The project's client speaks gRPC: a broker's default GRPC listener (9092 is the Kafka listener's, as in Kafka).
DEFAULT_PORT = 9192

Req = TypeVar("Req")
Resp = TypeVar("Resp")
# Picks the method to call from a stub, e.g. `lambda stub: stub.Metadata`. A string because grpc's
# classes are generic only in their type stubs.
Rpc: TypeAlias = "Callable[[pb_grpc.KafkaClientAsyncStub], grpc.aio.UnaryUnaryMultiCallable[Req, Resp]]"

# KafkaClient.Produce's path, for the call that sends a request's bytes as they are (proto/produce_request.py).
_PRODUCE_METHOD = "/{}/{}".format(*pb.DESCRIPTOR.services_by_name["KafkaClient"].methods_by_name["Produce"]
                                  .full_name.rsplit(".", 1))


def parse_bootstrap_servers(servers: str | Iterable[str]) -> list[str]:
    """"host:port,host:port" (or a list of them) as "host:port" strings; the port defaults to 9192 (gRPC).

    Accepts Kafka's listener form ("PLAINTEXT://host:port") and bracketed IPv6.
    """
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[str] = []
    for item in items:
        text = item.strip()
        if "://" in text:
            text = text.split("://", 1)[1]
        if not text:
            continue
        if text.startswith("["):
            host, _, rest = text[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else ""
        elif text.count(":") == 1:
            host, port = text.split(":")
        else:
            host, port = text, ""
        if port and not port.isdigit():
            raise ValueError(f"Invalid url in bootstrap.servers: {item}")
        out.append(format_address(host, int(port) if port else DEFAULT_PORT))
    if not out:
        raise ValueError("No resolvable bootstrap urls given in bootstrap.servers")
    return out


def channel_options(reconnect_backoff_ms: int, reconnect_backoff_max_ms: int) -> list[tuple[str, int]]:
    return [
        *MESSAGE_SIZE_OPTIONS,
        ("grpc.initial_reconnect_backoff_ms", reconnect_backoff_ms),
        ("grpc.min_reconnect_backoff_ms", reconnect_backoff_ms),
        ("grpc.max_reconnect_backoff_ms", reconnect_backoff_max_ms),
    ]


_STATUS_ERRORS = {
    grpc.StatusCode.UNAVAILABLE: ErrorCode.NETWORK_EXCEPTION,
    grpc.StatusCode.CANCELLED: ErrorCode.NETWORK_EXCEPTION,
    grpc.StatusCode.DEADLINE_EXCEEDED: ErrorCode.REQUEST_TIMED_OUT,
    # gRPC's own size check: the request or response exceeded common.limits.MAX_MESSAGE_BYTES.
    grpc.StatusCode.RESOURCE_EXHAUSTED: ErrorCode.MESSAGE_TOO_LARGE,
    grpc.StatusCode.UNIMPLEMENTED: ErrorCode.UNSUPPORTED_VERSION,
    grpc.StatusCode.INVALID_ARGUMENT: ErrorCode.INVALID_REQUEST,
}


def error_from_status(status: grpc.StatusCode, details: str | None, address: str) -> KafkaError:
    """The KafkaError for a failed gRPC call. Anything not listed (UNKNOWN, INTERNAL: the broker
    raised) is UNKNOWN_SERVER_ERROR, which is not retriable, so a broker bug cannot cause a retry storm."""
    code = _STATUS_ERRORS.get(status, ErrorCode.UNKNOWN_SERVER_ERROR)
    return KafkaError(f"{status.name} from {address}: {details or ''}".rstrip(": "), code)


def _translate(exc: grpc.RpcError, address: str) -> KafkaError:
    status = exc.code() if callable(getattr(exc, "code", None)) else grpc.StatusCode.UNKNOWN
    details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
    return error_from_status(status, details, address)


class IoThread:
    """The asyncio loop, on a daemon thread, that makes every gRPC call of the process's clients.

    Not the sync API's futures: a sync channel with no call in flight starts a
    polling thread for the next one, which doubles the latency of a call
    (~1.8 ms against ~0.9 ms for 16 KiB here), and a producer with one batch
    in flight per partition pays it on every request. The loop also starts
    calls in the order they are submitted, so an idempotent producer's batches
    leave in sequence order (gRPC still does not promise the broker handles
    them in that order, which is why client.retry retries a reordered batch).

    One loop per process, shared by every client and never closed: grpc.aio
    hands completions from one process-wide poller to the loop each call was
    made on, and may still hand one over for a channel whose close() has
    returned; a client's own loop, closed with the client, then made that an
    "Event loop is closed" error on another client's loop.
    """

    _shared: IoThread | None = None
    _shared_lock = threading.Lock()

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    @classmethod
    def shared(cls) -> IoThread:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls("minibroker-client-io")
            return cls._shared

    def submit(self, coroutine: Coroutine[Any, Any, Resp]) -> concurrent.futures.Future[Resp]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, fn: Callable[[], Resp]) -> Resp:
        """`fn()` on the loop's thread (gRPC's aio objects must be made there)."""

        async def call() -> Resp:
            return fn()

        return self.submit(call()).result()


class ResponseFuture(Generic[Resp]):
    """A call in flight; result() raises KafkaError, never grpc.RpcError."""

    def __init__(self, future: concurrent.futures.Future[Resp], connection: BrokerConnection) -> None:
        self._future = future
        self._connection = connection

    def done(self) -> bool:
        return self._future.done()

    def wait(self, timeout_s: float) -> bool:
        """Until the call ends or `timeout_s` passes: whether it ended."""
        concurrent.futures.wait([self._future], max(timeout_s, 0))
        return self._future.done()

    def cancel(self) -> None:
        self._future.cancel()

    def result(self, timeout_s: float | None = None) -> Resp:
        address = self._connection.address
        try:
            response = self._future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            raise KafkaError(f"no answer from {address} yet", ErrorCode.REQUEST_TIMED_OUT) from None
        except (concurrent.futures.CancelledError, asyncio.CancelledError):
            raise KafkaError(f"call to {address} cancelled", ErrorCode.NETWORK_EXCEPTION) from None
        except grpc.RpcError as exc:
            error = _translate(exc, address)
            self._connection.record_failure(error)
            raise error from None
        self._connection.record_success()
        return response

    def add_done_callback(self, fn: Callable[[ResponseFuture[Resp]], None]) -> None:
        """`fn(self)` once the call ends, on the I/O thread (or here if it already has): it must not block."""
        self._future.add_done_callback(lambda _: fn(self))


class BrokerConnection:
    """One broker's channel and stub; every call has a deadline."""

    def __init__(
        self,
        address: str,
        io: IoThread,
        *,
        request_timeout_ms: int,
        reconnect_backoff_ms: int,
        reconnect_backoff_max_ms: int,
        channel_factory: Callable[..., grpc.aio.Channel] = grpc.aio.insecure_channel,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.address = address
        self.request_timeout_ms = request_timeout_ms
        self._io = io
        self._reconnect_backoff_ms = reconnect_backoff_ms
        self._reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self._clock = clock
        self._channel = io.run(lambda: channel_factory(
            address, options=channel_options(reconnect_backoff_ms, reconnect_backoff_max_ms)))
        self.stub = pb_grpc.KafkaClientStub(self._channel)
        # Produce with the request already serialized (no serializer): the producer writes its bytes itself.
        self.produce_bytes: grpc.aio.UnaryUnaryMultiCallable[bytes, pb.ProduceResponse] = self._channel.unary_unary(
            _PRODUCE_METHOD, request_serializer=None, response_deserializer=pb.ProduceResponse.FromString)
        self.failures = 0
        self._blackout_until = 0.0

    def _timeout_s(self, timeout_ms: float | None, long_poll: bool) -> float:
        ms: float
        if timeout_ms is None:
            ms = self.request_timeout_ms
        else:
            ms = timeout_ms if long_poll else min(timeout_ms, self.request_timeout_ms)
        return max(ms, 1) / 1000

    def call(self, rpc: Rpc[Req, Resp], request: Req, timeout_ms: float | None = None) -> Resp:
        """A blocking call with a deadline of min(timeout_ms, request_timeout_ms). Not from the I/O thread."""
        return self.call_async(rpc, request, timeout_ms).result()

    def call_async(self, rpc: Rpc[Req, Resp], request: Req, timeout_ms: float | None = None, *,
                   long_poll: bool = False) -> ResponseFuture[Resp]:
        """`long_poll`: the broker may rightly hold the request longer than request_timeout_ms (a JoinGroup
        waits for the whole group, up to its rebalance timeout), so `timeout_ms` is the deadline as given."""
        method = rpc(self.stub)
        timeout_s = self._timeout_s(timeout_ms, long_poll)

        async def invoke() -> Resp:
            return await method(request, timeout=timeout_s)

        return ResponseFuture(self._io.submit(invoke()), self)

    def record_failure(self, error: KafkaError) -> None:
        # Only transport failures say the broker is unreachable; an error answer proves it is up.
        if error.code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT):
            self.failures += 1
            self._blackout_until = self._clock() * 1000 + exponential_backoff_ms(
                self.failures, self._reconnect_backoff_ms, self._reconnect_backoff_max_ms)

    def record_success(self) -> None:
        self.failures = 0
        self._blackout_until = 0.0

    def in_backoff(self) -> bool:
        """True while the broker failed recently: pick another one if there is any."""
        return self._clock() * 1000 < self._blackout_until

    def close(self) -> None:
        """Cancels the calls in flight: their futures fail with NETWORK_EXCEPTION."""
        with contextlib.suppress(concurrent.futures.TimeoutError):
            self._io.submit(self._channel.close()).result(5)


class ConnectionPool:
    """BrokerConnections by address, created on first use, shared by a client's threads, called on IoThread.shared()."""

    def __init__(
        self,
        *,
        request_timeout_ms: int,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        channel_factory: Callable[..., grpc.aio.Channel] = grpc.aio.insecure_channel,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.request_timeout_ms = request_timeout_ms
        self._settings = dict(request_timeout_ms=request_timeout_ms, reconnect_backoff_ms=reconnect_backoff_ms,
                              reconnect_backoff_max_ms=reconnect_backoff_max_ms)
        self._channel_factory = channel_factory
        self._clock = clock
        self._connections: dict[str, BrokerConnection] = {}
        self._lock = threading.Lock()
        self._closed = False

    def get(self, address: str) -> BrokerConnection:
        connection = self._connections.get(address)
        if connection is not None:
            return connection
        with self._lock:
            if self._closed:
                raise KafkaError("client is closed", ErrorCode.NETWORK_EXCEPTION)
            connection = self._connections.get(address)
            if connection is None:
                connection = BrokerConnection(address, IoThread.shared(), channel_factory=self._channel_factory,
                                              clock=self._clock, **self._settings)
                self._connections[address] = connection
            return connection

    def in_backoff(self, address: str) -> bool:
        connection = self._connections.get(address)
        return connection is not None and connection.in_backoff()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections = list(self._connections.values())
            self._connections.clear()
        for connection in connections:
            connection.close()

"""Bootstrap parsing, gRPC status -> Kafka error translation, deadlines, and failure backoff of connections."""

from __future__ import annotations

import time

import grpc
import pytest

from client.connection import (
    BrokerConnection,
    ConnectionPool,
    channel_options,
    error_from_status,
    parse_bootstrap_servers,
)
from common.limits import MAX_MESSAGE_BYTES
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode, KafkaError
from tests.fakes import FakeMonotonic


def test_bootstrap_servers_in_every_spelling() -> None:
    assert parse_bootstrap_servers("a:1, b:2,c") == ["a:1", "b:2", "c:9192"]
    assert parse_bootstrap_servers(["PLAINTEXT://h:9093", "[::1]:9094", "[fe80::1]"]) == [
        "h:9093", "[::1]:9094", "[fe80::1]:9192"]
    with pytest.raises(ValueError):
        parse_bootstrap_servers(" , ")
    with pytest.raises(ValueError):
        parse_bootstrap_servers("h:port")


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (grpc.StatusCode.UNAVAILABLE, ErrorCode.NETWORK_EXCEPTION),
        (grpc.StatusCode.CANCELLED, ErrorCode.NETWORK_EXCEPTION),
        (grpc.StatusCode.DEADLINE_EXCEEDED, ErrorCode.REQUEST_TIMED_OUT),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, ErrorCode.MESSAGE_TOO_LARGE),
        (grpc.StatusCode.UNIMPLEMENTED, ErrorCode.UNSUPPORTED_VERSION),
        (grpc.StatusCode.INVALID_ARGUMENT, ErrorCode.INVALID_REQUEST),
        (grpc.StatusCode.UNKNOWN, ErrorCode.UNKNOWN_SERVER_ERROR),
        (grpc.StatusCode.INTERNAL, ErrorCode.UNKNOWN_SERVER_ERROR),
    ],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_grpc_status_becomes_a_kafka_error(status: grpc.StatusCode, code: ErrorCode) -> None:
    error = error_from_status(status, "details", "h:1")
    assert error.code == code and "h:1" in str(error)


def test_transport_errors_are_retriable_and_invalidate_metadata_only_when_the_broker_is_unreachable() -> None:
    unreachable = error_from_status(grpc.StatusCode.UNAVAILABLE, "", "h:1")
    timed_out = error_from_status(grpc.StatusCode.DEADLINE_EXCEEDED, "", "h:1")
    broken = error_from_status(grpc.StatusCode.INTERNAL, "", "h:1")
    assert (unreachable.retriable, unreachable.invalid_metadata) == (True, True)
    assert (timed_out.retriable, timed_out.invalid_metadata) == (True, False)
    assert not broken.retriable


def test_channel_options_allow_large_messages_and_fast_reconnects() -> None:
    options = dict(channel_options(50, 1000))
    assert options["grpc.max_receive_message_length"] == options["grpc.max_send_message_length"] == MAX_MESSAGE_BYTES
    assert MAX_MESSAGE_BYTES >= 100 << 20
    assert options["grpc.max_reconnect_backoff_ms"] == 1000


def test_a_dead_broker_fails_fast_with_network_exception_and_is_backed_off() -> None:
    clock = FakeMonotonic()
    pool = ConnectionPool(request_timeout_ms=2000, reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000,
                          clock=clock)
    # Nothing listens on port 1: the call must fail within its deadline, not hang.
    connection = pool.get("127.0.0.1:1")
    try:
        started = time.monotonic()
        with pytest.raises(KafkaError) as err:
            connection.call(lambda stub: stub.Metadata, pb.MetadataRequest())
        assert time.monotonic() - started < 2.5
        assert err.value.code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT)
        assert connection.in_backoff() and pool.in_backoff("127.0.0.1:1") and connection.failures == 1
        clock.advance(1200)  # past the largest possible first backoff (50 ms + 20%)
        assert not connection.in_backoff()
        future = connection.call_async(lambda stub: stub.Metadata, pb.MetadataRequest(), timeout_ms=500)
        with pytest.raises(KafkaError):
            future.result()
        assert connection.failures == 2
    finally:
        pool.close()
    with pytest.raises(KafkaError):
        pool.get("127.0.0.1:1")  # a closed client makes no new connections


def test_closing_the_pool_fails_calls_in_flight_instead_of_leaving_them_hanging() -> None:
    pool = ConnectionPool(request_timeout_ms=30_000)
    # A routable address that never answers (TEST-NET-1): the call would wait for its whole deadline.
    future = pool.get("192.0.2.1:9092").call_async(lambda stub: stub.Metadata, pb.MetadataRequest())
    started = time.monotonic()
    pool.close()
    with pytest.raises(KafkaError) as err:
        future.result(timeout_s=10)
    assert err.value.code == ErrorCode.NETWORK_EXCEPTION and time.monotonic() - started < 6


def test_error_answers_do_not_count_as_transport_failures() -> None:
    connection = BrokerConnection.__new__(BrokerConnection)
    connection.failures = 3
    connection._blackout_until = 0.0
    connection.record_failure(KafkaError("no", ErrorCode.TOPIC_ALREADY_EXISTS))
    assert connection.failures == 3


"""The Kafka listener at the byte level, on a real broker process: the advertised API table, pipelining in
request order, acks=0 without an answer, Kafka's answers to bad requests, closed connections (logged with the
peer and the reason) for what has no answer, connection limits, and a fuzz test; the broker and its other
connections live on through all of it."""

from __future__ import annotations

import datetime
import importlib
import struct
import time
import urllib.request
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.api_versions.v3.response import ApiVersionsResponse as ApiVersionsResponseV3
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.init_producer_id.v1.request import InitProducerIdRequest
from kio.schema.init_producer_id.v1.response import InitProducerIdResponse
from kio.schema.metadata.v8.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v8.response import MetadataResponse
from kio.schema.produce.v8.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v8.response import ProduceResponse
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from broker.api.kafka.api_table import API_TABLE
from broker.api.kafka.connection import MAX_QUEUED_REQUESTS
from common.record import CRC_POS, CompressionType, ProducerRecord, build_batch
from tests.integration.conftest import BrokerProcess, StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster
from tests.integration.kafka_wire import RAW_BYTES, WireConnection, encode_request, frames_from_schemas, raw_request
from zk.server import free_port

pytestmark = pytest.mark.integration

TOPIC = "wire"
EMPTY_TOPIC = "wire-empty"
ZSTD_TOPIC = "wire-zstd"
MAX_REQUEST_BYTES = 1 << 20
SERVED = {spec.key: (spec.min_version, spec.max_version) for spec in API_TABLE}


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController) -> KafkaCluster:
    cluster = start_kafka_cluster(start_brokers, start_controller, broker_ids=(1,), overrides={
        "socket.request.max.bytes": str(MAX_REQUEST_BYTES), "max.connections.per.ip": "20"})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=30)[TOPIC].result(timeout=60)
    return cluster


def broker(cluster: KafkaCluster) -> BrokerProcess:
    return cluster.brokers[1]


def metadata_request(correlation_id: int) -> bytes:
    return encode_request(MetadataRequest(topics=(MetadataRequestTopic(name=TopicName(TOPIC)),),
                                          allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                          include_topic_authorized_operations=False), correlation_id)


def produce_request(correlation_id: int, acks: int, batch: bytes, partition: int = 0) -> bytes:
    return encode_request(ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(TopicProduceData(name=TopicName(TOPIC), partition_data=(
            PartitionProduceData(index=i32(partition), records=Records(batch)),)),)), correlation_id)


def api_versions_request(correlation_id: int) -> bytes:
    return encode_request(ApiVersionsRequestV3(client_software_name="wire-test", client_software_version="1"),
                          correlation_id)


def assert_serves(address: str) -> None:
    """A new connection is answered: the broker lives on."""
    with WireConnection(address) as conn:
        conn.send(api_versions_request(4242))
        correlation_id, body = conn.receive_body(ApiVersionsResponseV3)
        assert correlation_id == 4242 and body.error_code == 0


def test_api_versions_advertises_exactly_what_is_served(cluster: KafkaCluster) -> None:
    with WireConnection(broker(cluster).kafka_address) as conn:
        conn.send(api_versions_request(1))
        correlation_id, body = conn.receive_body(ApiVersionsResponseV3)
    assert correlation_id == 1 and body.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys} == SERVED
    # librdkafka's feature checks: record batch v2 needs Produce >= 3 and Fetch >= 4, idempotence InitProducerId.
    assert SERVED[0][0] == 3 and SERVED[1][0] == 4 and 22 in SERVED


def test_a_too_new_api_versions_gets_a_v0_answer_with_unsupported_version(cluster: KafkaCluster) -> None:
    with WireConnection(broker(cluster).kafka_address) as conn:
        # v9 from a client newer than this broker: a header v2 (tagged fields) and a body it cannot know.
        conn.send(raw_request(18, 9, 77, b"\x00" + b"\x05hello"))
        correlation_id, rest = conn.receive()
    decoded, _ = entity_reader(ApiVersionsResponseV0)(rest, 0)
    assert correlation_id == 77 and decoded.error_code == 35
    assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == SERVED


def test_pipelined_requests_are_answered_in_order_and_acks_0_not_at_all(cluster: KafkaCluster) -> None:
    batch = build_batch([ProducerRecord(b"v%d" % i, b"k") for i in range(10)])
    with WireConnection(broker(cluster).kafka_address) as conn:
        conn.send(metadata_request(1) + produce_request(2, 0, batch) + produce_request(3, -1, batch)
                  + produce_request(4, 1, batch) + api_versions_request(5))
        assert conn.receive_body(MetadataResponse)[0] == 1
        correlation_id, produced = conn.receive_body(ProduceResponse)
        assert correlation_id == 3, "acks=0 (2) has no response"
        [partition] = produced.responses[0].partition_responses
        assert partition.error_code == 0 and partition.base_offset == 10, "after the acks=0 batch"
        correlation_id, produced = conn.receive_body(ProduceResponse)
        assert correlation_id == 4 and produced.responses[0].partition_responses[0].base_offset == 20
        assert conn.receive_body(ApiVersionsResponseV3)[0] == 5


def test_a_corrupt_batch_gets_corrupt_message_and_an_unknown_partition_its_error(cluster: KafkaCluster) -> None:
    batch = bytearray(build_batch([ProducerRecord(b"v", b"k")]))
    batch[CRC_POS] ^= 0xFF
    with WireConnection(broker(cluster).kafka_address) as conn:
        conn.send(produce_request(1, 1, bytes(batch)) + produce_request(2, 1, bytes(batch), partition=7))
        _, corrupt = conn.receive_body(ProduceResponse)
        _, unknown = conn.receive_body(ProduceResponse)
    assert corrupt.responses[0].partition_responses[0].error_code == 2  # CORRUPT_MESSAGE
    assert unknown.responses[0].partition_responses[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_more_than_one_batch_for_a_partition_is_invalid_record(cluster: KafkaCluster) -> None:
    """Kafka's LogValidator refuses a second v2 batch for one partition in a Produce ("Compressed outer record has
    more than one batch", INVALID_RECORD). Here a retried first batch sent with the next one was answered as a
    duplicate and the next one acknowledged but never written."""
    with WireConnection(broker(cluster).kafka_address) as conn:
        conn.send(encode_request(InitProducerIdRequest(transactional_id=None, transaction_timeout=i32Timedelta.parse(
            datetime.timedelta(minutes=1))), 1))
        _, init = conn.receive_body(InitProducerIdResponse)
        assert init.error_code == 0

        def batch(sequence: int, value: bytes) -> bytes:
            return build_batch([ProducerRecord(value, b"k")], producer_id=init.producer_id,
                               producer_epoch=init.producer_epoch, base_sequence=sequence)

        first, second = batch(0, b"first"), batch(1, b"second")
        conn.send(produce_request(2, 1, first) + produce_request(3, 1, first + second))
        [appended] = conn.receive_body(ProduceResponse)[1].responses[0].partition_responses
        [refused] = conn.receive_body(ProduceResponse)[1].responses[0].partition_responses
        assert appended.error_code == 0
        assert (refused.error_code, refused.error_message) == (
            87, "Compressed outer record has more than one batch")  # INVALID_RECORD
        # Nothing of the refused request was written: the second batch alone comes right after the first.
        conn.send(produce_request(4, 1, second))
        [next_one] = conn.receive_body(ProduceResponse)[1].responses[0].partition_responses
        assert (next_one.error_code, next_one.base_offset) == (0, appended.base_offset + 1)


def test_zstd_needs_produce_v7_and_fetch_v10(cluster: KafkaCluster) -> None:
    """KIP-110: a zstd batch in a Produce older than v7 is UNSUPPORTED_COMPRESSION_TYPE
    (ProduceRequest.validateRecords), and so is a partition of a compression.type=zstd topic fetched by a Fetch
    older than v10 (maybeConvertFetchedData): those clients cannot decode zstd. Newer versions are served."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(ZSTD_TOPIC, 1, 1, config={"compression.type": "zstd"})],
                        operation_timeout=30)[ZSTD_TOPIC].result(timeout=60)
    zstd = build_batch([ProducerRecord(b"v", b"k")], compression=CompressionType.ZSTD)

    def produce(version: int) -> int:
        schema: Any = importlib.import_module(f"kio.schema.produce.v{version}.request")
        request = schema.ProduceRequest(
            transactional_id=None, acks=i16(1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            topic_data=(schema.TopicProduceData(name=TopicName(ZSTD_TOPIC), partition_data=(
                schema.PartitionProduceData(index=i32(0), records=Records(zstd)),)),))
        response: Any = importlib.import_module(f"kio.schema.produce.v{version}.response")
        with WireConnection(broker(cluster).kafka_address) as conn:
            conn.send(encode_request(request, version))
            [answer] = conn.receive_body(response.ProduceResponse)[1].responses[0].partition_responses
        return int(answer.error_code)

    def fetch(version: int) -> tuple[int, bytes]:
        schema: Any = importlib.import_module(f"kio.schema.fetch.v{version}.request")
        fields = {"rack_id": ""} if version >= 11 else {}
        request = schema.FetchRequest(
            replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=100)),
            min_bytes=i32(1), max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0),
            session_epoch=i32(-1), topics=(schema.FetchTopic(topic=TopicName(ZSTD_TOPIC), partitions=(
                schema.FetchPartition(partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0),
                                      log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),),
            forgotten_topics_data=(), **fields)
        response: Any = importlib.import_module(f"kio.schema.fetch.v{version}.response")
        with WireConnection(broker(cluster).kafka_address) as conn:
            conn.send(encode_request(request, version))
            [answer] = conn.receive_body(response.FetchResponse)[1].responses[0].partitions
        return int(answer.error_code), bytes(answer.records or b"")

    assert produce(6) == 76  # UNSUPPORTED_COMPRESSION_TYPE
    assert produce(7) == 0
    assert fetch(9) == (76, b"")
    error, records = fetch(10)
    assert error == 0 and zstd[CRC_POS + 4:] in records


def test_init_producer_id_checks_a_transactional_producers_timeout_and_id(cluster: KafkaCluster) -> None:
    """As Kafka's TransactionCoordinator.handleInitProducerId, before any coordinator state is looked at: a
    transaction.timeout.ms above transaction.max.timeout.ms (15 minutes) is INVALID_TRANSACTION_TIMEOUT, an empty
    transactional id INVALID_REQUEST. Without one, an idempotent producer's id, epoch 0. (The coordinator itself:
    tests/integration/kafka_clients/test_kafka_transactions.py.)"""
    timeout = i32Timedelta.parse(datetime.timedelta(seconds=60))
    too_long = i32Timedelta.parse(datetime.timedelta(minutes=15, milliseconds=1))
    with WireConnection(cluster.brokers[1].kafka_address) as conn:
        conn.send(encode_request(InitProducerIdRequest(transactional_id="tx", transaction_timeout=too_long), 6))
        correlation_id, body = conn.receive_body(InitProducerIdResponse)
        assert (correlation_id, body.error_code, body.producer_id) == (6, 50, -1)
        conn.send(encode_request(InitProducerIdRequest(transactional_id="", transaction_timeout=timeout), 7))
        correlation_id, body = conn.receive_body(InitProducerIdResponse)
        assert (correlation_id, body.error_code, body.producer_id) == (7, 42, -1)
        conn.send(encode_request(InitProducerIdRequest(transactional_id=None, transaction_timeout=timeout), 8))
        _, idempotent = conn.receive_body(InitProducerIdResponse)
        assert (idempotent.error_code, idempotent.producer_epoch) == (0, 0) and idempotent.producer_id >= 0


@pytest.mark.parametrize(
    ("name", "frame", "reason"),
    [
        ("negative size", struct.pack(">i", -5), "invalid request size -5"),
        ("huge size", struct.pack(">i", MAX_REQUEST_BYTES + 1), "larger than socket.request.max.bytes"),
        ("unknown API key", raw_request(999, 0, 1), "unknown API key 999"),
        ("unsupported version", raw_request(0, 2, 1, b"\x00" * 16), "Produce v2 is not supported"),
        ("truncated body", raw_request(3, 8, 1, b"\x00\x00\x00\x05\x00\x03ab"), "malformed MetadataRequest v8"),
        ("garbage", struct.pack(">i", 12) + bytes(range(200, 212)), "unknown API key"),
    ],
)
def test_bad_requests_close_only_their_connection_with_a_log_line(
        cluster: KafkaCluster, wait_until: WaitUntil, name: str, frame: bytes, reason: str) -> None:
    b = broker(cluster)
    with WireConnection(b.kafka_address) as bystander, WireConnection(b.kafka_address) as conn:
        conn.send(frame)
        assert conn.closed_by_peer(), f"{name}: the broker must close the connection"
        wait_until(lambda: f"Closing connection from 127.0.0.1:{conn.local_port}" in b.process.log()
                   and reason in b.process.log(), message=f"a log line naming the peer and '{reason}'")
        bystander.send(api_versions_request(9))
        assert bystander.receive_body(ApiVersionsResponseV3)[0] == 9, "other connections live on"
    assert_serves(b.kafka_address)


def test_connection_limits_and_idle_timeout(start_brokers: StartBrokers, start_controller: StartController,
                                            wait_until: WaitUntil) -> None:
    cluster = start_kafka_cluster(start_brokers, start_controller, broker_ids=(1,), overrides={
        "max.connections.per.ip": "2", "connections.max.idle.ms": "1500"})
    b = broker(cluster)
    held: list[WireConnection] = []

    def two_served() -> bool:
        # The cluster helper's own client connections go away asynchronously: until then, one is refused.
        for conn in held:
            conn.close()
        held[:] = [WireConnection(b.kafka_address) for _ in range(2)]
        return all(_answers(conn) for conn in held)

    wait_until(two_served, message="two connections from one ip are served")
    third = WireConnection(b.kafka_address)
    try:
        assert third.closed_by_peer(), "the third connection from one ip is refused"
        assert "max.connections.per.ip (2) reached for 127.0.0.1" in b.process.log()
        started = time.monotonic()
        assert held[0].closed_by_peer(timeout=20), "an idle connection is closed"
        assert time.monotonic() - started < 15
        assert "idle for more than connections.max.idle.ms (1500 ms)" in b.process.log()
    finally:
        for conn in (*held, third):
            conn.close()


def long_poll_fetch_request(correlation_id: int) -> bytes:
    """A Fetch that waits 30 s for 1 MiB on the empty partition 1 of the wire topic: it parks in the purgatory."""
    return encode_request(FetchRequest(
        replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(seconds=30)), min_bytes=i32(1 << 20),
        max_bytes=i32(50 << 20), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName(EMPTY_TOPIC), partitions=(FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0), log_start_offset=i64(-1),
            partition_max_bytes=i32(1 << 20)),)),), forgotten_topics_data=(), rack_id=""), correlation_id)


def test_a_hostile_pipeliner_gets_only_a_few_requests_taken_in(start_brokers: StartBrokers,
                                                                start_controller: StartController,
                                                                wait_until: WaitUntil) -> None:
    """Kafka mutes a connection while one of its requests is handled: a client cannot make the broker hold more
    than it allows (64 pipelined long-poll Fetches took a broker from 74 MB to 459 MB). Here a connection's
    requests are read ahead only up to MAX_QUEUED_REQUESTS (and MAX_QUEUED_REQUEST_BYTES of frames); the rest
    wait in the socket, unread, until answers go out."""
    metrics_port = free_port()
    cluster = start_kafka_cluster(start_brokers, start_controller, broker_ids=(1,),
                                  overrides={"metrics.port": str(metrics_port)})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(EMPTY_TOPIC, 1, 1)], operation_timeout=30)[EMPTY_TOPIC].result(timeout=60)
    b = broker(cluster)

    def waiting_fetches() -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith('kafka_server_DelayedOperationPurgatory_NumDelayedOperations{'
                                   'delayedOperation="Fetch"}'):
                    return float(line.rsplit(" ", 1)[1])
        raise AssertionError("no Fetch purgatory gauge")

    with WireConnection(b.kafka_address) as pipeliner:
        pipeliner.send(b"".join(long_poll_fetch_request(i) for i in range(64)))
        wait_until(lambda: waiting_fetches() >= MAX_QUEUED_REQUESTS, message="the first fetches are parked")
        # Everything the broker would read is in its socket already: more round trips give it every chance to.
        for _ in range(20):
            assert_serves(b.kafka_address)
        assert waiting_fetches() == MAX_QUEUED_REQUESTS
    assert_serves(b.kafka_address)


def _answers(conn: WireConnection) -> bool:
    try:
        conn.send(api_versions_request(1))
        return conn.receive_body(ApiVersionsResponseV3)[0] == 1
    except (ConnectionError, OSError):
        return False


# ------------------------------------------------------------------ fuzz

_frames_from_schemas = frames_from_schemas(list(SERVED))
_mutated_produce = st.builds(
    lambda position, value: _mutate(produce_request(1, 1, build_batch([ProducerRecord(b"v", b"k")])), position, value),
    st.integers(min_value=4, max_value=150), st.integers(min_value=0, max_value=255))
_raw_bytes = RAW_BYTES


def _mutate(frame: bytes, position: int, value: int) -> bytes:
    data = bytearray(frame)
    data[min(position, len(data) - 1)] = value
    return bytes(data)


def test_fuzz_the_broker_lives_through_any_bytes(cluster: KafkaCluster) -> None:
    address = broker(cluster).kafka_address

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.one_of(_frames_from_schemas, _mutated_produce, _raw_bytes))
    def send_anything(data: bytes) -> None:
        with WireConnection(address, timeout=10) as conn:
            conn.send(data)
            # Whatever the answer (an error code, a response, a closed connection), nothing else may happen.
            conn.sock.settimeout(0.05)
            try:
                conn.sock.recv(65536)
            except (TimeoutError, ConnectionError):
                pass

    send_anything()
    assert_serves(address)
    assert broker(cluster).process.popen.poll() is None
    # Bad input is answered or refused, never a handler's crash.
    assert "Traceback" not in broker(cluster).process.log()

"""Every (API, version) pair a real broker advertises in ApiVersions gets a valid request of that version
(tests/integration/kafka_requests.py: kio, from Kafka's JSON message schemas) and must answer it with a
well-formed response of the same version: the same correlation id, a body that decodes as that version's
response and ends where the frame does, and no UNKNOWN_SERVER_ERROR. Kafka's errors for a deliberately minimal
request (an unknown member, a group that does not exist, SECURITY_DISABLED without an authorizer) are answers
too. A version the broker advertises but cannot serve closes the connection here (Fetch v4 did: it read
log_start_offset, a v5 field)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_response_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.find_coordinator.v0.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v0.response import FindCoordinatorResponse
from kio.serial import entity_reader

from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster
from tests.integration.kafka_requests import GROUP, TOPIC, request
from tests.integration.kafka_wire import WireConnection, encode_request

pytestmark = pytest.mark.integration

API_VERSIONS_KEY = 18
UNKNOWN_SERVER_ERROR = -1


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController, wait_until: WaitUntil) -> KafkaCluster:
    # No initial rebalance delay: a JoinGroup of a version without KIP-394's MEMBER_ID_REQUIRED waits for it.
    cluster = start_kafka_cluster(start_brokers, start_controller, broker_ids=(1,),
                                  overrides={"group.initial.rebalance.delay.ms": "0",
                                             "offsets.topic.replication.factor": "1",
                                             "offsets.topic.num.partitions": "1"})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=30)[TOPIC].result(timeout=60)
    # The group APIs reach the coordinator only once __consumer_offsets (made by the first FindCoordinator) has
    # a leader; before that they all answer NOT_COORDINATOR and their handlers go untried.
    wait_until(lambda: coordinator_error(cluster.brokers[1].kafka_address) == 0, timeout=60,
               message="a coordinator for the walk's group")
    return cluster


def coordinator_error(address: str) -> int:
    with WireConnection(address) as conn:
        conn.send(encode_request(FindCoordinatorRequest(key=GROUP), 1))
        return int(conn.receive_body(FindCoordinatorResponse)[1].error_code)


def advertised(address: str) -> list[tuple[int, int]]:
    with WireConnection(address) as conn:
        conn.send(encode_request(ApiVersionsRequest(client_software_name="walk", client_software_version="1"), 1))
        _, body = conn.receive_body(ApiVersionsResponse)
    assert body.error_code == 0
    return [(k.api_key, v) for k in body.api_keys for v in range(k.min_version, k.max_version + 1)]


def error_codes(entity: Any) -> list[int]:
    """Every error_code in a decoded response, however deeply nested."""
    if isinstance(entity, tuple):
        return [code for item in entity for code in error_codes(item)]
    if not dataclasses.is_dataclass(entity):
        return []
    codes = []
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.name == "error_code":
            codes.append(int(value))
        else:
            codes.extend(error_codes(value))
    return codes


def exchange(address: str, api_key: int, version: int, correlation_id: int) -> str | None:
    """None if the broker answered this version well, else what went wrong."""
    response_type = load_response_schema(api_key, version)
    with WireConnection(address) as conn:
        conn.send(encode_request(request(api_key, version), correlation_id))
        try:
            answered_id, rest = conn.receive()
        except (ConnectionError, TimeoutError) as e:
            return f"no answer: {e!r}"
    if answered_id != correlation_id:
        return f"correlation id {answered_id}, sent {correlation_id}"
    # A flexible response's header ends with an empty tagged-field section, except ApiVersions' (always v0).
    start = 1 if response_type.__flexible__ and api_key != API_VERSIONS_KEY else 0
    try:
        body, used = entity_reader(response_type)(rest, start)
    except Exception as e:
        return f"undecodable as {response_type.__name__} v{version}: {e!r}"
    if start + used != len(rest):
        return f"{len(rest) - start - used} bytes after the {response_type.__name__} v{version} body"
    if UNKNOWN_SERVER_ERROR in error_codes(body):
        return f"UNKNOWN_SERVER_ERROR in {body}"
    return None


def test_every_advertised_api_version_answers_a_valid_request_of_that_version(cluster: KafkaCluster) -> None:
    address = cluster.brokers[1].kafka_address
    pairs = advertised(address)
    assert len(pairs) > 100, "the walk covers the whole table"
    broken = {}
    for correlation_id, (api_key, version) in enumerate(pairs, start=100):
        problem = exchange(address, api_key, version, correlation_id)
        if problem is not None:
            broken[(api_key, version)] = problem
    assert not broken, "\n".join(f"API {key} v{version}: {problem}" for (key, version), problem in broken.items())

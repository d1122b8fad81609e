"""What a broker forwards to the controller process (Kafka's BrokerToControllerChannelManager, KIP-590): an
admin client's ElectLeaders (KIP-460), and the console's DescribeEvents (the project's own: a console that reaches
only the brokers, as from a compose cluster's host, sees the controller's events, epoch and ZooKeeper through them).

In Kafka 2.x the controller is one of the brokers and elects in-process; here it is a process of its own, found
through the /controller znode, serving KafkaController.ElectLeaders over gRPC (controller/server.py) as the
leader-election tool uses it. Blocking (a ZooKeeper read and a gRPC call): callers run it off the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import grpc
from kazoo.exceptions import KazooException

from common.grpc_tls import GrpcSecurity
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.errors import ErrorCode
from proto.types import TopicPartition
from zk.client import KafkaZkClient

logger = logging.getLogger(__name__)

# Per partition: (error, error message or None).
ElectionResults = dict[TopicPartition, tuple[ErrorCode, str | None]]


def elect_leaders_request(election_type: int, partitions: Sequence[TopicPartition],
                          timeout_ms: int) -> pb.ElectLeadersRequest:
    request = pb.ElectLeadersRequest(election_type=election_type, timeout_ms=timeout_ms)
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    for topic, indexes in by_topic.items():
        request.topic_partitions.add(topic=topic, partitions=indexes)
    return request


def election_results(response: pb.ElectLeadersResponse) -> ElectionResults:
    return {TopicPartition(r.topic, p.partition_id): (ErrorCode(p.error_code), p.error_message or None)
            for r in response.replica_election_results for p in r.partition_result}


class ControllerChannel:
    def __init__(self, zk: KafkaZkClient, security: GrpcSecurity,
                 cluster_metadata: tuple[tuple[str, str], ...] = ()) -> None:
        """`cluster_metadata`: what a cluster action carries (proto/auth.py): the controller answers
        DescribeEvents in full, and serves a forwarded ElectLeaders, to a broker only."""
        self._zk = zk
        self._security = security
        self._cluster_metadata = cluster_metadata

    def _endpoint(self, request: str) -> str | None:
        try:
            return self._zk.get_controller_endpoint()
        except KazooException as e:
            logger.warning("Cannot forward %s, reading /controller failed: %r", request, e)
            return None

    def elect_leaders(self, election_type: int, partitions: Sequence[TopicPartition],
                      timeout_ms: int) -> ElectionResults:
        """The active controller's answer for each partition; NOT_CONTROLLER for all when no controller is
        registered or reachable (what a Kafka broker that is not the controller answers: the client retries
        after refreshing its metadata), REQUEST_TIMED_OUT when the election outlasts `timeout_ms`."""
        if not partitions:
            return {}  # an empty list asks for nothing (the controller's empty list would mean every partition)
        endpoint = self._endpoint("ElectLeaders")
        if endpoint is None:
            return dict.fromkeys(partitions, (ErrorCode.NOT_CONTROLLER, None))
        request = elect_leaders_request(election_type, partitions, timeout_ms)
        try:
            with self._security.channel(endpoint) as channel:
                # A little longer than the controller waits, so its REQUEST_TIMED_OUT answer arrives.
                # The cluster credential: the controller serves a forwarding broker as the client it authorized.
                response = pb_grpc.KafkaControllerStub(channel).ElectLeaders(
                    request, metadata=self._cluster_metadata, timeout=timeout_ms / 1000 + 5)
        except grpc.RpcError as e:
            logger.warning("ElectLeaders to the controller at %s failed: %s", endpoint,
                           e.details() if isinstance(e, grpc.Call) else e)
            return dict.fromkeys(partitions, (ErrorCode.NOT_CONTROLLER, None))
        if response.error_code != ErrorCode.NONE:
            return dict.fromkeys(partitions, (ErrorCode(response.error_code), None))
        return election_results(response)

    def describe_events(self, request: pb.DescribeEventsRequest, timeout_s: float) -> pb.DescribeEventsResponse:
        """The active controller's answer, every event of it (the caller filters them for its client), or
        NOT_CONTROLLER when no controller is registered or answers within `timeout_s`."""
        endpoint = self._endpoint("DescribeEvents")
        if endpoint is None:
            return pb.DescribeEventsResponse(error_code=ErrorCode.NOT_CONTROLLER)
        try:
            with self._security.channel(endpoint) as channel:
                return pb_grpc.KafkaControllerStub(channel).DescribeEvents(
                    request, metadata=self._cluster_metadata, timeout=timeout_s)
        except grpc.RpcError as e:
            logger.debug("DescribeEvents to the controller at %s failed: %s", endpoint,
                         e.details() if isinstance(e, grpc.Call) else e)
            return pb.DescribeEventsResponse(error_code=ErrorCode.NOT_CONTROLLER)

"""What a broker forwards to the controller process (Kafka's BrokerToControllerChannelManager, KIP-590): an
admin client's ElectLeaders (KIP-460).

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
    def __init__(self, zk: KafkaZkClient, security: GrpcSecurity) -> None:
        self._zk = zk
        self._security = security

    def elect_leaders(self, election_type: int, partitions: Sequence[TopicPartition],
                      timeout_ms: int) -> ElectionResults:
        """The active controller's answer for each partition; NOT_CONTROLLER for all when no controller is
        registered or reachable (what a Kafka broker that is not the controller answers: the client retries
        after refreshing its metadata), REQUEST_TIMED_OUT when the election outlasts `timeout_ms`."""
        if not partitions:
            return {}  # an empty list asks for nothing (the controller's empty list would mean every partition)
        try:
            endpoint = self._zk.get_controller_endpoint()
        except KazooException as e:
            logger.warning("Cannot forward ElectLeaders, reading /controller failed: %r", e)
            endpoint = None
        if endpoint is None:
            return dict.fromkeys(partitions, (ErrorCode.NOT_CONTROLLER, None))
        request = elect_leaders_request(election_type, partitions, timeout_ms)
        try:
            with self._security.channel(endpoint) as channel:
                # A little longer than the controller waits, so its REQUEST_TIMED_OUT answer arrives.
                response = pb_grpc.KafkaControllerStub(channel).ElectLeaders(request, timeout=timeout_ms / 1000 + 5)
        except grpc.RpcError as e:
            logger.warning("ElectLeaders to the controller at %s failed: %s", endpoint,
                           e.details() if isinstance(e, grpc.Call) else e)
            return dict.fromkeys(partitions, (ErrorCode.NOT_CONTROLLER, None))
        if response.error_code != ErrorCode.NONE:
            return dict.fromkeys(partitions, (ErrorCode(response.error_code), None))
        return election_results(response)

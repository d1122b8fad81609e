"""Consumer-group administration for Admin (Java's AdminClient: listConsumerGroups, describeConsumerGroups,
listConsumerGroupOffsets, alterConsumerGroupOffsets, deleteConsumerGroupOffsets, deleteConsumerGroups), what
kafka-consumer-groups.sh uses.

Every call but the listing goes to the group's coordinator, found with
FindCoordinator and looked for again when it answers NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS (it moved, or is
loading the group), until the call's timeout. Listing asks every live broker,
since each lists only the groups it coordinates.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple, TypeVar

from client.consumer_protocol import PROTOCOL_TYPE, decode_assignment
from client.errors import KafkaTimeoutError
from client.metadata import Metadata
from client.offset_requests import commit_errors, committed_offsets, offset_commit_request, offset_fetch_request
from client.structs import BrokerMetadata, OffsetAndMetadata
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode, KafkaError, error_for
from proto.types import TopicPartition

T = TypeVar("T")

_RETRY_ELSEWHERE = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT)


class ConsumerGroupListing(NamedTuple):
    group_id: str
    protocol_type: str
    state: str


class MemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    # The member's partitions, decoded from its ConsumerProtocol assignment ("consumer" groups only).
    assignment: tuple[TopicPartition, ...]


class ConsumerGroupDescription(NamedTuple):
    group_id: str
    is_simple_consumer_group: bool  # no protocol type: only standalone consumers commit under it
    members: tuple[MemberDescription, ...]
    partition_assignor: str
    state: str  # Kafka's ConsumerGroupState names: Empty, PreparingRebalance, ..., Dead
    coordinator: BrokerMetadata


class GroupAdmin:
    def __init__(self, metadata: Metadata, *, retry_backoff_ms: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._metadata = metadata
        self._retry_backoff_ms = retry_backoff_ms
        self._clock = clock

    def _now_ms(self) -> float:
        return self._clock() * 1000

    def _with_coordinator(self, group_id: str, timeout_ms: float,
                          call: Callable[[BrokerMetadata, float], T]) -> T:
        """`call(coordinator, remaining ms)` until it does not raise a coordinator error, or the timeout."""
        deadline = self._now_ms() + timeout_ms
        while True:
            remaining = max(deadline - self._now_ms(), 1)
            try:
                found = self._metadata.call_any(lambda stub: stub.FindCoordinator,
                                                pb.FindCoordinatorRequest(key=group_id, key_type=0), remaining)
                if found.error_code:
                    raise error_for(found.error_code, found.error_message or f"FindCoordinator of group {group_id!r}")
                return call(BrokerMetadata(found.node_id, found.host, found.port), max(deadline - self._now_ms(), 1))
            except KafkaError as exc:
                if exc.code not in _RETRY_ELSEWHERE:
                    raise
                last_error = exc
            if self._now_ms() + self._retry_backoff_ms >= deadline:
                raise KafkaTimeoutError(f"Timed out after {timeout_ms:.0f} ms waiting for the coordinator of group"
                                        f" {group_id!r} (last error: {last_error})")
            time.sleep(self._retry_backoff_ms / 1000)

    # ------------------------------------------------------------------ list / describe / delete

    def list_consumer_groups(self, timeout_ms: float) -> list[ConsumerGroupListing]:
        """Every group of every live broker (those with protocol type "consumer" or none, as Kafka lists)."""
        cluster = self._metadata.fetch((), timeout_ms)
        found: dict[str, ConsumerGroupListing] = {}
        for broker in sorted(cluster.brokers.values()):
            response = self._metadata.pool.get(broker.address).call(lambda stub: stub.ListGroups,
                                                                     pb.ListGroupsRequest(), timeout_ms)
            if response.error_code:
                raise error_for(response.error_code, f"ListGroups from broker {broker.node_id}")
            for g in response.groups:
                if g.protocol_type in (PROTOCOL_TYPE, ""):
                    found[g.group_id] = ConsumerGroupListing(g.group_id, g.protocol_type, g.group_state)
        return [found[g] for g in sorted(found)]

    def describe_consumer_groups(self, group_ids: Iterable[str], timeout_ms: float) -> list[ConsumerGroupDescription]:
        return [self._describe(group_id, timeout_ms) for group_id in group_ids]

    def _describe(self, group_id: str, timeout_ms: float) -> ConsumerGroupDescription:
        def call(coordinator: BrokerMetadata, remaining: float) -> ConsumerGroupDescription:
            response = self._metadata.pool.get(coordinator.address).call(
                lambda stub: stub.DescribeGroups, pb.DescribeGroupsRequest(groups=[group_id]), remaining)
            group = response.groups[0]
            if group.error_code:
                raise error_for(group.error_code, f"describing group {group_id!r}")
            consumer = group.protocol_type == PROTOCOL_TYPE
            members = tuple(
                MemberDescription(m.member_id, m.group_instance_id if m.HasField("group_instance_id") else None,
                                  m.client_id, m.client_host,
                                  decode_assignment(m.member_assignment).partitions if consumer else ())
                for m in group.members)
            return ConsumerGroupDescription(group.group_id, group.protocol_type == "", members, group.protocol_data,
                                            group.group_state, coordinator)

        return self._with_coordinator(group_id, timeout_ms, call)

    def delete_consumer_groups(self, group_ids: Iterable[str], timeout_ms: float) -> dict[str, ErrorCode]:
        """Each group's answer: NONE, or NON_EMPTY_GROUP (it has members), GROUP_ID_NOT_FOUND, ..."""
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            def call(coordinator: BrokerMetadata, remaining: float, group_id: str = group_id) -> ErrorCode:
                response = self._metadata.pool.get(coordinator.address).call(
                    lambda stub: stub.DeleteGroups, pb.DeleteGroupsRequest(groups_names=[group_id]), remaining)
                code = ErrorCode(response.results[0].error_code)
                if code in _RETRY_ELSEWHERE:
                    raise error_for(code, f"deleting group {group_id!r}")
                return code

            results[group_id] = self._with_coordinator(group_id, timeout_ms, call)
        return results

    # ------------------------------------------------------------------ offsets

    def list_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None,
                                    timeout_ms: float) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all of them when `partitions` is None); none: left out."""
        request = offset_fetch_request(group_id, partitions)

        def call(coordinator: BrokerMetadata, remaining: float) -> dict[TopicPartition, OffsetAndMetadata]:
            return committed_offsets(self._metadata.pool.get(coordinator.address).call(
                lambda stub: stub.OffsetFetch, request, remaining), group_id)

        return self._with_coordinator(group_id, timeout_ms, call)

    def alter_consumer_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                     timeout_ms: float) -> None:
        """A standalone commit (generation -1): the coordinator takes it only while the group has no
        members (UNKNOWN_MEMBER_ID otherwise, as Kafka answers an active group)."""
        request = offset_commit_request(group_id, -1, "", offsets)

        def call(coordinator: BrokerMetadata, remaining: float) -> None:
            response = self._metadata.pool.get(coordinator.address).call(lambda stub: stub.OffsetCommit, request,
                                                                          remaining)
            for tp, code in commit_errors(response):
                raise error_for(code, f"committing {tp.topic}-{tp.partition} for group {group_id!r}")

        self._with_coordinator(group_id, timeout_ms, call)

    def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition],
                                      timeout_ms: float) -> dict[TopicPartition, ErrorCode]:
        """OffsetDelete (KIP-496): each partition's answer (NONE, GROUP_SUBSCRIBED_TO_TOPIC while a member
        subscribes to its topic, UNKNOWN_TOPIC_OR_PARTITION, ...); a group error (GROUP_ID_NOT_FOUND,
        NON_EMPTY_GROUP, ...) is raised."""
        by_topic: dict[str, list[int]] = {}
        for tp in dict.fromkeys(partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = pb.OffsetDeleteRequest(group_id=group_id, topics=[
            pb.OffsetDeleteRequest.OffsetDeleteRequestTopic(name=t, partition_indexes=p) for t, p in by_topic.items()])

        def call(coordinator: BrokerMetadata, remaining: float) -> dict[TopicPartition, ErrorCode]:
            response = self._metadata.pool.get(coordinator.address).call(lambda stub: stub.OffsetDelete, request,
                                                                          remaining)
            if response.error_code:
                raise error_for(response.error_code, f"deleting offsets of group {group_id!r}")
            return {TopicPartition(t.name, p.partition_index): ErrorCode(p.error_code)
                    for t in response.topics for p in t.partitions}

        return self._with_coordinator(group_id, timeout_ms, call)

"""Admin: create, delete and describe topics; describe the cluster; describe and alter topic and dynamic
broker configs (kafka-python's KafkaAdminClient names, plus Java's incrementalAlterConfigs); list, describe
and delete consumer groups and their offsets (client/group_admin.py).

Topic changes go to the controller broker when the metadata names one, else
to any broker; NOT_CONTROLLER sends them again after a metadata refresh, as
Kafka's AdminClient does. Every other per-topic error is raised as its
KafkaError (TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, ...).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import grpc

from client.connection import ConnectionPool, Req, Resp, Rpc, parse_bootstrap_servers
from client.errors import KafkaTimeoutError
from client.group_admin import ConsumerGroupDescription, ConsumerGroupListing, GroupAdmin
from client.metadata import ClusterMetadata, Metadata
from client.structs import BrokerMetadata, OffsetAndMetadata
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode, KafkaError, error_for
from proto.types import TopicPartition


@dataclass(frozen=True)
class NewTopic:
    """A topic to create. -1 partitions / replication factor: the broker's defaults (KIP-464).

    `replica_assignments` ({partition: [broker ids]}) replaces both counts.
    """

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignments: Mapping[int, Sequence[int]] | None = None
    topic_configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NewPartitions:
    """A topic's new partition count (kafka-python's NewPartitions); `new_assignments`, one broker list per
    added partition, replaces the broker's assignment."""

    total_count: int
    new_assignments: Sequence[Sequence[int]] | None = None


class PartitionInfo(NamedTuple):
    """One partition of a described topic (Java's TopicPartitionInfo); leader -1 when it has none."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


class TopicDescription(NamedTuple):
    name: str
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]


class ClusterDescription(NamedTuple):
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerMetadata, ...]


class ConfigResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type ids."""

    TOPIC = 2
    BROKER = 4


@dataclass(frozen=True)
class ConfigResource:
    """A topic, or a broker by id ("" for the cluster-wide default); `configs` for alter_configs."""

    resource_type: ConfigResourceType
    name: str
    configs: Mapping[str, str] | None = None


class OpType(enum.IntEnum):
    """Java's AlterConfigOp.OpType."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class AlterConfigOp(NamedTuple):
    name: str
    op_type: OpType
    value: str | None = None


class ConfigEntry(NamedTuple):
    """One described config; source is Kafka's ConfigSource id (1 dynamic topic ... 5 default)."""

    name: str
    value: str | None
    source: int
    read_only: bool
    is_default: bool
    is_sensitive: bool


class Admin:
    def __init__(
        self,
        bootstrap_servers: str | Iterable[str] = "localhost:9192",
        *,
        client_id: str | None = None,
        request_timeout_ms: int = 30000,
        default_api_timeout_ms: int = 60000,
        retry_backoff_ms: int = 100,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        metadata_max_age_ms: int = 300000,
        channel_factory: Callable[..., grpc.aio.Channel] = grpc.aio.insecure_channel,
    ) -> None:
        self.client_id = client_id
        self._request_timeout_ms = request_timeout_ms
        self._default_api_timeout_ms = default_api_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        pool = ConnectionPool(request_timeout_ms=request_timeout_ms, reconnect_backoff_ms=reconnect_backoff_ms,
                              reconnect_backoff_max_ms=reconnect_backoff_max_ms, channel_factory=channel_factory)
        self._metadata = Metadata(parse_bootstrap_servers(bootstrap_servers), pool, retry_backoff_ms=retry_backoff_ms,
                                  metadata_max_age_ms=metadata_max_age_ms, allow_auto_topic_creation=False)
        self._groups = GroupAdmin(self._metadata, retry_backoff_ms=retry_backoff_ms)

    # ------------------------------------------------------------------ topics

    def create_topics(self, new_topics: Iterable[NewTopic], timeout_ms: int | None = None,
                      validate_only: bool = False) -> None:
        """Create topics; raises the first topic's KafkaError if any failed (the others are still created)."""
        topics = {t.name: t for t in new_topics}
        request_timeout = self._request_timeout_ms if timeout_ms is None else timeout_ms

        def send(names: list[str], remaining_ms: float) -> dict[str, tuple[int, str]]:
            request = pb.CreateTopicsRequest(timeout_ms=request_timeout, validate_only=validate_only)
            for name in names:
                request.topics.append(_creatable(topics[name]))
            response = self._call_controller(lambda stub: stub.CreateTopics, request, remaining_ms)
            return {r.name: (r.error_code, r.error_message) for r in response.topics}

        self._per_topic(list(topics), send, "CreateTopics")

    def delete_topics(self, topics: Iterable[str], timeout_ms: int | None = None) -> None:
        """Delete topics; raises the first topic's KafkaError if any failed (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
        request_timeout = self._request_timeout_ms if timeout_ms is None else timeout_ms

        def send(names: list[str], remaining_ms: float) -> dict[str, tuple[int, str]]:
            request = pb.DeleteTopicsRequest(topic_names=names, timeout_ms=request_timeout)
            response = self._call_controller(lambda stub: stub.DeleteTopics, request, remaining_ms)
            return {r.name: (r.error_code, r.error_message) for r in response.responses}

        self._per_topic(list(dict.fromkeys(topics)), send, "DeleteTopics")

    def create_partitions(self, topic_partitions: Mapping[str, NewPartitions], timeout_ms: int | None = None,
                          validate_only: bool = False) -> None:
        """Raise topics' partition counts; raises the first topic's KafkaError (INVALID_PARTITIONS for a count
        not above the current one, ...); the controller creates the new partitions and elects their leaders."""
        request_timeout = self._request_timeout_ms if timeout_ms is None else timeout_ms

        def send(names: list[str], remaining_ms: float) -> dict[str, tuple[int, str]]:
            request = pb.CreatePartitionsRequest(timeout_ms=request_timeout, validate_only=validate_only)
            for name in names:
                new = topic_partitions[name]
                topic = request.topics.add(name=name, count=new.total_count)
                for brokers in new.new_assignments or ():
                    topic.assignments.add(broker_ids=list(brokers))
            response = self._call_controller(lambda stub: stub.CreatePartitions, request, remaining_ms)
            return {r.name: (r.error_code, r.error_message) for r in response.results}

        self._per_topic(list(topic_partitions), send, "CreatePartitions")

    def delete_records(self, records_to_delete: Mapping[TopicPartition, int],
                       timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        """Delete every record below each partition's offset (-1: its high watermark) on all in-sync replicas;
        returns the new low watermarks; raises the first partition's KafkaError (OFFSET_OUT_OF_RANGE above the
        high watermark, ...)."""
        results = self.try_delete_records(records_to_delete, timeout_ms)
        for result in results.values():
            if isinstance(result, KafkaError):
                raise result
        return {tp: result for tp, result in results.items() if not isinstance(result, KafkaError)}

    def try_delete_records(self, records_to_delete: Mapping[TopicPartition, int],
                           timeout_ms: int | None = None) -> dict[TopicPartition, int | KafkaError]:
        """delete_records, with each partition's low watermark or error (what kafka-delete-records.sh prints).
        Each leader gets its partitions; those answered with a retriable error (leadership moved, ...) are
        sent again after a metadata refresh until the API timeout."""
        request_timeout = self._request_timeout_ms if timeout_ms is None else timeout_ms
        deadline = self._now_ms() + self._default_api_timeout_ms
        results: dict[TopicPartition, int | KafkaError] = {}
        pending = dict(records_to_delete)
        cluster = self._fetch_metadata(sorted({tp.topic for tp in pending}))
        while pending:
            retry: dict[TopicPartition, int] = {}
            for leader, offsets in self._by_leader(cluster, pending, results, retry).items():
                request = pb.DeleteRecordsRequest(timeout_ms=request_timeout)
                for topic, partitions in _by_topic(offsets).items():
                    request.topics.add(name=topic, partitions=[
                        pb.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=p, offset=o)
                        for p, o in partitions])
                try:
                    response = self._metadata.pool.get(leader.address).call(
                        lambda stub: stub.DeleteRecords, request, max(deadline - self._now_ms(), 1))
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    retry.update(offsets)
                    continue
                for topic_result in response.topics:
                    for p in topic_result.partitions:
                        tp = TopicPartition(topic_result.name, p.partition_index)
                        if p.error_code == ErrorCode.NONE:
                            results[tp] = p.low_watermark
                        elif error_for(p.error_code).retriable:
                            retry[tp] = offsets[tp]
                        else:
                            results[tp] = error_for(p.error_code)
            pending = retry
            if pending:
                if self._now_ms() + self._retry_backoff_ms >= deadline:
                    for tp in pending:
                        results[tp] = KafkaTimeoutError(f"DeleteRecords for {tp} did not complete within"
                                                        f" {self._default_api_timeout_ms} ms")
                    break
                time.sleep(self._retry_backoff_ms / 1000)
                cluster = self._fetch_metadata(sorted({tp.topic for tp in pending}))
        return results

    @staticmethod
    def _by_leader(cluster: ClusterMetadata, offsets: Mapping[TopicPartition, int],
                   results: dict[TopicPartition, int | KafkaError],
                   retry: dict[TopicPartition, int]) -> dict[BrokerMetadata, dict[TopicPartition, int]]:
        """The partitions per leader; those of unknown topics or partitions fail in `results`, those without
        a leader now go to `retry`. UNKNOWN_TOPIC_OR_PARTITION is retriable elsewhere, but a fresh metadata
        answer that does not know a partition fails it at once, as Kafka 2.8's KafkaAdminClient.deleteRecords
        fails every partition of a topic its metadata answer names an error for."""
        grouped: dict[BrokerMetadata, dict[TopicPartition, int]] = {}
        for tp, offset in offsets.items():
            code = cluster.topic_errors.get(tp.topic, ErrorCode.NONE)
            if code == ErrorCode.NONE and cluster.partition(tp) is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            leader = cluster.leader_for(tp)
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or (code != ErrorCode.NONE
                                                                 and not error_for(code).retriable):
                results[tp] = error_for(code)
            elif leader is None:
                retry[tp] = offset
            else:
                grouped.setdefault(leader, {})[tp] = offset
        return grouped

    def _call_controller(self, rpc: Rpc[Req, Resp], request: Req, timeout_ms: float) -> Resp:
        controller = self._metadata.cluster.brokers.get(self._metadata.cluster.controller_id)
        if controller is None:
            return self._metadata.call_any(rpc, request, timeout_ms)
        return self._metadata.pool.get(controller.address).call(rpc, request, timeout_ms)

    def _per_topic(self, names: list[str], send: Callable[[list[str], float], dict[str, tuple[int, str]]],
                   what: str) -> None:
        """Send for all `names`, again for those answered NOT_CONTROLLER or lost in transport, until done."""
        deadline = self._now_ms() + self._default_api_timeout_ms
        errors: list[KafkaError] = []
        pending = names
        while pending:
            if self._metadata.time_to_next_update(self._now_ms()) == 0:
                self._metadata.maybe_refresh(max(deadline - self._now_ms(), 1))
            retry: list[str] = []
            try:
                results = send(pending, max(deadline - self._now_ms(), 1))
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                retry, results = pending, {}  # lost in transport: nothing is known, ask again for all
            for name in pending if not retry else ():
                code, message = results.get(name, (ErrorCode.UNKNOWN_SERVER_ERROR, f"no answer in {what} response"))
                if code == ErrorCode.NONE:
                    continue
                if code == ErrorCode.NOT_CONTROLLER:
                    retry.append(name)
                    self._metadata.request_update()
                else:
                    errors.append(error_for(code, message or f"{name}: {ErrorCode(code).name}"))
            pending = retry
            if pending:
                if self._now_ms() + self._retry_backoff_ms >= deadline:
                    raise KafkaTimeoutError(f"{what} for {pending} did not complete within"
                                            f" {self._default_api_timeout_ms} ms")
                time.sleep(self._retry_backoff_ms / 1000)
        if errors:
            raise errors[0]

    # ------------------------------------------------------------------ configs

    def describe_configs(self, config_resources: Iterable[ConfigResource]) -> dict[ConfigResource, list[ConfigEntry]]:
        """Each resource's configs; raises the first resource's KafkaError (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
        resources = list(config_resources)
        request = pb.DescribeConfigsRequest(resources=[
            pb.DescribeConfigsRequest.DescribeConfigsResource(resource_type=r.resource_type, resource_name=r.name,
                                                              configuration_keys=list(r.configs or ()))
            for r in resources])
        response = self._metadata.call_any(lambda stub: stub.DescribeConfigs, request, self._default_api_timeout_ms)
        out = {}
        for resource, result in zip(resources, response.results):
            if result.error_code != ErrorCode.NONE:
                raise error_for(result.error_code, result.error_message or f"{resource.name}")
            out[resource] = [ConfigEntry(c.name, c.value if c.HasField("value") else None, c.config_source,
                                         c.read_only, c.is_default, c.is_sensitive) for c in result.configs]
        return out

    def alter_configs(self, config_resources: Iterable[ConfigResource], validate_only: bool = False) -> None:
        """Replace each resource's overrides with its `configs` (AlterConfigs); raises the first error."""
        request = pb.AlterConfigsRequest(validate_only=validate_only, resources=[
            pb.AlterConfigsRequest.AlterConfigsResource(
                resource_type=r.resource_type, resource_name=r.name,
                configs=[pb.AlterConfigsRequest.AlterableConfig(name=k, value=v) for k, v in (r.configs or {}).items()])
            for r in config_resources])
        response = self._metadata.call_any(lambda stub: stub.AlterConfigs, request, self._default_api_timeout_ms)
        _raise_first(response.responses)

    def incremental_alter_configs(self, changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
                                  validate_only: bool = False) -> None:
        """SET / DELETE single keys of each resource (IncrementalAlterConfigs); raises the first error."""
        request = pb.IncrementalAlterConfigsRequest(validate_only=validate_only, resources=[
            pb.IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=r.resource_type, resource_name=r.name,
                configs=[pb.IncrementalAlterConfigsRequest.AlterableConfig(name=op.name, config_operation=op.op_type,
                                                                           value=op.value) for op in ops])
            for r, ops in changes.items()])
        response = self._metadata.call_any(lambda stub: stub.IncrementalAlterConfigs, request,
                                           self._default_api_timeout_ms)
        _raise_first(response.responses)

    def list_topics(self) -> list[str]:
        return sorted(self._fetch_metadata(()).topics)

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[TopicDescription]:
        """Leader, replicas, ISR and offline replicas of every partition; all topics when `topics` is None."""
        names = list(topics or ())
        cluster = self._fetch_metadata(names)
        for name in names:
            code = cluster.topic_errors.get(name, ErrorCode.NONE)
            if code != ErrorCode.NONE:
                raise error_for(code, f"topic {name!r}")
        out = []
        for name in names or sorted(cluster.topics):
            tps = cluster.topic_partitions(name) or ()
            partitions = []
            for tp in tps:
                p = cluster.partition(tp)
                if p is not None:
                    partitions.append(PartitionInfo(p.partition, p.leader, p.leader_epoch, p.replicas, p.isr,
                                                    p.offline_replicas))
            out.append(TopicDescription(name, name in cluster.internal_topics, tuple(partitions)))
        return out

    def describe_cluster(self) -> ClusterDescription:
        cluster = self._fetch_metadata(None)
        return ClusterDescription(cluster.cluster_id, cluster.controller_id,
                                  tuple(sorted(cluster.brokers.values())))

    def cluster_metadata(self) -> ClusterMetadata:
        """One Metadata request's whole answer: brokers, controller and every topic's partitions."""
        return self._fetch_metadata(None)

    # ------------------------------------------------------------------ replica state (the project's own request)

    def describe_replica_state(self, brokers: Iterable[BrokerMetadata], events_after: Mapping[int, int],
                               timeout_ms: float) -> dict[int, pb.DescribeReplicaStateResponse | KafkaError]:
        """Each broker's DescribeReplicaState (its replicas, its leaders' view of their followers, its events after
        `events_after[broker id]`), asked of all at once: a broker that does not answer within `timeout_ms`
        (paused, gone) maps to the KafkaError it failed with, so one stopped broker never holds up the others."""
        futures = {b.node_id: self._metadata.pool.get(b.address).call_async(
            lambda stub: stub.DescribeReplicaState,
            pb.DescribeReplicaStateRequest(events_after=events_after.get(b.node_id, 0)), timeout_ms)
            for b in brokers}
        answers: dict[int, pb.DescribeReplicaStateResponse | KafkaError] = {}
        for broker_id, future in futures.items():
            try:
                answers[broker_id] = future.result()
            except KafkaError as e:
                answers[broker_id] = e
        return answers

    def _fetch_metadata(self, topics: Iterable[str] | None) -> ClusterMetadata:
        # No topics in a MetadataRequest means all of them; describe_cluster wants none, but asking for all
        # is the only way proto3 can say it.
        return self._metadata.fetch(topics or (), self._default_api_timeout_ms)

    @staticmethod
    def _now_ms() -> float:
        return time.monotonic() * 1000

    # ------------------------------------------------------------------ consumer groups

    def list_consumer_groups(self, timeout_ms: float | None = None) -> list[ConsumerGroupListing]:
        return self._groups.list_consumer_groups(self._timeout(timeout_ms))

    def describe_consumer_groups(self, group_ids: Iterable[str],
                                 timeout_ms: float | None = None) -> list[ConsumerGroupDescription]:
        return self._groups.describe_consumer_groups(group_ids, self._timeout(timeout_ms))

    def list_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None,
                                    timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndMetadata]:
        return self._groups.list_consumer_group_offsets(group_id, partitions, self._timeout(timeout_ms))

    def alter_consumer_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                     timeout_ms: float | None = None) -> None:
        self._groups.alter_consumer_group_offsets(group_id, offsets, self._timeout(timeout_ms))

    def delete_consumer_groups(self, group_ids: Iterable[str], timeout_ms: float | None = None) -> dict[str, ErrorCode]:
        return self._groups.delete_consumer_groups(group_ids, self._timeout(timeout_ms))

    def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition],
                                      timeout_ms: float | None = None) -> dict[TopicPartition, ErrorCode]:
        return self._groups.delete_consumer_group_offsets(group_id, partitions, self._timeout(timeout_ms))

    def _timeout(self, timeout_ms: float | None) -> float:
        return self._default_api_timeout_ms if timeout_ms is None else timeout_ms

    def close(self) -> None:
        self._metadata.pool.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _by_topic(offsets: Mapping[TopicPartition, int]) -> dict[str, list[tuple[int, int]]]:
    grouped: dict[str, list[tuple[int, int]]] = {}
    for tp, offset in offsets.items():
        grouped.setdefault(tp.topic, []).append((tp.partition, offset))
    return grouped


def _creatable(topic: NewTopic) -> pb.CreateTopicsRequest.CreatableTopic:
    creatable = pb.CreateTopicsRequest.CreatableTopic(name=topic.name)
    if topic.replica_assignments:
        creatable.num_partitions = creatable.replication_factor = -1  # the assignment says both
        for partition, brokers in sorted(topic.replica_assignments.items()):
            creatable.assignments.add(partition_index=partition, broker_ids=list(brokers))
    else:
        creatable.num_partitions = topic.num_partitions
        creatable.replication_factor = topic.replication_factor
    for key, value in topic.topic_configs.items():
        creatable.configs.add(name=key, value=value)
    return creatable


def _raise_first(responses: Iterable[pb.AlterConfigsResourceResponse]) -> None:
    for r in responses:
        if r.error_code != ErrorCode.NONE:
            raise error_for(r.error_code, r.error_message or r.resource_name)

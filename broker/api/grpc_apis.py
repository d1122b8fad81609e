"""KafkaApis: the gRPC adapter between the wire contract (proto/minibroker.proto) and the broker's parts
(Kafka 2.x's server/KafkaApis.scala).

Each handler turns a request into plain values, calls the ReplicaManager,
AdminManager, ... and turns their answers back into a response. Every bad
input is answered with a Kafka error code in the response, per partition where
the contract has one; gRPC status codes are left to transport failures. Calls
that block on ZooKeeper run in worker threads, so the event loop never waits
on it; answers that come later (delayed produce, fetch, create topics) arrive
through a callback that resolves the handler's future, from whichever thread
completes them. The consumer-group RPCs are GroupApis' (broker/api/grpc_group_apis.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from typing import Any

import grpc

from broker.admin.admin_manager import NewPartitions, NewTopic
from broker.admin.config_admin import AlterConfigsResult
from broker.admin.delayed_create_topics import DelayedCreateTopics
from broker.api.group_operations import GroupOperations
from broker.api.grpc_group_apis import GroupApis
from broker.api.operations import INTERNAL_TOPICS, BrokerOperations, TxnMarker, duplicates, group_by_topic
from broker.api.replica_state import replica_state_response
from broker.api.transaction_operations import TransactionOperations
from broker.config.kafka_config import KafkaConfig
from broker.config.metadata_cache import EndPoint, LiveBroker, UpdateMetadataPartitionState
from broker.config.metrics import BrokerMetrics
from broker.config.topic_config import TopicConfig, TopicConfigs
from broker.fetcher.protocol import BrokerEndPoint
from broker.purgatory.purgatory import DelayedOperationPurgatory
from broker.replication.delayed_fetch import LogReadResult, PartitionFetchInfo
from broker.replication.fetch_session import FetchSessionRequest
from broker.replication.partition import FetchIsolation, LeaderAndIsrPartitionState
from broker.security.grpc_authentication import GrpcAuthenticator
from broker.security.grpc_identity import grpc_session
from common.event_ring import EVENTS
from common.security.acl import AclOperation
from common.security.authorizer import Session
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from zk.client import KafkaZkClient
from zk.paths import validate_topic

logger = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]

NO_BROKER_EPOCH = -1  # a request from a controller that does not know broker epochs: not checked


class KafkaApis(GroupApis, pb_grpc.KafkaClientServicer, pb_grpc.KafkaClusterServicer):
    def __init__(self, config: KafkaConfig, *, operations: BrokerOperations, groups: GroupOperations,
                 transactions: TransactionOperations, topic_configs: TopicConfigs, zk: KafkaZkClient,
                 topic_purgatory: DelayedOperationPurgatory[DelayedCreateTopics], broker_epoch: Callable[[], int],
                 cluster_id: str, metrics: BrokerMetrics, listener_name: str,
                 authenticator: GrpcAuthenticator, controller_requests: Executor) -> None:
        self._config = config
        # LeaderAndIsr and StopReplica create, fsync and delete logs: they run here, one at a time in arrival
        # order (Kafka's request handler threads, a controller's requests in its connection's order), and so
        # does UpdateMetadata, which must not tell clients of a leader before its LeaderAndIsr was applied.
        self._controller_requests = controller_requests
        # The listener these APIs are served on: Metadata describes the brokers as reached on it.
        self._listener_name = listener_name
        self._authenticator = authenticator
        self._operations = operations
        self._replica_manager = operations.replica_manager
        self._metadata_cache = operations.metadata_cache
        self._groups = groups
        self._transactions = transactions
        self._topic_configs = topic_configs
        self._zk = zk
        self._topic_purgatory = topic_purgatory
        self._broker_epoch = broker_epoch
        self._cluster_id = cluster_id
        self._metrics = metrics

    def _timeout_ms(self, context: Context) -> float:
        """How long a ZooKeeper-bound request may wait: its gRPC deadline, else request.timeout.ms."""
        remaining = context.time_remaining()
        return self._config.request_timeout_ms if remaining is None else remaining * 1000

    # ------------------------------------------------------------------ authorization

    def _session(self, context: Context) -> Session:
        """Who the call acts as on this listener (broker/security/grpc_identity.py)."""
        return grpc_session(context, self._authenticator)

    def _authorize_cluster_action(self, context: Context) -> bool:
        """Kafka's CLUSTER_ACTION on the cluster for the call's principal, or the cluster credential on a
        plaintext listener (common/security/cluster_action.py)."""
        return self._authenticator.authorize_cluster_action(context, self._operations.authorizer,
                                                            self._session(context))

    def _is_broker_epoch_stale(self, broker_epoch: int) -> bool:
        """Kafka's isBrokerEpochStale: a request meant for this broker's previous registration (a restart
        faster than the controller noticed) must not be applied to this one."""
        return broker_epoch != NO_BROKER_EPOCH and broker_epoch < self._broker_epoch()

    # ------------------------------------------------------------------ Produce

    async def Produce(self, request: pb.ProduceRequest, context: Context) -> pb.ProduceResponse:
        began = time.monotonic()
        response = await self._produce(request, context)
        self._metrics.record_request("Produce", (time.monotonic() - began) * 1000)
        return response

    async def _produce(self, request: pb.ProduceRequest, context: Context) -> pb.ProduceResponse:
        # Read once: each access to a bytes field copies it out of the message.
        order = [(TopicPartition(topic.name, p.index), p.records) for topic in request.topics for p in topic.partitions]
        results = await self._operations.produce(
            self._session(context), request.timeout_ms, request.acks, order,
            request.transactional_id if request.HasField("transactional_id") else None)
        tps = [tp for tp, _ in order]
        response = pb.ProduceResponse()
        if request.acks == 0:
            # Kafka sends nothing back for acks=0 and closes the connection on an error so the
            # producer refreshes its metadata; here the errors come back and nothing else does.
            tps = [tp for tp in tps if results[tp].error is not ErrorCode.NONE]
        for topic, partition_results in group_by_topic((tp, results[tp]) for tp in tps).items():
            topic_response = response.responses.add(name=topic)
            for index, result in partition_results:
                topic_response.partitions.add(
                    index=index, error_code=result.error, base_offset=result.base_offset,
                    log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset,
                    error_message=result.error_message,
                )
        return response

    # ------------------------------------------------------------------ Fetch

    async def Fetch(self, request: pb.FetchRequest, context: Context) -> pb.FetchResponse:
        began = time.monotonic()
        response = await self._fetch(request, context)
        # Kafka's request metric names: a follower's long poll is not a consumer's.
        self._metrics.record_request("FetchFollower" if request.replica_id >= 0 else "FetchConsumer",
                                     (time.monotonic() - began) * 1000)
        return response

    async def _fetch(self, request: pb.FetchRequest, context: Context) -> pb.FetchResponse:
        is_follower = request.replica_id >= 0
        requested = [(TopicPartition(topic.topic, p.partition), p) for topic in request.topics
                     for p in topic.partitions]
        if is_follower and not self._authorize_cluster_action(context):
            return self._fetch_response(
                ((tp, LogReadResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)) for tp, _ in requested),
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        infos = [PartitionFetchInfo(tp, p.fetch_offset, p.log_start_offset, max(p.partition_max_bytes, 0),
                                    p.current_leader_epoch) for tp, p in requested]
        session_id = 0
        if is_follower:
            # KIP-227: a follower's fetch goes through its session (a consumer's never does on this door).
            answer = await self._operations.fetch_in_session(
                request.replica_id, request.max_wait_ms, request.min_bytes, request.max_bytes,
                FetchSessionRequest(request.session_id, request.session_epoch, infos,
                                    [TopicPartition(t.topic, index) for t in request.forgotten_topics_data
                                     for index in t.partitions], request.replica_id))
            if answer.error is not ErrorCode.NONE:
                return pb.FetchResponse(error_code=answer.error, session_id=answer.session_id)
            answered = [(info.topic_partition, result) for info, result in answer.results]
            session_id = answer.session_id
        else:
            answered = await self._operations.fetch(
                self._session(context), request.replica_id, request.max_wait_ms, request.min_bytes,
                request.max_bytes, infos, request.isolation_level)
        if any(result.size for _, result in answered):
            # The records are read into the response: a read of the segments, so on a disk thread.
            return await self._operations.pools.disk(self._fetch_response, answered, ErrorCode.NONE, session_id)
        return self._fetch_response(answered, ErrorCode.NONE, session_id)

    @staticmethod
    def _fetch_response(results: Iterable[tuple[TopicPartition, LogReadResult]],
                        error: ErrorCode, session_id: int = 0) -> pb.FetchResponse:
        response = pb.FetchResponse(error_code=error, session_id=session_id)
        for topic, partition_results in group_by_topic(results).items():
            topic_response = response.responses.add(topic=topic)
            for index, result in partition_results:
                topic_response.partitions.add(
                    partition_index=index, error_code=result.error, high_watermark=result.high_watermark,
                    last_stable_offset=result.last_stable_offset, log_start_offset=result.log_start_offset,
                    # gRPC cannot sendfile: one pread per partition into the response.
                    records=result.records.read() if result.records is not None and result.size else b"",
                    aborted_transactions=[
                        pb.FetchResponse.AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
                        for txn in result.aborted_transactions or ()],
                )
        return response

    # ------------------------------------------------------------------ ListOffsets

    async def ListOffsets(self, request: pb.ListOffsetsRequest, context: Context) -> pb.ListOffsetsResponse:
        is_replica = request.replica_id >= 0
        authorized = not is_replica or self._authorize_cluster_action(context)
        # A replica was authorized for the cluster; a consumer's topics are checked per partition.
        session = None if is_replica else self._session(context)
        isolation = None if is_replica else FetchIsolation.for_consumer(request.isolation_level)
        requested = [(TopicPartition(t.name, p.partition_index), p) for t in request.topics for p in t.partitions]
        repeated = duplicates(tp for tp, _ in requested)
        response = pb.ListOffsetsResponse()
        for topic, partitions in group_by_topic(requested).items():
            topic_response = response.topics.add(name=topic)
            for index, p in partitions:
                tp = TopicPartition(topic, index)
                if not authorized:
                    topic_response.partitions.add(partition_index=index,
                                                  error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, timestamp=-1,
                                                  offset=-1, leader_epoch=-1)
                    continue
                found = self._operations.list_offset(session, tp, p.timestamp, isolation, p.current_leader_epoch,
                                                     tp in repeated)
                topic_response.partitions.add(partition_index=index, error_code=found.error,
                                              timestamp=found.timestamp, offset=found.offset,
                                              leader_epoch=found.leader_epoch)
        return response

    # ------------------------------------------------------------------ DeleteRecords

    async def DeleteRecords(self, request: pb.DeleteRecordsRequest, context: Context) -> pb.DeleteRecordsResponse:
        requested = [(TopicPartition(t.name, p.partition_index), p.offset) for t in request.topics
                     for p in t.partitions]
        answers = await self._operations.delete_records(self._session(context), request.timeout_ms, requested)
        response = pb.DeleteRecordsResponse()
        for topic, partitions in group_by_topic((tp, answers[tp]) for tp, _ in requested).items():
            topic_response = response.topics.add(name=topic)
            for index, (low_watermark, error) in dict(partitions).items():
                topic_response.partitions.add(partition_index=index, low_watermark=low_watermark, error_code=error)
        return response

    # ------------------------------------------------------------------ Metadata

    async def Metadata(self, request: pb.MetadataRequest, context: Context) -> pb.MetadataResponse:
        cache = self._metadata_cache
        found = await self._operations.metadata(self._session(context), list(request.topics) or None,
                                                request.allow_auto_topic_creation, self._listener_name,
                                                self._timeout_ms(context))
        response = pb.MetadataResponse(cluster_id=self._cluster_id,
                                       controller_id=-1 if cache.controller_id is None else cache.controller_id)
        for node in found.brokers:
            broker = response.brokers.add(node_id=node.id, host=node.host, port=node.port)
            if node.rack is not None:
                broker.rack = node.rack
        for name, error, metadata in found.topics:
            topic = response.topics.add(error_code=error, name=name, is_internal=name in INTERNAL_TOPICS)
            for p in () if metadata is None else metadata.partitions:
                topic.partitions.add(error_code=p.error, partition_index=p.partition, leader_id=p.leader,
                                     leader_epoch=p.leader_epoch, replica_nodes=p.replicas, isr_nodes=p.isr,
                                     offline_replicas=p.offline_replicas)
        return response

    # ------------------------------------------------------------------ CreateTopics / DeleteTopics

    async def CreateTopics(self, request: pb.CreateTopicsRequest, context: Context) -> pb.CreateTopicsResponse:
        topics = [
            NewTopic(
                t.name, t.num_partitions, t.replication_factor,
                [(a.partition_index, tuple(a.broker_ids)) for a in t.assignments],
                [(c.name, c.value if c.HasField("value") else None) for c in t.configs],
            )
            for t in request.topics
        ]
        results = await self._operations.create_topics(self._session(context), topics, request.validate_only,
                                                        request.timeout_ms)
        response = pb.CreateTopicsResponse()
        for r in results:
            response.topics.add(name=r.name, error_code=r.error, error_message=r.message,
                                num_partitions=r.num_partitions, replication_factor=r.replication_factor)
        return response

    async def CreatePartitions(self, request: pb.CreatePartitionsRequest,
                               context: Context) -> pb.CreatePartitionsResponse:
        requests = [NewPartitions(t.name, t.count, [tuple(a.broker_ids) for a in t.assignments] or None)
                    for t in request.topics]
        results = await self._operations.create_partitions(self._session(context), requests, request.validate_only,
                                                            request.timeout_ms)
        response = pb.CreatePartitionsResponse()
        for r in results:
            response.results.add(name=r.name, error_code=r.error, error_message=r.message)
        return response

    async def DeleteTopics(self, request: pb.DeleteTopicsRequest, context: Context) -> pb.DeleteTopicsResponse:
        results = await self._operations.delete_topics(self._session(context), request.topic_names)
        response = pb.DeleteTopicsResponse()
        for r in results:
            response.responses.add(name=r.name, error_code=r.error, error_message=r.message)
        return response

    # ------------------------------------------------------------------ InitProducerId

    async def InitProducerId(self, request: pb.InitProducerIdRequest,
                             context: Context) -> pb.InitProducerIdResponse:
        if request.HasField("transactional_id"):
            result = await self._transactions.init_producer_id(
                self._session(context), request.transactional_id, request.transaction_timeout_ms,
                request.producer_id if request.HasField("producer_id") else -1,
                request.producer_epoch if request.HasField("producer_epoch") else -1)
            return pb.InitProducerIdResponse(error_code=result.error, producer_id=result.producer_id,
                                             producer_epoch=result.producer_epoch)
        error, producer_id, epoch = await self._operations.init_producer_id(self._session(context),
                                                                            self._timeout_ms(context))
        return pb.InitProducerIdResponse(error_code=error, producer_id=producer_id, producer_epoch=epoch)

    # ------------------------------------------------------------------ transactions (the coordinator's calls)
    # The newest versions' answers: PRODUCER_FENCED travels as itself (the Kafka door maps it by version).

    async def AddPartitionsToTxn(self, request: pb.AddPartitionsToTxnRequest,
                                 context: Context) -> pb.AddPartitionsToTxnResponse:
        partitions = [TopicPartition(t.name, index) for t in request.topics for index in t.partitions]
        errors = await self._transactions.add_partitions_to_txn(
            self._session(context), request.transactional_id, request.producer_id, request.producer_epoch,
            partitions)
        response = pb.AddPartitionsToTxnResponse()
        for topic, by_partition in group_by_topic(errors.items()).items():
            response.results.add(name=topic, results=[
                pb.AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(partition_index=index,
                                                                                 error_code=error)
                for index, error in by_partition])
        return response

    async def AddOffsetsToTxn(self, request: pb.AddOffsetsToTxnRequest,
                              context: Context) -> pb.AddOffsetsToTxnResponse:
        error = await self._transactions.add_offsets_to_txn(self._session(context), request.transactional_id,
                                                            request.producer_id, request.producer_epoch,
                                                            request.group_id)
        return pb.AddOffsetsToTxnResponse(error_code=error)

    async def EndTxn(self, request: pb.EndTxnRequest, context: Context) -> pb.EndTxnResponse:
        error = await self._transactions.end_txn(self._session(context), request.transactional_id,
                                                 request.producer_id, request.producer_epoch, request.committed)
        return pb.EndTxnResponse(error_code=error)

    # ------------------------------------------------------------------ DescribeConfigs / AlterConfigs

    async def DescribeConfigs(self, request: pb.DescribeConfigsRequest,
                              context: Context) -> pb.DescribeConfigsResponse:
        resources = [(r.resource_type, r.resource_name, list(r.configuration_keys) or None) for r in request.resources]
        response = pb.DescribeConfigsResponse()
        for result in await self._operations.describe_configs(self._session(context), resources):
            out = response.results.add(error_code=result.error, error_message=result.message,
                                       resource_type=result.resource_type, resource_name=result.resource_name)
            for entry in result.entries:
                out.configs.add(name=entry.name, value=entry.value, read_only=entry.read_only,
                                config_source=entry.source, is_sensitive=entry.is_sensitive,
                                is_default=entry.is_default)
        return response

    # ------------------------------------------------------------------ DescribeReplicaState (the project's own)

    async def DescribeReplicaState(self, request: pb.DescribeReplicaStateRequest,
                                   context: Context) -> pb.DescribeReplicaStateResponse:
        began = time.monotonic()
        response = self._describe_replica_state(request, context)
        # Counted with the rest, so the console's cost to a broker shows in its own request metrics.
        self._metrics.record_request("DescribeReplicaState", (time.monotonic() - began) * 1000)
        return response

    def _describe_replica_state(self, request: pb.DescribeReplicaStateRequest,
                                context: Context) -> pb.DescribeReplicaStateResponse:
        states = [s for s in (p.replica_state() for p in self._replica_manager.hosted_partitions()) if s is not None]
        hosted = {s.topic_partition.topic for s in states}
        asked = set(request.topics) & hosted if request.topics else hosted
        # Describe on the topic, as ListOffsets and Metadata ask; a topic the caller may not see is left out.
        describable = self._operations.authorized_topics(self._session(context), AclOperation.DESCRIBE, asked,
                                                         log_if_denied=bool(request.topics))
        return replica_state_response(self._config.broker_id, int(time.time() * 1000),
                                      self._config.replica_lag_time_max_ms, states,
                                      EVENTS.since(request.events_after), describable)

    async def DescribeEvents(self, request: pb.DescribeEventsRequest, context: Context) -> pb.DescribeEventsResponse:
        """The active controller's DescribeEvents, forwarded (broker/admin/controller_channel.py) within the call's
        deadline; its events filtered for the caller as the controller filters them: a partition's need Describe
        on its topic, events of no one partition go to anyone."""
        began = time.monotonic()
        channel = self._operations.controller_channel
        assert channel is not None, "the broker gives its operations a ControllerChannel"
        response = await self._operations.pools.forward(channel.describe_events, request,
                                                        self._timeout_ms(context) / 1000)
        describable = self._operations.authorized_topics(
            self._session(context), AclOperation.DESCRIBE, {e.topic for e in response.events if e.topic},
            log_if_denied=False)
        kept = [e for e in response.events if not e.topic or e.topic in describable]
        del response.events[:]
        response.events.extend(kept)
        self._metrics.record_request("DescribeEvents", (time.monotonic() - began) * 1000)
        return response

    async def AlterConfigs(self, request: pb.AlterConfigsRequest, context: Context) -> pb.AlterConfigsResponse:
        resources = [(r.resource_type, r.resource_name,
                      {c.name: c.value if c.HasField("value") else None for c in r.configs})
                     for r in request.resources]
        results = await self._operations.alter_configs(self._session(context), resources, request.validate_only,
                                                       incremental=False)
        return pb.AlterConfigsResponse(responses=_alter_responses(results))

    async def IncrementalAlterConfigs(self, request: pb.IncrementalAlterConfigsRequest,
                                      context: Context) -> pb.IncrementalAlterConfigsResponse:
        resources = [(r.resource_type, r.resource_name,
                      [(c.name, c.config_operation, c.value if c.HasField("value") else None) for c in r.configs])
                     for r in request.resources]
        results = await self._operations.alter_configs(self._session(context), resources, request.validate_only,
                                                       incremental=True)
        return pb.IncrementalAlterConfigsResponse(responses=_alter_responses(results))

    # ------------------------------------------------------------------ cluster API

    async def LeaderAndIsr(self, request: pb.LeaderAndIsrRequest, context: Context) -> pb.LeaderAndIsrResponse:
        refused = self._refuse_controller_request(context, request.broker_epoch)
        if refused is not None:
            return pb.LeaderAndIsrResponse(error_code=refused, partition_errors=self._partition_errors(
                (TopicPartition(s.topic_name, s.partition_index), refused) for s in request.partition_states))

        def apply() -> pb.LeaderAndIsrResponse:
            # The request is read and answered where it is applied, off the loop: a new topic's LeaderAndIsr names
            # each of its partitions here, and decoding 1,000 of them held the loop for a quarter of a second.
            states = [
                (TopicPartition(s.topic_name, s.partition_index),
                 LeaderAndIsrPartitionState(s.controller_epoch, s.leader, s.leader_epoch, tuple(s.isr), s.zk_version,
                                            tuple(s.replicas), s.is_new))
                for s in request.partition_states
            ]
            live_leaders = [BrokerEndPoint(b.broker_id, b.host_name, b.port) for b in request.live_leaders]
            new_topics = {tp.topic for tp, _ in states if self._replica_manager.get_partition(tp) is None}
            result = self._replica_manager.become_leader_or_follower(
                request.controller_id, request.controller_epoch, states, live_leaders,
                self._load_topic_configs(new_topics))
            return pb.LeaderAndIsrResponse(error_code=result.error,
                                           partition_errors=self._partition_errors(result.partition_errors.items()))

        return await asyncio.get_running_loop().run_in_executor(self._controller_requests, apply)

    def _load_topic_configs(self, topics: Iterable[str]) -> dict[str, TopicConfig]:
        configs = {}
        for topic in topics:
            try:
                validate_topic(topic)
            except KafkaError:
                continue  # refused by the ReplicaManager, with its error code
            configs[topic] = self._topic_configs.load(topic, self._zk.get_topic_config(topic))
        return configs

    async def UpdateMetadata(self, request: pb.UpdateMetadataRequest,
                             context: Context) -> pb.UpdateMetadataResponse:
        refused = self._refuse_controller_request(context, request.broker_epoch)
        if refused is not None:
            return pb.UpdateMetadataResponse(error_code=refused)

        def apply() -> tuple[ErrorCode, set[str]]:
            # Read where it is applied, off the loop: it names every partition of the cluster after a fail-over.
            states = [
                (TopicPartition(s.topic_name, s.partition_index),
                 UpdateMetadataPartitionState(s.controller_epoch, s.leader, s.leader_epoch, tuple(s.isr),
                                              s.zk_version, tuple(s.replicas), tuple(s.offline_replicas)))
                for s in request.partition_states
            ]
            brokers = [
                LiveBroker(b.id, {e.listener: EndPoint(e.host, e.port) for e in b.endpoints},
                           b.rack if b.HasField("rack") else None)
                for b in request.live_brokers
            ]
            error = self._replica_manager.maybe_update_metadata_cache(request.controller_id,
                                                                      request.controller_epoch, states, brokers)
            return error, {tp.topic for tp, _ in states}

        # Behind the LeaderAndIsr requests that came before it: a client told a broker leads must find it leading.
        error, topics = await asyncio.get_running_loop().run_in_executor(self._controller_requests, apply)
        if error is ErrorCode.NONE:
            for topic in topics:
                self._topic_purgatory.check_and_complete(topic)
        return pb.UpdateMetadataResponse(error_code=error)

    async def StopReplica(self, request: pb.StopReplicaRequest, context: Context) -> pb.StopReplicaResponse:
        refused = self._refuse_controller_request(context, request.broker_epoch)
        if refused is not None:
            return pb.StopReplicaResponse(error_code=refused, partition_errors=self._partition_errors(
                (TopicPartition(p.topic_name, p.partition_index), refused) for p in request.partitions))

        def apply() -> pb.StopReplicaResponse:
            # Read and answered off the loop, as LeaderAndIsr: a deleted topic's partitions are all named here.
            tps = [TopicPartition(p.topic_name, p.partition_index) for p in request.partitions]
            result = self._replica_manager.stop_replicas(request.controller_id, request.controller_epoch,
                                                         request.delete_partitions, tps)
            return pb.StopReplicaResponse(error_code=result.error,
                                          partition_errors=self._partition_errors(result.partition_errors.items()))

        return await asyncio.get_running_loop().run_in_executor(self._controller_requests, apply)

    def _refuse_controller_request(self, context: Context, broker_epoch: int) -> ErrorCode | None:
        if not self._authorize_cluster_action(context):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if self._is_broker_epoch_stale(broker_epoch):
            logger.info("Received a controller request with broker epoch %d, smaller than the current broker"
                        " epoch %d", broker_epoch, self._broker_epoch())
            return ErrorCode.STALE_BROKER_EPOCH
        return None

    @staticmethod
    def _partition_errors(errors: Iterable[tuple[TopicPartition, ErrorCode]]) -> Sequence[pb.TopicPartitionError]:
        return [pb.TopicPartitionError(topic_name=tp.topic, partition_index=tp.partition, error_code=error)
                for tp, error in errors]

    async def OffsetsForLeaderEpoch(self, request: pb.OffsetsForLeaderEpochRequest,
                                    context: Context) -> pb.OffsetsForLeaderEpochResponse:
        # A follower's request needs ClusterAction on the cluster; a consumer's (KIP-320, replica_id -1) Describe on
        # each topic, as on the Kafka door.
        is_replica = request.replica_id >= 0
        authorized = not is_replica or self._authorize_cluster_action(context)
        session = None if is_replica else self._session(context)
        response = pb.OffsetsForLeaderEpochResponse()
        for t in request.topics:
            topic_response = response.topics.add(topic=t.topic)
            for p in t.partitions:
                if authorized:
                    error, epoch, end_offset = self._operations.offset_for_leader_epoch(
                        session, TopicPartition(t.topic, p.partition), p.current_leader_epoch, p.leader_epoch)
                else:
                    error, epoch, end_offset = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1, -1
                topic_response.partitions.add(error_code=error, partition=p.partition, leader_epoch=epoch,
                                              end_offset=end_offset)
        return response


    async def WriteTxnMarkers(self, request: pb.WriteTxnMarkersRequest,
                              context: Context) -> pb.WriteTxnMarkersResponse:
        """A transaction coordinator's markers (Kafka's handleWriteTxnMarkersRequest), on the inter-broker
        listener."""
        markers = [TxnMarker(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
                             [TopicPartition(p.topic_name, p.partition_index) for p in m.partitions])
                   for m in request.markers]
        if self._authorize_cluster_action(context):
            answers = await self._operations.append_txn_markers(markers)
        else:
            answers = [dict.fromkeys(m.partitions, ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for m in markers]
        return pb.WriteTxnMarkersResponse(markers=[
            pb.WriteTxnMarkersResponse.WritableTxnMarkerResult(
                producer_id=m.producer_id, partitions=self._partition_errors((tp, errors[tp]) for tp in m.partitions))
            for m, errors in zip(markers, answers, strict=True)])


def _alter_responses(results: Iterable[AlterConfigsResult]) -> list[pb.AlterConfigsResourceResponse]:
    return [pb.AlterConfigsResourceResponse(error_code=r.error, error_message=r.message, resource_type=r.resource_type,
                                            resource_name=r.resource_name) for r in results]

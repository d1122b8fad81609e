"""What every front door asks of the broker, in plain values (Kafka 2.x's KafkaApis, minus the wire).

The gRPC adapter (broker/apis.py) and the Kafka-protocol listener
(broker/api/kafka/) both turn their requests into these calls, so a produce or
a fetch takes the same path through the ReplicaManager (acks, idempotence,
min.insync.replicas, purgatory, leader-epoch fencing) whichever door it came
through. Answers that come later (delayed produce, fetch, create topics) arrive
through a callback that resolves a future, from whichever thread completes them.

Authorization happens here too, so both doors check the same thing: each call takes the asking Session
(principal, client host) and, when `authorizer.class.name` is set, refuses what Kafka 2.8's KafkaApis refuses,
with its codes: Produce needs Write on the topic, a consumer's Fetch Read, ListOffsets, OffsetForLeaderEpoch and
Metadata Describe (Metadata leaves out, or answers TOPIC_AUTHORIZATION_FAILED for, what may not be described;
auto-creation needs Create on the cluster or the topic), CreateTopics Create on the cluster or the topic,
CreatePartitions Alter, DeleteTopics and DeleteRecords Delete, Describe/AlterConfigs DescribeConfigs/
AlterConfigs on the topic or (a broker's configs) the cluster, InitProducerId IdempotentWrite on the cluster or
Write on some topic, the ACL APIs and Describe/AlterUserScramCredentials Describe/Alter on the cluster,
ElectLeaders Alter and DescribeLogDirs Describe on the cluster. With no authorizer everything is allowed. It
also tells a principal what it may do to a resource (KIP-430's authorized operations, AuthHelper's).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from broker.admin.admin_manager import AdminManager, CreateTopicResult, DeleteTopicResult, NewPartitions, NewTopic
from broker.admin.config_admin import AlterConfigsResult, ConfigAdmin, DescribeConfigsResult
from broker.admin.config_admin import ResourceType as ConfigResourceType
from broker.admin.controller_channel import ControllerChannel, ElectionResults
from broker.admin.delayed_create_topics import DelayedCreateTopics
from broker.admin.producer_id_manager import ProducerIdManager
from broker.admin.scram_admin import Deletion, DescribeResult, Upsertion, UserResult, UserScramAdmin
from broker.api.handler_pools import HandlerPools
from broker.config.kafka_config import KafkaConfig
from broker.config.metadata_cache import MetadataCache, Node, TopicMetadata
from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC_NAME
from broker.fetcher.protocol import MAX_TIMESTAMP
from broker.log.log import AppendOrigin
from broker.log.producer_state import ActiveProducer
from broker.purgatory.completion import Completion
from broker.purgatory.purgatory import DelayedOperationPurgatory
from broker.replication.delayed_delete_records import DeleteRecordsPartitionStatus
from broker.replication.delayed_fetch import FetchParams, FetchResults, LogReadResult, PartitionFetchInfo
from broker.replication.delayed_produce import ProducePartitionResponse
from broker.replication.fetch_session import FetchAnswer, FetchContext, FetchSessionRequest
from broker.replication.log_dirs import LogDirInfo
from broker.replication.partition import FetchIsolation
from broker.replication.replica_manager import ReplicaManager
from common.record import (
    ControlRecordType,
    build_end_txn_marker,
    has_more_than_one_batch,
    has_transactional_batch,
)
from common.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ResourceType,
    to_32bit_field,
)
from common.security.authorizer import AclAuthorizer, Session
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from zk.acl_store import ZkAclStore
from zk.paths import validate_topic

logger = logging.getLogger(__name__)

T = TypeVar("T")

CONSUMER_REPLICA_ID = -1
# Kafka's Topic.INTERNAL_TOPICS: written only by their coordinators, flagged internal in Metadata.
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME})


def group_by_topic(items: Iterable[tuple[TopicPartition, T]]) -> dict[str, list[tuple[int, T]]]:
    """Per topic, in first-seen order, the partitions' values in request order."""
    grouped: dict[str, list[tuple[int, T]]] = {}
    for tp, value in items:
        grouped.setdefault(tp.topic, []).append((tp.partition, value))
    return grouped


def duplicates(tps: Iterable[TopicPartition]) -> set[TopicPartition]:
    seen: set[TopicPartition] = set()
    found = set()
    for tp in tps:
        if tp in seen:
            found.add(tp)
        seen.add(tp)
    return found


@dataclass(frozen=True, slots=True)
class OffsetForTimestamp:
    error: ErrorCode
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


# (producer id, the __consumer_offsets partitions its marker is now in, commit?): what the group coordinator
# hears once a marker on its partitions is acknowledged.
OffsetsTxnCompletion = Callable[[int, list[int], bool], None]


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One marker of a WriteTxnMarkers request: a transaction's outcome for each of its partitions here."""

    producer_id: int
    producer_epoch: int
    commit: bool  # transaction_result: True COMMIT, False ABORT
    coordinator_epoch: int
    partitions: list[TopicPartition]


@dataclass(frozen=True, slots=True)
class TopicsMetadata:
    brokers: list[Node]
    topics: list[tuple[str, ErrorCode, TopicMetadata | None]]  # requested order; metadata None when unknown


class BrokerOperations:
    def __init__(self, config: KafkaConfig, *, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                 admin_manager: AdminManager, producer_ids: ProducerIdManager,
                 topic_purgatory: DelayedOperationPurgatory[DelayedCreateTopics],
                 loop: asyncio.AbstractEventLoop, config_admin: ConfigAdmin | None = None,
                 acl_store: ZkAclStore | None = None, scram_admin: UserScramAdmin | None = None,
                 controller_channel: ControllerChannel | None = None,
                 pools: HandlerPools | None = None,
                 on_offsets_txn_completion: OffsetsTxnCompletion | None = None) -> None:
        self.config = config
        # The group coordinator's handleTxnCompletion: told of each marker acknowledged on __consumer_offsets.
        self._on_offsets_txn_completion = on_offsets_txn_completion
        self.controller_channel = controller_channel
        # Where ZooKeeper calls and disk work of requests run (broker/api/handler_pools.py).
        self.pools = pools or HandlerPools(config.zookeeper_max_in_flight_requests, config.num_io_threads)
        self.config_admin = config_admin
        self.scram_admin = scram_admin
        # None: no authorizer.class.name, nothing is checked (and the ACL APIs answer SECURITY_DISABLED).
        self.acl_store = acl_store
        self.authorizer: AclAuthorizer | None = None if acl_store is None else acl_store.authorizer
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self._admin_manager = admin_manager
        self._producer_ids = producer_ids
        self._topic_purgatory = topic_purgatory
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def completion(self) -> Completion[T]:
        return Completion(self._loop, self._loop_thread)

    def _timeout_ms(self, timeout_ms: float | None) -> float:
        return self.config.request_timeout_ms if timeout_ms is None else timeout_ms

    def _zookeeper_wait_ms(self, timeout_ms: float | None) -> float:
        """How long a request waits for ZooKeeper: its timeout, and never past zookeeper.connection.timeout.ms,
        after which Kafka's ZooKeeperClient gives up waiting for a connection (waitUntilConnected)."""
        wait = self._timeout_ms(timeout_ms if timeout_ms is None or timeout_ms > 0 else None)
        return min(wait, self.config.zookeeper_connection_timeout_millis)

    async def _zookeeper_or(self, what: str, call: Callable[[], T], on_timeout: Callable[[KafkaError], T],
                            timeout_ms: float | None = None) -> T:
        """`call` bounded as `_zookeeper_bound` does (by the request's timeout, at most
        zookeeper.connection.timeout.ms), and `on_timeout`'s answer when ZooKeeper did not answer in time: a
        connection answers in order, so one request waiting out an outage would hold up every later one."""
        try:
            return await self._zookeeper_bound(what, call, self._zookeeper_wait_ms(timeout_ms))
        except KafkaError as e:
            if e.code is not ErrorCode.REQUEST_TIMED_OUT:
                raise
            return on_timeout(e)

    async def _zookeeper_bound(self, what: str, call: Callable[[], T], timeout_ms: float) -> T:
        """`call` (it reads or writes ZooKeeper) in a worker thread, waited for no longer than `timeout_ms`.
        During a ZooKeeper outage the call retries until reconnected; the request gets KafkaError(REQUEST_TIMED_OUT)
        at its timeout instead of a wait as long as the outage (the call may still complete afterwards, as a
        timed-out Kafka request may), with a message and a WARN line that say ZooKeeper is what did not answer,
        where it is, and whether this broker is connected to it."""
        try:
            return await self.pools.zookeeper_bound(call, timeout_ms)
        except KafkaError as e:
            if e.code is not ErrorCode.REQUEST_TIMED_OUT:
                raise
            state = ("this broker is not connected to it (unreachable)" if not self._admin_manager.zookeeper_connected
                     else "this broker is connected to it, but it did not answer")
            message = (f"ZooKeeper at {self.config.zookeeper_connect} did not answer within {timeout_ms:.0f} ms:"
                       f" {state}")
            logger.warning("%s: %s", what, message)
            raise KafkaError(message, ErrorCode.REQUEST_TIMED_OUT) from None

    # ------------------------------------------------------------------ authorization (AuthHelper)

    def authorize(self, session: Session, operation: AclOperation, resource_type: ResourceType, name: str,
                  log_if_denied: bool = True) -> bool:
        return self.authorizer is None or self.authorizer.authorize(session, operation, resource_type, name,
                                                                   log_if_denied)

    def authorized_topics(self, session: Session, operation: AclOperation, topics: Iterable[str],
                          log_if_denied: bool = True) -> set[str]:
        """AuthHelper.filterByAuthorized for topics: each name decided once, however often it appears."""
        return {t for t in set(topics) if self.authorize(session, operation, ResourceType.TOPIC, t, log_if_denied)}

    def authorize_cluster(self, session: Session, operation: AclOperation, log_if_denied: bool = True) -> bool:
        return self.authorize(session, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied)

    def authorize_follower(self, session: Session) -> bool:
        """A request on the Kafka door that claims to come from a follower (Fetch, ListOffsets or
        OffsetForLeaderEpoch with replica_id >= 0): Kafka's CLUSTER_ACTION on the cluster, the denial logged with
        the principal. Without an authorizer it is refused all the same: followers fetch over gRPC, where the
        cluster credential or a certificate proves them, and this door carries neither."""
        return self.authorizer is not None and self.authorize_cluster(session, AclOperation.CLUSTER_ACTION)

    def authorized_operations(self, session: Session, resource_type: ResourceType, name: str) -> int:
        """AuthHelper.authorizedOperations (KIP-430): the bit field of what the principal may do to the resource,
        of the operations an ACL on its type can name (AclEntry.supportedOperations); all of them without an
        authorizer, as Kafka answers then."""
        supported = SUPPORTED_OPERATIONS[resource_type]
        if self.authorizer is None:
            return to_32bit_field(supported)
        return to_32bit_field(self.authorizer.allowed_operations(session, supported, resource_type, name))

    def cluster_authorized_operations(self, session: Session) -> int:
        """Metadata's cluster_authorized_operations: 0 to a principal that may not Describe the cluster (a denial
        logged, as KafkaApis checks it), else the cluster's authorized operations."""
        if not self.authorize_cluster(session, AclOperation.DESCRIBE):
            return 0
        return self.authorized_operations(session, ResourceType.CLUSTER, CLUSTER_NAME)

    # ------------------------------------------------------------------ Produce

    def produce(self, session: Session, timeout_ms: int, acks: int, partitions: Sequence[tuple[TopicPartition, bytes]],
                transactional_id: str | None = None) -> asyncio.Future[dict[TopicPartition, ProducePartitionResponse]]:
        """Append each partition's records (ReplicaManager.appendRecords); a future of every partition's answer.
        A topic the principal may not Write is TOPIC_AUTHORIZATION_FAILED and nothing of it is appended.
        Transactional batches need the request's transactional id and Write on it (KafkaApis), else the whole
        request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

        Synchronous up to the append, so requests on one connection append in the order they are called.
        """
        entries: list[tuple[TopicPartition, bytes]] = []
        refused: dict[TopicPartition, ProducePartitionResponse] = {}
        if any(has_transactional_batch(records) for _, records in partitions) and (
                transactional_id is None
                or not self.authorize(session, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)):
            denied: asyncio.Future[dict[TopicPartition, ProducePartitionResponse]] = self._loop.create_future()
            denied.set_result({tp: ProducePartitionResponse(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                               for tp, _ in partitions})
            return denied
        repeated = duplicates(tp for tp, _ in partitions)
        writable = self.authorized_topics(session, AclOperation.WRITE, (tp.topic for tp, _ in partitions))
        for tp, records in partitions:
            if tp in repeated:
                refused[tp] = ProducePartitionResponse(ErrorCode.INVALID_REQUEST,
                                                       error_message=f"{tp} appears more than once in the request")
            elif tp.topic not in writable:
                refused[tp] = ProducePartitionResponse(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif not self.metadata_cache.contains(tp):
                refused[tp] = ProducePartitionResponse(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                       error_message=f"Unknown topic or partition {tp}")
            elif tp.topic in INTERNAL_TOPICS:
                # Only its coordinator writes an internal topic (Kafka's internalTopicsAllowed).
                refused[tp] = ProducePartitionResponse(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                       error_message=f"Cannot append to internal topic {tp.topic}")
            elif has_more_than_one_batch(records):
                # Kafka's LogValidator (getFirstBatchAndMaybeValidateNoMoreBatches): a client sends at most one v2
                # batch per partition. Else a retried first batch, answered as a duplicate, would hide the rest.
                refused[tp] = ProducePartitionResponse(ErrorCode.INVALID_RECORD,
                                                       error_message="Compressed outer record has more than one batch")
            else:
                entries.append((tp, records))
        result: asyncio.Future[dict[TopicPartition, ProducePartitionResponse]] = self._loop.create_future()
        if not entries:
            result.set_result(refused)
            return result
        completion: Completion[dict[TopicPartition, ProducePartitionResponse]] = self.completion()
        self.replica_manager.append_records(timeout_ms, acks, entries, completion)

        def merge(done: asyncio.Future[dict[TopicPartition, ProducePartitionResponse]]) -> None:
            if not result.done():
                result.set_result({**done.result(), **refused})

        completion.future.add_done_callback(merge)
        return result

    # ------------------------------------------------------------------ Fetch

    async def fetch_in_session(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                               request: FetchSessionRequest) -> FetchAnswer:
        """A follower's fetch with KIP-227's session fields (broker/replication/fetch_session.py): a full fetch
        creates a session, an incremental one reads what it names and what changed in the session, and is
        answered with what the follower has not seen; a session error is answered alone. Its door checked
        ClusterAction."""
        context = self.replica_manager.fetch_session_cache.new_context(request)
        if context.error is not ErrorCode.NONE:
            return context.answer([])
        params = FetchParams(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                             max_bytes=max_bytes, isolation=FetchIsolation.LOG_END, fetch_only_from_leader=True)
        return context.answer(await self._read_known(params, context.partitions_to_read(), context))

    async def _read_known(self, params: FetchParams, requested: Sequence[PartitionFetchInfo],
                          context: FetchContext | None = None, refused: Sequence[LogReadResult | None] = ()
                          ) -> FetchResults:
        """ReplicaManager.fetchMessages over the partitions this broker knows, in request order; an unknown one
        (or one `refused` names) answered here."""
        infos: list[PartitionFetchInfo] = []
        slots: list[LogReadResult | None] = []
        for i, p in enumerate(requested):
            refusal = refused[i] if refused else None
            if refusal is not None:
                slots.append(refusal)
            elif self.metadata_cache.contains(p.topic_partition):
                infos.append(p)
                slots.append(None)
            else:
                slots.append(LogReadResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        results: FetchResults = []
        if infos or (context is not None and context.wake_key is not None):
            completion: Completion[FetchResults] = self.completion()
            self.replica_manager.fetch_messages(params, infos, completion, context)
            results = await completion.future
        # A session's parked fetch may have read more partitions (changed while it waited): after the named ones.
        read = iter(results)
        merged = [(p, slot) if slot is not None else next(read) for p, slot in zip(requested, slots)]
        merged.extend(read)
        return merged

    async def fetch(self, session: Session, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                    requested: Sequence[PartitionFetchInfo], isolation_level: int = 0
                    ) -> list[tuple[TopicPartition, LogReadResult]]:
        """ReplicaManager.fetchMessages for a consumer (replica_id -1) or a follower; each partition's result
        in request order (unknown partitions answered here). A consumer needs Read on each topic; a follower's
        right to fetch (ClusterAction) is its door's to check (`authorize_follower`, the gRPC authenticator).
        A consumer's `isolation_level` 1 (READ_COMMITTED) reads to the last stable offset and gets the
        aborted transactions of what it read; a follower reads to the log end whatever it asks."""
        is_follower = replica_id >= 0
        readable = None if is_follower else self.authorized_topics(
            session, AclOperation.READ, (p.topic_partition.topic for p in requested))
        refused = [] if readable is None else [
            None if p.topic_partition.topic in readable else LogReadResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for p in requested]
        params = FetchParams(
            replica_id=replica_id if is_follower else CONSUMER_REPLICA_ID,
            max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
            isolation=FetchIsolation.LOG_END if is_follower else FetchIsolation.for_consumer(isolation_level),
            fetch_only_from_leader=True,
        )
        return [(p.topic_partition, result) for p, result in await self._read_known(params, requested, refused=refused)]

    # ------------------------------------------------------------------ ListOffsets / OffsetsForLeaderEpoch

    def list_offset(self, session: Session | None, tp: TopicPartition, timestamp: int, isolation: FetchIsolation | None,
                    current_leader_epoch: int, duplicate: bool) -> OffsetForTimestamp:
        # A replica (no session) proved itself at its door; a consumer needs Describe on the topic.
        if session is not None and not self.authorize(session, AclOperation.DESCRIBE, ResourceType.TOPIC, tp.topic):
            return OffsetForTimestamp(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        if duplicate or timestamp < MAX_TIMESTAMP:
            return OffsetForTimestamp(ErrorCode.INVALID_REQUEST)
        try:
            found = self.replica_manager.fetch_offset_for_timestamp(tp, timestamp, isolation, current_leader_epoch)
        except KafkaError as e:
            return OffsetForTimestamp(e.code)
        if found is None:
            return OffsetForTimestamp(ErrorCode.NONE)
        return OffsetForTimestamp(ErrorCode.NONE, *found)

    def offset_for_leader_epoch(self, session: Session | None, tp: TopicPartition, current_leader_epoch: int,
                                leader_epoch: int) -> tuple[ErrorCode, int, int]:
        """(error, leader epoch, end offset) as OffsetsForLeaderEpoch answers it. A consumer (a session) needs
        Describe on the topic; a follower (None) was checked by its door."""
        if session is not None and not self.authorize(session, AclOperation.DESCRIBE, ResourceType.TOPIC, tp.topic):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1
        try:
            epoch, end_offset = self.replica_manager.last_offset_for_leader_epoch(tp, current_leader_epoch,
                                                                                 leader_epoch)
        except KafkaError as e:
            return e.code, -1, -1
        return ErrorCode.NONE, epoch, end_offset

    # ------------------------------------------------------------------ DeleteRecords

    async def delete_records(self, session: Session, timeout_ms: int, requested: Sequence[tuple[TopicPartition, int]]
                             ) -> dict[TopicPartition, tuple[int, ErrorCode]]:
        """ReplicaManager.deleteRecords: each partition's (low watermark, error), -1 on error; unknown,
        repeated and (Delete on the topic) unauthorized partitions answered here."""
        repeated = duplicates(tp for tp, _ in requested)
        deletable = self.authorized_topics(session, AclOperation.DELETE, (tp.topic for tp, _ in requested))
        answers: dict[TopicPartition, tuple[int, ErrorCode]] = {}
        offsets: dict[TopicPartition, int] = {}
        for tp, offset in requested:
            if tp in repeated:
                answers[tp] = (-1, ErrorCode.INVALID_REQUEST)
            elif tp.topic not in deletable:
                answers[tp] = (-1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif not self.metadata_cache.contains(tp):
                answers[tp] = (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                offsets[tp] = offset
        if offsets:
            completion: Completion[dict[TopicPartition, DeleteRecordsPartitionStatus]] = self.completion()
            # Off the event loop: the leader writes its log-start-offset-checkpoint (an fsync) before waiting.
            await self.pools.disk(self.replica_manager.delete_records, timeout_ms, offsets, completion)
            for tp, status in (await completion.future).items():
                answers[tp] = (status.low_watermark, status.error)
        return answers

    # ------------------------------------------------------------------ ElectLeaders

    async def elect_leaders(self, session: Session, election_type: int, partitions: Sequence[TopicPartition] | None,
                            timeout_ms: int) -> tuple[ErrorCode, ElectionResults]:
        """Kafka's handleElectReplicaLeader: Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED for the request
        and each partition named; no partitions named (null) is every partition this broker's metadata knows.
        The election is the controller process's: forwarded to it (broker/admin/controller_channel.py)."""
        if not self.authorize_cluster(session, AclOperation.ALTER):
            refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return refused, dict.fromkeys(partitions or (), (refused, None))
        if partitions is None:
            cache = self.metadata_cache
            partitions = [TopicPartition(topic, index) for topic in sorted(cache.get_all_topics())
                          for index in range(cache.partition_count(topic))]
        assert self.controller_channel is not None, "the broker gives its operations a ControllerChannel"
        results = await self.pools.forward(self.controller_channel.elect_leaders, election_type, list(partitions),
                                             timeout_ms)
        return ErrorCode.NONE, results

    # ------------------------------------------------------------------ DescribeLogDirs

    async def describe_log_dirs(self, session: Session, partitions: Sequence[TopicPartition] | None
                                ) -> tuple[ErrorCode, list[LogDirInfo]]:
        """Kafka's handleDescribeLogDirsRequest: Describe on the cluster, else CLUSTER_AUTHORIZATION_FAILED and no
        dirs; None asks for every replica this broker has a log of."""
        if not self.authorize_cluster(session, AclOperation.DESCRIBE):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, []
        return ErrorCode.NONE, await self.pools.disk(
            self.replica_manager.describe_log_dirs, None if partitions is None else set(partitions))

    # ------------------------------------------------------------------ DescribeProducers

    def describe_producers(self, session: Session, topics: Sequence[tuple[str, Sequence[int]]]
                           ) -> list[tuple[str, list[tuple[int, ErrorCode, list[ActiveProducer]]]]]:
        """Kafka's handleDescribeProducersRequest (KIP-664): each partition's active producers as this broker's
        replica (leader or follower) knows them. A topic the principal may not Read is TOPIC_AUTHORIZATION_FAILED,
        an unknown one UNKNOWN_TOPIC_OR_PARTITION, for each of its partitions; a partition this broker holds no
        replica of is NOT_LEADER_OR_FOLLOWER (the ReplicaManager's getPartitionOrError)."""
        readable = self.authorized_topics(session, AclOperation.READ, (topic for topic, _ in topics))
        answers = []
        for topic, partitions in topics:
            refusal = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if topic not in readable
                       else None if self.metadata_cache.contains_topic(topic) else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            states: list[tuple[int, ErrorCode, list[ActiveProducer]]] = []
            for partition in partitions:
                if refusal is not None:
                    states.append((partition, refusal, []))
                    continue
                try:
                    producers = self.replica_manager.active_producer_state(TopicPartition(topic, partition))
                except KafkaError as e:
                    states.append((partition, ErrorCode(e.code), []))
                else:
                    states.append((partition, ErrorCode.NONE, producers))
            answers.append((topic, states))
        return answers

    # ------------------------------------------------------------------ Metadata

    async def metadata(self, session: Session, topics: Sequence[str] | None, allow_auto_topic_creation: bool,
                       listener_name: str, timeout_ms: float | None = None) -> TopicsMetadata:
        """The live brokers and the requested topics (all when None) as reached on `listener_name`; unknown
        topics auto-created when asked and auto.create.topics.enable allows it, waiting on ZooKeeper no longer
        than `timeout_ms` (default request.timeout.ms): REQUEST_TIMED_OUT for those topics then.

        A topic the principal may not Describe is left out of an all-topics answer and answered
        TOPIC_AUTHORIZATION_FAILED when named (without saying whether it exists); an unknown topic it may not
        Create (on the cluster or the topic) is TOPIC_AUTHORIZATION_FAILED instead of being created."""
        cache = self.metadata_cache
        names = list(dict.fromkeys(topics)) if topics is not None else sorted(cache.get_all_topics())
        describable = self.authorized_topics(session, AclOperation.DESCRIBE, names, log_if_denied=topics is not None)
        if topics is None:
            names = [name for name in names if name in describable]
        known = {t.name: t for t in cache.get_topic_metadata([n for n in names if n in describable], listener_name)}
        unknown: dict[str, ErrorCode] = {name: ErrorCode.TOPIC_AUTHORIZATION_FAILED
                                         for name in names if name not in describable}
        to_create = []
        for name in names:
            if name in known or name in unknown:
                continue
            try:
                validate_topic(name)
            except KafkaError as e:
                unknown[name] = e.code
                continue
            if allow_auto_topic_creation and self.config.auto_create_topics_enable:
                to_create.append(name)
            else:
                unknown[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if to_create and not self.authorize_cluster(session, AclOperation.CREATE, log_if_denied=False):
            creatable = self.authorized_topics(session, AclOperation.CREATE, to_create)
            unknown.update((name, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for name in to_create if name not in creatable)
            to_create = [name for name in to_create if name in creatable]
        if to_create:
            try:
                created = await self._zookeeper_bound(
                    "Auto-creating topics", lambda: [self._admin_manager.auto_create_topic(t) for t in to_create],
                    self._timeout_ms(timeout_ms))
            except KafkaError as e:
                created = [e.code] * len(to_create)
            unknown.update(zip(to_create, created))
        return TopicsMetadata(
            cache.get_alive_brokers(listener_name),
            [(name, known[name].error, known[name]) if name in known else (name, unknown[name], None)
             for name in names])

    # ------------------------------------------------------------------ CreateTopics / DeleteTopics

    async def create_topics(self, session: Session, topics: Sequence[NewTopic], validate_only: bool,
                            timeout_ms: int) -> list[CreateTopicResult]:
        """AdminManager.createTopics (it writes ZooKeeper), then wait up to timeout_ms until every broker's
        metadata has the new topics (DelayedCreateTopics). Create on the cluster allows every topic, else
        Create on each topic."""
        if self.authorize_cluster(session, AclOperation.CREATE, log_if_denied=False):
            allowed = {t.name for t in topics}
        else:
            allowed = self.authorized_topics(session, AclOperation.CREATE, (t.name for t in topics))
        results = await self._authorized_admin(
            "CreateTopics", self._admin_manager.create_topics, [t for t in topics if t.name in allowed],
            [t.name for t in topics], allowed, validate_only, timeout_ms)
        return await self._await_leaders(results, timeout_ms, validate_only)

    async def create_partitions(self, session: Session, requests: Sequence[NewPartitions], validate_only: bool,
                                timeout_ms: int) -> list[CreateTopicResult]:
        """AdminManager.createPartitions (it writes the topics' grown assignments to ZooKeeper; the controller
        creates the partitions), then wait as CreateTopics does (Kafka's DelayedCreatePartitions). Alter on
        each topic; a topic named twice is INVALID_REQUEST, answered once (KafkaApis' dupes)."""
        named = [r.topic for r in requests]
        repeated = [name for name in dict.fromkeys(named) if named.count(name) > 1]
        requests = [r for r in requests if r.topic not in repeated]
        allowed = self.authorized_topics(session, AclOperation.ALTER, (r.topic for r in requests))
        results = await self._authorized_admin(
            "CreatePartitions", self._admin_manager.create_partitions, [r for r in requests if r.topic in allowed],
            [r.topic for r in requests], allowed, validate_only, timeout_ms)
        return [*await self._await_leaders(results, timeout_ms, validate_only),
                *(CreateTopicResult(name, ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
                  for name in repeated)]

    async def _authorized_admin(self, what: str, call: Callable[[list[T], bool], list[CreateTopicResult]],
                                requests: list[T], names: Sequence[str], allowed: set[str], validate_only: bool,
                                timeout_ms: int) -> list[CreateTopicResult]:
        """`call` (it writes ZooKeeper) on the authorized requests; every name's result in request order,
        TOPIC_AUTHORIZATION_FAILED for the others, REQUEST_TIMED_OUT naming ZooKeeper when it did not answer."""
        try:
            done = iter(await self._zookeeper_bound(what, lambda: call(requests, validate_only),
                                                    self._zookeeper_wait_ms(timeout_ms)) if requests else [])
        except KafkaError as e:
            done = iter([CreateTopicResult(name, e.code, e.message) for name in names if name in allowed])
        return [next(done) if name in allowed else CreateTopicResult(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                                     "Authorization failed.")
                for name in names]

    async def _await_leaders(self, results: list[CreateTopicResult], timeout_ms: int,
                             validate_only: bool) -> list[CreateTopicResult]:
        """Answer once every partition written has a leader in this broker's metadata, or at the timeout."""
        if timeout_ms <= 0 or validate_only or not any(r.error is ErrorCode.NONE for r in results):
            return results
        completion: Completion[list[CreateTopicResult]] = self.completion()
        delayed = DelayedCreateTopics(timeout_ms, results, self.metadata_cache, completion)
        self._topic_purgatory.try_complete_else_watch(delayed, [r.name for r in results])
        return await completion.future

    async def delete_topics(self, session: Session, names: Sequence[str]) -> list[DeleteTopicResult]:
        """AdminManager.deleteTopics for the topics the principal may Delete; one it may not even Describe is
        TOPIC_AUTHORIZATION_FAILED whether or not it exists, one it may describe but that does not exist
        UNKNOWN_TOPIC_OR_PARTITION (KafkaApis.handleDeleteTopicsRequest's order)."""
        if self.authorizer is None:
            return await self._delete_topics(list(names))
        describable = self.authorized_topics(session, AclOperation.DESCRIBE, names)
        deletable = self.authorized_topics(session, AclOperation.DELETE, names)
        refused: dict[str, DeleteTopicResult] = {}
        for name in names:
            if name not in describable or (self.metadata_cache.contains_topic(name) and name not in deletable):
                refused[name] = DeleteTopicResult(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        allowed = [name for name in names if name not in refused]
        done = iter(await self._delete_topics(allowed) if allowed else [])
        return [refused[name] if name in refused else next(done) for name in names]

    async def _delete_topics(self, names: list[str]) -> list[DeleteTopicResult]:
        return await self._zookeeper_or("DeleteTopics", lambda: self._admin_manager.delete_topics(names),
                                        lambda e: [DeleteTopicResult(name, e.code, e.message) for name in names])

    # ------------------------------------------------------------------ InitProducerId

    async def init_producer_id(self, session: Session, timeout_ms: float | None = None) -> tuple[ErrorCode, int, int]:
        """(error, producer id, producer epoch) for an idempotent producer; REQUEST_TIMED_OUT when claiming a
        block from ZooKeeper takes longer than `timeout_ms` (default request.timeout.ms). The principal needs
        IdempotentWrite on the cluster or, as Kafka 2.8 allows (KIP-679), Write on some topic. A transactional
        producer's id comes from the transaction coordinator (transaction_operations.py)."""
        if self.authorizer is not None and not (
                self.authorize_cluster(session, AclOperation.IDEMPOTENT_WRITE, log_if_denied=False)
                or self.authorizer.authorize_by_resource_type(session, AclOperation.WRITE, ResourceType.TOPIC)):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1, -1
        try:
            producer_id = await self._zookeeper_bound("InitProducerId", self._producer_ids.generate_producer_id,
                                                      self._timeout_ms(timeout_ms))
        except KafkaError as e:
            return e.code, -1, -1
        except Exception:
            logger.exception("Failed to allocate a producer id")
            return ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1
        return ErrorCode.NONE, producer_id, 0

    # ------------------------------------------------------------------ WriteTxnMarkers

    async def write_txn_markers(self, session: Session, markers: Sequence[TxnMarker]
                                ) -> list[dict[TopicPartition, ErrorCode]]:
        """Kafka's handleWriteTxnMarkersRequest: each marker appended to each of its partitions with acks=all as
        the coordinator's (AppendOrigin.COORDINATOR, internal topics allowed); each marker's partition errors, in
        request order. The sender needs ClusterAction on the cluster, as Kafka asks of a broker."""
        if not self.authorize_cluster(session, AclOperation.CLUSTER_ACTION):
            return [dict.fromkeys(m.partitions, ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for m in markers]
        return await self.append_txn_markers(markers)

    async def append_txn_markers(self, markers: Sequence[TxnMarker]) -> list[dict[TopicPartition, ErrorCode]]:
        """The markers appended, for a sender already known to be a broker (the gRPC door checks ClusterAction
        or the cluster credential itself). Once a marker is acknowledged on __consumer_offsets partitions, the
        group coordinator completes the producer's pending offsets there before the answer goes, so an
        OffsetFetch after it sees them."""
        now = time.time_ns() // 1_000_000  # MemoryRecords.withEndTransactionMarker stamps the wall clock
        futures = []
        for marker in markers:
            known = [tp for tp in marker.partitions if self.metadata_cache.contains(tp)]
            unknown = dict.fromkeys((tp for tp in marker.partitions if tp not in known),
                                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            completion: Completion[dict[TopicPartition, ProducePartitionResponse]] = self.completion()
            if known:
                batch = build_end_txn_marker(
                    marker.producer_id, marker.producer_epoch,
                    ControlRecordType.COMMIT if marker.commit else ControlRecordType.ABORT,
                    marker.coordinator_epoch, now)
                self.replica_manager.append_records(self.config.request_timeout_ms, -1,
                                                    [(tp, batch) for tp in known], completion,
                                                    AppendOrigin.COORDINATOR)
            else:
                completion({})
            futures.append((unknown, completion.future))
        answers = []
        for marker, (unknown, future) in zip(markers, futures, strict=True):
            appended = await future
            answers.append({**unknown, **{tp: r.error for tp, r in appended.items()}})
            offsets_partitions = [tp.partition for tp, r in appended.items()
                                  if tp.topic == GROUP_METADATA_TOPIC_NAME and r.error is ErrorCode.NONE]
            if offsets_partitions and self._on_offsets_txn_completion is not None:
                self._on_offsets_txn_completion(marker.producer_id, offsets_partitions, marker.commit)
        return answers

    # ------------------------------------------------------------------ DescribeConfigs / AlterConfigs

    def _config_refusal(self, session: Session, operation: AclOperation, resource_type: int,
                        name: str) -> ErrorCode | None:
        """A topic's configs need the operation on the topic, a broker's on the cluster (KafkaApis)."""
        if resource_type == ConfigResourceType.TOPIC:
            allowed = self.authorize(session, operation, ResourceType.TOPIC, name)
            return None if allowed else ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if resource_type == ConfigResourceType.BROKER:
            return None if self.authorize_cluster(session, operation) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return None  # ConfigAdmin answers an unknown resource type

    def _config_admin(self) -> ConfigAdmin:
        assert self.config_admin is not None, "the broker gives its operations a ConfigAdmin"
        return self.config_admin

    async def describe_configs(self, session: Session, resources: Sequence[tuple[int, str, Sequence[str] | None]]
                               ) -> list[DescribeConfigsResult]:
        refusals = [self._config_refusal(session, AclOperation.DESCRIBE_CONFIGS, t, n) for t, n, _ in resources]
        allowed = [r for r, refusal in zip(resources, refusals) if refusal is None]
        done = iter(await self._zookeeper_or(
            "DescribeConfigs", lambda: self._config_admin().describe_configs(allowed),
            lambda e: [DescribeConfigsResult(t, n, e.code, e.message) for t, n, _ in allowed]) if allowed else [])
        return [next(done) if refusal is None else DescribeConfigsResult(t, n, refusal, "Authorization failed.")
                for (t, n, _), refusal in zip(resources, refusals)]

    async def alter_configs(self, session: Session, resources: Sequence[tuple[int, str, Any]], validate_only: bool,
                            incremental: bool) -> list[AlterConfigsResult]:
        """AlterConfigs (each resource's overrides become the mapping given) or IncrementalAlterConfigs (a list
        of (key, op, value))."""
        admin = self._config_admin()
        call = admin.incremental_alter_configs if incremental else admin.alter_configs
        refusals = [self._config_refusal(session, AclOperation.ALTER_CONFIGS, t, n) for t, n, _ in resources]
        allowed = [r for r, refusal in zip(resources, refusals) if refusal is None]
        try:
            done = iter(await self._zookeeper_bound(
                "IncrementalAlterConfigs" if incremental else "AlterConfigs", lambda: call(allowed, validate_only),
                self._zookeeper_wait_ms(None)) if allowed else [])
        except KafkaError as e:
            done = iter([AlterConfigsResult(t, n, e.code, e.message) for t, n, _ in allowed])
        return [next(done) if refusal is None else AlterConfigsResult(t, n, refusal, "Authorization failed.")
                for (t, n, _), refusal in zip(resources, refusals)]

    # ------------------------------------------------------------------ CreateAcls / DescribeAcls / DeleteAcls

    def _acl_store(self, session: Session, operation: AclOperation) -> ZkAclStore:
        """The ACL store, if there is an authorizer (SECURITY_DISABLED) and the principal may `operation` the
        cluster (CLUSTER_AUTHORIZATION_FAILED)."""
        if self.acl_store is None:
            raise KafkaError("No Authorizer is configured on the broker", ErrorCode.SECURITY_DISABLED)
        if not self.authorize_cluster(session, operation):
            raise KafkaError("Cluster authorization failed.", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return self.acl_store

    def describe_acls(self, session: Session, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """KafkaError SECURITY_DISABLED, CLUSTER_AUTHORIZATION_FAILED (Describe on the cluster) or
        INVALID_REQUEST (an indefinite filter), else the matching ACLs."""
        store = self._acl_store(session, AclOperation.DESCRIBE)
        indefinite = binding_filter.find_indefinite_field()
        if indefinite is not None:
            raise KafkaError(indefinite, ErrorCode.INVALID_REQUEST)
        return store.authorizer.acls(binding_filter)

    async def create_acls(self, session: Session, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        store = self._acl_store(session, AclOperation.ALTER)
        return await self._zookeeper_or("CreateAcls", lambda: store.create_acls(list(bindings)),
                                        lambda e: [e] * len(bindings))

    async def delete_acls(self, session: Session, filters: Sequence[AclBindingFilter]
                          ) -> list[tuple[KafkaError | None, list[tuple[AclBinding, KafkaError | None]]]]:
        store = self._acl_store(session, AclOperation.ALTER)
        return await self._zookeeper_or("DeleteAcls", lambda: store.delete_acls(list(filters)),
                                        lambda e: [(e, [])] * len(filters))

    # ------------------------------------------------------------------ Describe/AlterUserScramCredentials

    def _scram_admin(self) -> UserScramAdmin:
        assert self.scram_admin is not None, "the broker gives its operations a UserScramAdmin"
        return self.scram_admin

    async def describe_user_scram_credentials(self, session: Session, users: Sequence[str] | None
                                              ) -> DescribeResult:
        """Describe on the cluster, else CLUSTER_AUTHORIZATION_FAILED for the whole request (KafkaApis)."""
        if not self.authorize_cluster(session, AclOperation.DESCRIBE):
            # Kafka's error response also repeats the code once per user asked, naming none of them.
            refused = UserResult("", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            return DescribeResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[refused] * len(users or ()))
        return await self._zookeeper_or("DescribeUserScramCredentials", lambda: self._scram_admin().describe(users),
                                        lambda e: DescribeResult(e.code, e.message))

    async def alter_user_scram_credentials(self, session: Session, upsertions: Sequence[Upsertion],
                                           deletions: Sequence[Deletion]) -> list[UserResult]:
        """Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every user named (Kafka's error response:
        each distinct user, sorted, without a message). Every broker takes it: the controller is its own process
        here, as for CreateTopics (broker/api/kafka/admin.py), so nobody answers NOT_CONTROLLER."""
        users = sorted({u.name for u in upsertions} | {d.name for d in deletions})
        if not self.authorize_cluster(session, AclOperation.ALTER):
            return [UserResult(user, ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for user in users]
        try:
            return await self._zookeeper_or("AlterUserScramCredentials",
                                            lambda: self._scram_admin().alter(upsertions, deletions),
                                            lambda e: [UserResult(user, e.code, e.message) for user in users])
        except Exception:
            logger.exception("Error encountered while altering user SCRAM credentials")
            return [UserResult(user, ErrorCode.UNKNOWN_SERVER_ERROR) for user in users]

"""What every front door asks of the broker, in plain values (Kafka 2.x's KafkaApis, minus the wire).

The gRPC adapter (broker/apis.py) and the Kafka-protocol listener
(broker/api/kafka/) both turn their requests into these calls, so a produce or
a fetch takes the same path through the ReplicaManager (acks, idempotence,
min.insync.replicas, purgatory, leader-epoch fencing) whichever door it came
through. Answers that come later (delayed produce, fetch, create topics) arrive
through a callback that resolves a future, from whichever thread completes them.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC_NAME
from broker.purgatory.completion import Completion
from broker.purgatory.delayed_create_topics import DelayedCreateTopics
from broker.purgatory.delayed_delete_records import DeleteRecordsPartitionStatus
from broker.purgatory.delayed_fetch import FetchParams, FetchResults, LogReadResult, PartitionFetchInfo
from broker.purgatory.delayed_produce import ProducePartitionResponse
from broker.purgatory.purgatory import DelayedOperationPurgatory
from broker.replication.partition import EARLIEST_TIMESTAMP, FetchIsolation
from broker.replication.replica_manager import ReplicaManager
from broker.server.admin_manager import AdminManager, CreateTopicResult, DeleteTopicResult, NewPartitions, NewTopic
from broker.server.config import KafkaConfig
from broker.server.metadata_cache import MetadataCache, Node, TopicMetadata
from broker.server.producer_id_manager import ProducerIdManager
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
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


@dataclass(frozen=True, slots=True)
class TopicsMetadata:
    brokers: list[Node]
    topics: list[tuple[str, ErrorCode, TopicMetadata | None]]  # requested order; metadata None when unknown


async def zookeeper_bound(call: Callable[[], T], timeout_ms: float) -> T:
    """`call` in a worker thread, waited for no longer than the request may wait. During a ZooKeeper outage the
    call retries until reconnected; the client gets KafkaError(REQUEST_TIMED_OUT) at its timeout instead of a
    wait as long as the outage (the call may still complete afterwards, as a timed-out Kafka request may)."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(call), max(timeout_ms, 0) / 1000)
    except TimeoutError:
        raise KafkaError(f"ZooKeeper did not answer within the request's timeout ({timeout_ms:.0f} ms)",
                         ErrorCode.REQUEST_TIMED_OUT) from None


class BrokerOperations:
    def __init__(self, config: KafkaConfig, *, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                 admin_manager: AdminManager, producer_ids: ProducerIdManager,
                 topic_purgatory: DelayedOperationPurgatory[DelayedCreateTopics],
                 loop: asyncio.AbstractEventLoop) -> None:
        self.config = config
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

    # ------------------------------------------------------------------ Produce

    def produce(self, timeout_ms: int, acks: int, partitions: Sequence[tuple[TopicPartition, bytes]]
                ) -> asyncio.Future[dict[TopicPartition, ProducePartitionResponse]]:
        """Append each partition's records (ReplicaManager.appendRecords); a future of every partition's answer.

        Synchronous up to the append, so requests on one connection append in the order they are called.
        """
        entries: list[tuple[TopicPartition, bytes]] = []
        refused: dict[TopicPartition, ProducePartitionResponse] = {}
        repeated = duplicates(tp for tp, _ in partitions)
        for tp, records in partitions:
            if tp in repeated:
                refused[tp] = ProducePartitionResponse(ErrorCode.INVALID_REQUEST,
                                                       error_message=f"{tp} appears more than once in the request")
            elif not self.metadata_cache.contains(tp):
                refused[tp] = ProducePartitionResponse(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                       error_message=f"Unknown topic or partition {tp}")
            elif tp.topic in INTERNAL_TOPICS:
                # Only its coordinator writes an internal topic (Kafka's internalTopicsAllowed).
                refused[tp] = ProducePartitionResponse(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                       error_message=f"Cannot append to internal topic {tp.topic}")
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

    async def fetch(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                    requested: Sequence[PartitionFetchInfo]) -> list[tuple[TopicPartition, LogReadResult]]:
        """ReplicaManager.fetchMessages for a consumer (replica_id -1) or a follower; each partition's result
        in request order (unknown partitions answered here)."""
        is_follower = replica_id >= 0
        infos: list[PartitionFetchInfo] = []
        slots: list[LogReadResult | None] = []
        for p in requested:
            if self.metadata_cache.contains(p.topic_partition):
                infos.append(p)
                slots.append(None)
            else:
                slots.append(LogReadResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        params = FetchParams(
            replica_id=replica_id if is_follower else CONSUMER_REPLICA_ID,
            max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
            isolation=FetchIsolation.LOG_END if is_follower else FetchIsolation.HIGH_WATERMARK,
            fetch_only_from_leader=True,
        )
        results: FetchResults = []
        if infos:
            completion: Completion[FetchResults] = self.completion()
            self.replica_manager.fetch_messages(params, infos, completion)
            results = await completion.future
        read = iter(results)
        return [(p.topic_partition, slot if slot is not None else next(read)[1])
                for p, slot in zip(requested, slots)]

    # ------------------------------------------------------------------ ListOffsets / OffsetsForLeaderEpoch

    def list_offset(self, tp: TopicPartition, timestamp: int, isolation: FetchIsolation | None,
                    current_leader_epoch: int, duplicate: bool) -> OffsetForTimestamp:
        if duplicate or timestamp < EARLIEST_TIMESTAMP:
            return OffsetForTimestamp(ErrorCode.INVALID_REQUEST)
        try:
            found = self.replica_manager.fetch_offset_for_timestamp(tp, timestamp, isolation, current_leader_epoch)
        except KafkaError as e:
            return OffsetForTimestamp(e.code)
        if found is None:
            return OffsetForTimestamp(ErrorCode.NONE)
        return OffsetForTimestamp(ErrorCode.NONE, *found)

    def offset_for_leader_epoch(self, tp: TopicPartition, current_leader_epoch: int,
                                leader_epoch: int) -> tuple[ErrorCode, int, int]:
        """(error, leader epoch, end offset) as OffsetsForLeaderEpoch answers it."""
        try:
            epoch, end_offset = self.replica_manager.last_offset_for_leader_epoch(tp, current_leader_epoch,
                                                                                 leader_epoch)
        except KafkaError as e:
            return e.code, -1, -1
        return ErrorCode.NONE, epoch, end_offset

    # ------------------------------------------------------------------ DeleteRecords

    async def delete_records(self, timeout_ms: int, requested: Sequence[tuple[TopicPartition, int]]
                             ) -> dict[TopicPartition, tuple[int, ErrorCode]]:
        """ReplicaManager.deleteRecords: each partition's (low watermark, error), -1 on error; unknown and
        repeated partitions answered here."""
        repeated = duplicates(tp for tp, _ in requested)
        answers: dict[TopicPartition, tuple[int, ErrorCode]] = {}
        offsets: dict[TopicPartition, int] = {}
        for tp, offset in requested:
            if tp in repeated:
                answers[tp] = (-1, ErrorCode.INVALID_REQUEST)
            elif not self.metadata_cache.contains(tp):
                answers[tp] = (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                offsets[tp] = offset
        if offsets:
            completion: Completion[dict[TopicPartition, DeleteRecordsPartitionStatus]] = self.completion()
            # Off the event loop: the leader writes its log-start-offset-checkpoint (an fsync) before waiting.
            await asyncio.to_thread(self.replica_manager.delete_records, timeout_ms, offsets, completion)
            for tp, status in (await completion.future).items():
                answers[tp] = (status.low_watermark, status.error)
        return answers

    # ------------------------------------------------------------------ Metadata

    async def metadata(self, topics: Sequence[str] | None, allow_auto_topic_creation: bool,
                       listener_name: str, timeout_ms: float | None = None) -> TopicsMetadata:
        """The live brokers and the requested topics (all when None) as reached on `listener_name`; unknown
        topics auto-created when asked and auto.create.topics.enable allows it, waiting on ZooKeeper no longer
        than `timeout_ms` (default request.timeout.ms): REQUEST_TIMED_OUT for those topics then."""
        cache = self.metadata_cache
        names = list(dict.fromkeys(topics)) if topics is not None else sorted(cache.get_all_topics())
        known = {t.name: t for t in cache.get_topic_metadata(names, listener_name)}
        unknown: dict[str, ErrorCode] = {}
        to_create = []
        for name in names:
            if name in known:
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
        if to_create:
            try:
                created = await zookeeper_bound(lambda: [self._admin_manager.auto_create_topic(t) for t in to_create],
                                                self._timeout_ms(timeout_ms))
            except KafkaError as e:
                created = [e.code] * len(to_create)
            unknown.update(zip(to_create, created))
        return TopicsMetadata(
            cache.get_alive_brokers(listener_name),
            [(name, known[name].error, known[name]) if name in known else (name, unknown[name], None)
             for name in names])

    # ------------------------------------------------------------------ CreateTopics / DeleteTopics

    async def create_topics(self, topics: Sequence[NewTopic], validate_only: bool,
                            timeout_ms: int) -> list[CreateTopicResult]:
        """AdminManager.createTopics (it writes ZooKeeper), then wait up to timeout_ms until every broker's
        metadata has the new topics (DelayedCreateTopics)."""
        results = await asyncio.to_thread(self._admin_manager.create_topics, list(topics), validate_only)
        return await self._await_leaders(results, timeout_ms, validate_only)

    async def create_partitions(self, requests: Sequence[NewPartitions], validate_only: bool,
                                timeout_ms: int) -> list[CreateTopicResult]:
        """AdminManager.createPartitions (it writes the topics' grown assignments to ZooKeeper; the controller
        creates the partitions), then wait as CreateTopics does (Kafka's DelayedCreatePartitions)."""
        results = await asyncio.to_thread(self._admin_manager.create_partitions, list(requests), validate_only)
        return await self._await_leaders(results, timeout_ms, validate_only)

    async def _await_leaders(self, results: list[CreateTopicResult], timeout_ms: int,
                             validate_only: bool) -> list[CreateTopicResult]:
        """Answer once every partition written has a leader in this broker's metadata, or at the timeout."""
        if timeout_ms <= 0 or validate_only or not any(r.error is ErrorCode.NONE for r in results):
            return results
        completion: Completion[list[CreateTopicResult]] = self.completion()
        delayed = DelayedCreateTopics(timeout_ms, results, self.metadata_cache, completion)
        self._topic_purgatory.try_complete_else_watch(delayed, [r.name for r in results])
        return await completion.future

    async def delete_topics(self, names: Sequence[str]) -> list[DeleteTopicResult]:
        return await asyncio.to_thread(self._admin_manager.delete_topics, list(names))

    # ------------------------------------------------------------------ InitProducerId

    async def init_producer_id(self, transactional_id: str | None,
                               timeout_ms: float | None = None) -> tuple[ErrorCode, int, int]:
        """(error, producer id, producer epoch) for an idempotent producer; REQUEST_TIMED_OUT when claiming a
        block from ZooKeeper takes longer than `timeout_ms` (default request.timeout.ms)."""
        if transactional_id is not None:
            # Idempotence only: there is no transaction coordinator to hand a transactional id to.
            return ErrorCode.INVALID_REQUEST, -1, -1
        try:
            producer_id = await zookeeper_bound(self._producer_ids.generate_producer_id, self._timeout_ms(timeout_ms))
        except KafkaError as e:
            return e.code, -1, -1
        except Exception:
            logger.exception("Failed to allocate a producer id")
            return ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1
        return ErrorCode.NONE, producer_id, 0

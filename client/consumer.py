"""Consumer: Kafka's KafkaConsumer with kafka-python's names and defaults.

Like Kafka's, the work happens inside the caller's poll(), commit(),
position() ... calls, each bounded by a timeout; with a group_id, a background
thread also heartbeats to the group's coordinator (client/consumer_coordinator.py).

With a group_id, subscribe() makes the consumer a member of the group: the
group's coordinator (a broker) and its leader (a member) split the subscribed
topics' partitions among the members, and offsets are committed to and fetched
from the coordinator. Without one, subscribe() reads every partition of the
topics (as kafka-python does) and nothing can be committed. assign() reads
exactly the partitions given; with a group_id their offsets are committed as a
standalone consumer's (generation -1), which Kafka allows while the group has
no members.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import grpc

from client.assignors import PartitionAssignor, RangeAssignor, RoundRobinAssignor, resolve_assignors
from client.connection import ConnectionPool, parse_bootstrap_servers
from client.consumer_coordinator import CommitCallback, ConsumerCoordinator
from client.errors import KafkaTimeoutError, NoOffsetForPartitionError
from client.fetcher import Deserializer, Fetcher, parse_isolation_level
from client.metadata import ClusterMetadata, Metadata
from client.metrics import FetchManagerMetrics
from client.structs import ConsumerGroupMetadata, ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp
from client.subscription import ConsumerRebalanceListener, OffsetResetStrategy, SubscriptionState
from proto.errors import ErrorCode, KafkaError, error_for
from proto.types import TopicPartition

log = logging.getLogger(__name__)

_client_ids = itertools.count(1)

AssignorConfig = str | PartitionAssignor | type[PartitionAssignor]


class Consumer:
    """Reads records from topics or from assigned partitions.

    Not thread-safe (as Kafka's consumer is not). Iterating over it yields
    ConsumerRecords, and stops after consumer_timeout_ms without a record
    (never, by default).
    """

    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | Iterable[str] = "localhost:9192",
        client_id: str | None = None,
        group_id: str | None = None,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        session_timeout_ms: int = 10000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        partition_assignment_strategy: AssignorConfig | Sequence[AssignorConfig] = (RangeAssignor,
                                                                                    RoundRobinAssignor),
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52428800,
        max_partition_fetch_bytes: int = 1048576,
        max_poll_records: int = 500,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        metadata_max_age_ms: int = 300000,
        default_api_timeout_ms: int = 60000,
        consumer_timeout_ms: float = float("inf"),
        check_crcs: bool = True,
        isolation_level: str = "read_uncommitted",
        allow_auto_create_topics: bool = True,
        channel_factory: Callable[..., grpc.aio.Channel] = grpc.aio.insecure_channel,
    ) -> None:
        # Kafka's default client.id: consumer-<group.id>-<n>.
        self.client_id = client_id or f"consumer-{group_id or ''}-{next(_client_ids)}"
        self.group_id = group_id
        self._max_poll_records = max_poll_records
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._default_api_timeout_ms = default_api_timeout_ms
        self._consumer_timeout_ms = consumer_timeout_ms
        pool = ConnectionPool(request_timeout_ms=request_timeout_ms, reconnect_backoff_ms=reconnect_backoff_ms,
                              reconnect_backoff_max_ms=reconnect_backoff_max_ms, channel_factory=channel_factory)
        self._metadata = Metadata(parse_bootstrap_servers(bootstrap_servers), pool, retry_backoff_ms=retry_backoff_ms,
                                  metadata_max_age_ms=metadata_max_age_ms,
                                  allow_auto_topic_creation=allow_auto_create_topics)
        self._subscriptions = SubscriptionState(OffsetResetStrategy.from_config(auto_offset_reset))
        self._fetch_metrics = FetchManagerMetrics(self._now_ms)
        self._fetcher = Fetcher(
            self._metadata,
            self._subscriptions,
            fetch_min_bytes=fetch_min_bytes,
            fetch_max_wait_ms=fetch_max_wait_ms,
            fetch_max_bytes=fetch_max_bytes,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            isolation_level=parse_isolation_level(isolation_level),
            check_crcs=check_crcs,
            key_deserializer=key_deserializer,
            value_deserializer=value_deserializer,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            metrics=self._fetch_metrics,
        )
        self._coordinator: ConsumerCoordinator | None = None
        if group_id is not None:
            if heartbeat_interval_ms >= session_timeout_ms:
                raise ValueError("heartbeat_interval_ms must be lower than session_timeout_ms")
            self._coordinator = ConsumerCoordinator(
                self._metadata, self._subscriptions, group_id=group_id, client_id=self.client_id,
                assignors=resolve_assignors(partition_assignment_strategy), session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms, max_poll_interval_ms=max_poll_interval_ms,
                retry_backoff_ms=retry_backoff_ms, request_timeout_ms=request_timeout_ms,
                enable_auto_commit=enable_auto_commit, auto_commit_interval_ms=auto_commit_interval_ms)
        self._assigned_from: ClusterMetadata | None = None
        self._iterator_records: deque[ConsumerRecord] = deque()
        self._last_record_ms = self._now_ms()
        self._closed = False
        if topics:
            self.subscribe(topics)

    @staticmethod
    def _now_ms() -> float:
        return time.monotonic() * 1000

    # ------------------------------------------------------------------ assignment

    def subscribe(self, topics: Iterable[str] = (), pattern: str | re.Pattern[str] | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Read `topics`, or every topic whose whole name matches `pattern` (kafka-python's signature).

        With a group_id the group decides which of their partitions this
        consumer reads, and the listener hears of every change (inside poll());
        without one it reads them all, including partitions added later.
        """
        topics = [topics] if isinstance(topics, str) else list(topics)
        if bool(topics) == (pattern is not None):
            raise ValueError("subscribe() takes topics or a pattern, not both or neither")
        if pattern is not None:
            self._subscriptions.subscribe_pattern(pattern, listener)
        else:
            self._subscriptions.subscribe(topics, listener)
        self._assigned_from = None
        self._metadata.set_topics(self._subscriptions.metadata_topics())

    def subscription(self) -> set[str]:
        return set(self._subscriptions.subscription)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (no subscription)."""
        self._subscriptions.assign_from_user(TopicPartition(*tp) for tp in partitions)
        self._metadata.set_topics(self._subscriptions.topics)

    def assignment(self) -> set[TopicPartition]:
        self._update_assignment()
        return set(self._subscriptions.assigned_partitions())

    def unsubscribe(self) -> None:
        """Stop reading; a group member leaves its group (the others take its partitions over at once)."""
        if self._coordinator is not None and self._subscriptions.partitions_auto_assigned:
            self._coordinator.unsubscribe()
        self._subscriptions.unsubscribe()
        self._metadata.set_topics(())

    def _update_assignment(self) -> None:
        """Without a group, a subscription follows the topics' partitions in the current metadata."""
        cluster = self._metadata.cluster
        subscriptions = self._subscriptions
        if self._coordinator is not None or not subscriptions.partitions_auto_assigned \
                or cluster is self._assigned_from:
            return
        self._assigned_from = cluster
        if subscriptions.pattern is not None:
            subscriptions.match_pattern(cluster.topics, cluster.internal_topics)
        self._subscriptions.assign_from_subscribed(
            tp for topic in sorted(self._subscriptions.subscription) for tp in cluster.topic_partitions(topic) or ())

    # ------------------------------------------------------------------ positions

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """The next poll() returns records of `partition` from `offset`."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        self._subscriptions.seek(partition, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Lazily: the earliest offset is looked up at the next poll() or position(). No partitions: all assigned."""
        for tp in partitions or self._subscriptions.assigned_partitions():
            self._subscriptions.request_offset_reset(tp, OffsetResetStrategy.EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or self._subscriptions.assigned_partitions():
            self._subscriptions.request_offset_reset(tp, OffsetResetStrategy.LATEST)

    def position(self, partition: TopicPartition, timeout_ms: float | None = None) -> int:
        """The offset of the next record poll() returns for `partition`, looking it up if need be."""
        timeout = self._default_api_timeout_ms if timeout_ms is None else timeout_ms
        position = self._subscriptions.position(partition)
        if position is None:
            self._metadata.add_topics(partition.topic)
            self._update_fetch_positions(timeout, raise_errors=True)
            position = self._subscriptions.position(partition)
            assert position is not None
        return position

    def _update_fetch_positions(self, timeout_ms: float, raise_errors: bool = False) -> None:
        """Give every assigned partition a position: its committed offset, else auto_offset_reset.

        Inside poll() retriable failures are logged and tried again later
        (`raise_errors` False); position() raises them.
        """
        subscriptions = self._subscriptions
        try:
            missing = subscriptions.partitions_needing_position()
            if missing:
                committed = ({} if self._coordinator is None
                             else self._coordinator.fetch_committed_offsets(missing, timeout_ms))
                for tp in missing:
                    offset = committed.get(tp)
                    if offset is not None:
                        subscriptions.seek(tp, offset.offset)
                    elif subscriptions.default_reset_strategy is None:
                        raise NoOffsetForPartitionError(f"{tp} has no committed offset and auto_offset_reset is 'none'")
                    else:
                        subscriptions.request_offset_reset(tp, subscriptions.default_reset_strategy)
            now = self._now_ms()
            resets = subscriptions.partitions_needing_reset(now)
            if resets:
                strategies = {tp: subscriptions.state(tp).reset_strategy for tp in resets}
                offsets = self._fetcher.list_offsets({tp: int(s) for tp, s in strategies.items() if s is not None},
                                                     timeout_ms)
                for tp, found in offsets.items():
                    if subscriptions.is_assigned(tp) and subscriptions.state(tp).reset_strategy is strategies[tp]:
                        subscriptions.seek(tp, found.offset if found is not None else 0)
        except KafkaError as exc:
            if raise_errors or not exc.retriable:
                raise
            log.info("cannot set fetch positions yet: %s", exc)
            for tp in subscriptions.partitions_needing_reset(self._now_ms()):
                subscriptions.state(tp).next_retry_ms = self._now_ms() + self._retry_backoff_ms

    # ------------------------------------------------------------------ poll

    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the assigned partitions, waiting up to `timeout_ms` for some to arrive."""
        if self._closed:
            raise KafkaError("consumer is closed")
        max_records = max_records or self._max_poll_records
        deadline = self._now_ms() + timeout_ms
        while True:
            records = self._poll_once(deadline, max_records)
            if records or self._now_ms() >= deadline:
                return records

    def _poll_once(self, deadline: float, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        # Blocking work inside poll() gets the poll's time, but at least retry_backoff_ms so poll(0) progresses.
        budget = max(deadline - self._now_ms(), self._retry_backoff_ms)
        self._metadata.maybe_refresh(min(budget, self._request_timeout_ms))
        if self._coordinator is not None and not self._coordinator.poll(self._now_ms() + budget):
            return {}  # not in the group yet (the join goes on at the next poll)
        self._update_assignment()
        self._update_fetch_positions(min(budget, self._request_timeout_ms))
        self._fetcher.handle_answers()
        records = self._fetcher.fetched_records(max_records)
        if not records:
            sent = self._fetcher.send_fetches()
            remaining = deadline - self._now_ms()
            if remaining > 0:
                if sent or self._fetcher.in_flight:
                    self._fetcher.wait(min(remaining, self._request_timeout_ms))
                else:
                    # Nothing to fetch from (no leader known, backing off): do not spin.
                    time.sleep(min(remaining, self._retry_backoff_ms) / 1000)
            self._fetcher.handle_answers()
            records = self._fetcher.fetched_records(max_records)
        # Pipelining: the next fetch is on its way while the caller works through these records.
        self._fetcher.send_fetches()
        return records

    def __iter__(self) -> Iterator[ConsumerRecord]:
        self._last_record_ms = self._now_ms()
        return self

    def __next__(self) -> ConsumerRecord:
        while not self._iterator_records:
            remaining = self._last_record_ms + self._consumer_timeout_ms - self._now_ms()
            if self._closed or remaining <= 0:
                raise StopIteration
            for records in self.poll(timeout_ms=remaining).values():
                self._iterator_records.extend(records)
        self._last_record_ms = self._now_ms()
        return self._iterator_records.popleft()

    # ------------------------------------------------------------------ offsets on the broker

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group, generation and member id now, for Producer.send_offsets_to_transaction()
        (Java's KafkaConsumer.groupMetadata)."""
        coordinator = self._require_coordinator()
        generation = coordinator.membership.generation
        return ConsumerGroupMetadata(coordinator.group_id, generation.generation_id, generation.member_id)

    def _require_coordinator(self) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise ValueError("To use the group management or offset commit APIs, you must provide a valid group.id"
                             " in the consumer configuration.")
        return self._coordinator

    def _offsets_to_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None
                           ) -> dict[TopicPartition, OffsetAndMetadata]:
        chosen = self._subscriptions.all_consumed() if offsets is None else offsets
        return {TopicPartition(*tp): o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o)
                for tp, o in chosen.items()}

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
               timeout_ms: float | None = None) -> None:
        """Commit offsets to the group's coordinator, waiting for it to accept them: by default every
        assigned partition's position. A member the group has rebalanced past gets CommitFailedError."""
        coordinator = self._require_coordinator()
        coordinator.commit_offsets_sync(self._offsets_to_commit(offsets),
                                        self._default_api_timeout_ms if timeout_ms is None else timeout_ms)

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: CommitCallback | None = None) -> concurrent.futures.Future[None]:
        """Commit without waiting: `callback(offsets, exception or None)` runs inside a later poll()."""
        return self._require_coordinator().commit_offsets_async(self._offsets_to_commit(offsets), callback)

    def committed(self, partition: TopicPartition, metadata: bool = False,
                  timeout_ms: float | None = None) -> int | OffsetAndMetadata | None:
        """The group's committed offset (kafka-python's signature): None if there is none."""
        found = self._require_coordinator().fetch_committed_offsets(
            [partition], self._default_api_timeout_ms if timeout_ms is None else timeout_ms)
        committed = found.get(partition)
        if committed is None or metadata:
            return committed
        return committed.offset

    # ------------------------------------------------------------------ offsets in the log

    def beginning_offsets(self, partitions: Iterable[TopicPartition],
                          timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        return self._offsets_at(partitions, OffsetResetStrategy.EARLIEST, timeout_ms)

    def end_offsets(self, partitions: Iterable[TopicPartition],
                    timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """The offset after the last record (the high watermark, or the LSO with read_committed)."""
        return self._offsets_at(partitions, OffsetResetStrategy.LATEST, timeout_ms)

    def _offsets_at(self, partitions: Iterable[TopicPartition], strategy: OffsetResetStrategy,
                    timeout_ms: float | None) -> dict[TopicPartition, int]:
        found = self.offsets_for_times({tp: int(strategy) for tp in partitions}, timeout_ms)
        return {tp: (o.offset if o is not None else 0) for tp, o in found.items()}

    def offsets_for_times(self, timestamps: dict[TopicPartition, int],
                          timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset whose timestamp is >= the given one, per partition; None past the last record."""
        tps = {TopicPartition(*tp): ts for tp, ts in timestamps.items()}
        self._metadata.add_topics(*(tp.topic for tp in tps))
        return self._fetcher.list_offsets(tps, self._default_api_timeout_ms if timeout_ms is None else timeout_ms)

    # ------------------------------------------------------------------ topics

    def topics(self, timeout_ms: float | None = None) -> set[str]:
        """Every topic's name, waiting up to default_api_timeout_ms for a broker to answer (Kafka's listTopics)."""
        return self._fetch_metadata((), timeout_ms).topics

    def partitions_for_topic(self, topic: str, timeout_ms: float | None = None) -> set[int] | None:
        """The topic's partition numbers, None if it does not exist (Kafka's partitionsFor).

        Waits up to default_api_timeout_ms for a broker to answer, then raises
        KafkaTimeoutError; a topic name that cannot exist raises its error at once.
        """
        cluster = self._fetch_metadata([topic], timeout_ms)
        code = cluster.topic_errors.get(topic, ErrorCode.NONE)
        if code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            raise error_for(code, f"topic {topic!r}")
        return cluster.partitions_for_topic(topic)

    def _fetch_metadata(self, topics: Iterable[str], timeout_ms: float | None) -> ClusterMetadata:
        """One Metadata answer, retrying unreachable brokers until the timeout (Kafka's "Timeout expired while
        fetching topic metadata")."""
        timeout = self._default_api_timeout_ms if timeout_ms is None else timeout_ms
        deadline = self._now_ms() + timeout
        while True:
            remaining = deadline - self._now_ms()
            try:
                return self._metadata.fetch(topics, min(max(remaining, 0.0), self._request_timeout_ms))
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                if self._now_ms() + self._retry_backoff_ms >= deadline:
                    raise KafkaTimeoutError(f"Timeout expired while fetching topic metadata after {timeout:.0f} ms"
                                            f" (last error: {exc})") from None
            time.sleep(self._retry_backoff_ms / 1000)

    # ------------------------------------------------------------------ close

    def close(self, autocommit: bool = True, timeout_ms: float | None = None) -> None:
        """Commit what was consumed (with enable_auto_commit), leave the group, release the connections."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._coordinator is not None:
                self._coordinator.close(autocommit, self._default_api_timeout_ms if timeout_ms is None
                                        else timeout_ms)
        finally:
            self._fetcher.close()
            self._metadata.pool.close()

    def metrics(self) -> dict[str, dict[str, float]]:
        """The consumer's metrics by group, with Kafka's names (kafka-python's metrics()):
        consumer-fetch-manager-metrics' records-lag-max (the most any partition's position trailed its high
        watermark over the last sample window, NaN before any fetch) and records-lag per partition."""
        return {"consumer-fetch-manager-metrics": self._fetch_metrics.snapshot()}

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()



"""Consumer: Kafka's KafkaConsumer with kafka-python's names and defaults.

Single-threaded like Kafka's: all network work happens inside the caller's
poll(), commit(), position() ... calls, each bounded by a timeout. There is no
consumer group membership yet: subscribe() reads every partition of the
topics, and group_id only names where committed offsets are kept on the
brokers (OffsetCommit / OffsetFetch, as a standalone consumer with generation
-1 does in Kafka).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import grpc

from client.connection import ConnectionPool, parse_bootstrap_servers
from client.errors import KafkaTimeoutError, NoOffsetForPartitionError
from client.fetcher import Deserializer, Fetcher, parse_isolation_level
from client.metadata import ClusterMetadata, Metadata
from client.retry import call_with_retries
from client.structs import ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp
from client.subscription import OffsetResetStrategy, SubscriptionState
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode, KafkaError, error_for
from proto.types import TopicPartition

log = logging.getLogger(__name__)


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
        self.client_id = client_id
        self.group_id = group_id
        self._enable_auto_commit = enable_auto_commit and group_id is not None
        self._auto_commit_interval_ms = auto_commit_interval_ms
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
        )
        self._assigned_from: ClusterMetadata | None = None
        self._next_auto_commit_ms = self._now_ms() + auto_commit_interval_ms
        self._last_auto_committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self._iterator_records: deque[ConsumerRecord] = deque()
        self._last_record_ms = self._now_ms()
        self._closed = False
        if topics:
            self.subscribe(topics)

    @staticmethod
    def _now_ms() -> float:
        return time.monotonic() * 1000

    # ------------------------------------------------------------------ assignment

    def subscribe(self, topics: Iterable[str]) -> None:
        """Read every partition of `topics`, including partitions added later.

        No consumer group rebalancing (a later issue): every consumer that
        subscribes to a topic reads all of its partitions, whatever its group_id.
        """
        topics = [topics] if isinstance(topics, str) else list(topics)
        self._subscriptions.subscribe(topics)
        self._assigned_from = None
        self._metadata.set_topics(self._subscriptions.topics)

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
        self._subscriptions.unsubscribe()
        self._metadata.set_topics(())

    def _update_assignment(self) -> None:
        """A subscription follows the topics' partitions in the current metadata."""
        cluster = self._metadata.cluster
        if not self._subscriptions.subscription or cluster is self._assigned_from:
            return
        self._assigned_from = cluster
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
                committed = self._fetch_committed(missing, timeout_ms) if self.group_id is not None else {}
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
        self._maybe_auto_commit()
        # Blocking work inside poll() gets the poll's time, but at least retry_backoff_ms so poll(0) progresses.
        budget = max(deadline - self._now_ms(), self._retry_backoff_ms)
        self._metadata.maybe_refresh(min(budget, self._request_timeout_ms))
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

    def _require_group(self) -> str:
        if self.group_id is None:
            raise ValueError("To use the group management or offset commit APIs, you must provide a valid group.id"
                             " in the consumer configuration.")
        return self.group_id

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
               timeout_ms: float | None = None) -> None:
        """Store offsets for the group on the brokers: by default every assigned partition's position."""
        group_id = self._require_group()
        wanted = {tp: o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o)
                  for tp, o in (self._subscriptions.all_consumed() if offsets is None else offsets).items()}
        if not wanted:
            return
        request = pb.OffsetCommitRequest(group_id=group_id)
        for topic, parts in _by_topic(wanted).items():
            entry = request.topics.add(name=topic)
            for tp, om in parts:
                entry.partitions.add(partition_index=tp.partition, committed_offset=om.offset,
                                     committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata)

        def attempt(remaining_ms: float) -> None:
            response = self._metadata.call_any(lambda stub: stub.OffsetCommit, request, remaining_ms)
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise error_for(p.error_code, f"committing {t.name}-{p.partition_index}")

        call_with_retries(attempt, timeout_ms=self._default_api_timeout_ms if timeout_ms is None else timeout_ms,
                          backoff_ms=self._retry_backoff_ms, what="OffsetCommit")
        self._last_auto_committed.update(wanted)

    def committed(self, partition: TopicPartition, metadata: bool = False,
                  timeout_ms: float | None = None) -> int | OffsetAndMetadata | None:
        """The group's committed offset (kafka-python's signature): None if there is none."""
        found = self._fetch_committed([partition], self._default_api_timeout_ms if timeout_ms is None else timeout_ms)
        committed = found.get(partition)
        if committed is None or metadata:
            return committed
        return committed.offset

    def _fetch_committed(self, partitions: list[TopicPartition],
                         timeout_ms: float) -> dict[TopicPartition, OffsetAndMetadata]:
        request = pb.OffsetFetchRequest(group_id=self._require_group())
        for topic, parts in _by_topic(dict.fromkeys(partitions)).items():
            request.topics.add(name=topic, partition_indexes=[tp.partition for tp, _ in parts])

        def attempt(remaining_ms: float) -> dict[TopicPartition, OffsetAndMetadata]:
            response = self._metadata.call_any(lambda stub: stub.OffsetFetch, request, remaining_ms)
            if response.error_code:
                raise error_for(response.error_code, "OffsetFetch")
            found: dict[TopicPartition, OffsetAndMetadata] = {}
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise error_for(p.error_code, f"fetching the committed offset of {t.name}-{p.partition_index}")
                    if p.committed_offset >= 0:
                        found[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                            p.committed_offset, p.metadata, p.committed_leader_epoch)
            return found

        return call_with_retries(attempt, timeout_ms=timeout_ms, backoff_ms=self._retry_backoff_ms,
                                 what="OffsetFetch")

    def _maybe_auto_commit(self) -> None:
        now = self._now_ms()
        if not self._enable_auto_commit or now < self._next_auto_commit_ms:
            return
        self._next_auto_commit_ms = now + self._auto_commit_interval_ms
        self._auto_commit()

    def _auto_commit(self) -> None:
        consumed = self._subscriptions.all_consumed()
        changed = {tp: o for tp, o in consumed.items() if self._last_auto_committed.get(tp) != o}
        if not changed:
            return
        try:
            self.commit(changed, timeout_ms=min(self._request_timeout_ms, self._default_api_timeout_ms))
        except KafkaError as exc:
            log.warning("auto-commit of %d partition(s) failed: %s", len(changed), exc)

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

    def close(self, autocommit: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if autocommit and self._enable_auto_commit:
                self._auto_commit()
        finally:
            self._fetcher.close()
            self._metadata.pool.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _by_topic(offsets: dict[TopicPartition, Any]) -> dict[str, list[tuple[TopicPartition, Any]]]:
    grouped: dict[str, list[tuple[TopicPartition, Any]]] = {}
    for tp, value in offsets.items():
        grouped.setdefault(tp.topic, []).append((tp, value))
    return grouped


"""The consumer's Fetcher: Fetch and ListOffsets requests, and records out of their answers.

One Fetch per leader broker covers the consumer's partitions that broker
leads and that have neither buffered records nor a fetch in flight: at most one
fetch per partition is out, not one per broker (Kafka's Java consumer). A
partition at its end long-polls for fetch_max_wait_ms; another partition of the
same leader whose buffered records were just handed out does not wait behind it
(librdkafka's does not either: it keeps fetching a partition until its queue is
full). Without fetch sessions, a second request to a broker costs nothing but
itself. Answers arrive on gRPC threads
and are parsed by the consumer's thread in poll(). As soon as poll() hands out
records the next fetches go out, so the broker's long poll overlaps with the
application's work (Kafka's pipelining).

Answers carry raw RecordBatch bytes: whole batches that may start below the
fetch offset (a batch is never split) and may end in a partial batch cut by a
size limit, which is dropped and fetched again next time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from client.connection import ResponseFuture
from client.errors import KafkaTimeoutError, MessageTooLargeError, OffsetOutOfRangeError
from client.metadata import Metadata
from client.metrics import FetchManagerMetrics
from client.read_committed import AbortedTransactions
from client.retry import FetchAction, fetch_action
from client.structs import ConsumerRecord, OffsetAndTimestamp
from client.subscription import SubscriptionState
from common.record import (
    LOG_OVERHEAD,
    BatchHeader,
    decode_record_tuples,
    parse_header,
    read_offset_and_length,
    validate_batch,
)
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode, KafkaError, error_for, invalidates_metadata
from proto.types import TopicPartition

log = logging.getLogger(__name__)

Deserializer = Callable[[bytes], Any]

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


def parse_isolation_level(isolation_level: str | int) -> int:
    if isolation_level in ("read_uncommitted", READ_UNCOMMITTED):
        return READ_UNCOMMITTED
    if isolation_level in ("read_committed", READ_COMMITTED):
        return READ_COMMITTED
    raise ValueError(f"Invalid value {isolation_level} for configuration isolation.level:"
                     " String must be one of: read_committed, read_uncommitted")


def parse_records(
    tp: TopicPartition,
    data: bytes,
    fetch_offset: int,
    *,
    check_crcs: bool = True,
    key_deserializer: Deserializer | None = None,
    value_deserializer: Deserializer | None = None,
    aborted_transactions: Sequence[tuple[int, int]] | None = None,
) -> tuple[list[ConsumerRecord], int]:
    """The records at or after `fetch_offset` in a fetch answer, and the offset to fetch next.

    Batches ending below `fetch_offset` are skipped without decoding; records
    below it inside the first batch are dropped. Control batches are skipped
    but still move the next offset past them, and so are the batches of the
    `aborted_transactions` ((producer id, first offset) each) when a
    READ_COMMITTED answer names some (client/read_committed.py). A partial batch at the end is
    ignored; if it is the only thing there the broker sent less than one batch,
    which KIP-74 rules out, and that is an error rather than a silent stall.
    """
    scanned = scan_records(tp, data, fetch_offset, check_crcs=check_crcs, aborted_transactions=aborted_transactions)
    return scanned.decode(key_deserializer, value_deserializer), scanned.next_offset


class ScannedRecords(NamedTuple):
    """A fetch answer whose batches are checked (headers, CRCs) but whose records are not decoded yet."""

    topic_partition: TopicPartition
    data: bytes
    fetch_offset: int
    batches: list[tuple[int, BatchHeader]]  # (position, header) of each batch to decode
    next_offset: int
    max_records: int  # records in those batches: an upper bound of what decode() returns

    def decode(self, key_deserializer: Deserializer | None = None,
               value_deserializer: Deserializer | None = None) -> list[ConsumerRecord]:
        records: list[ConsumerRecord] = []
        topic, partition = self.topic_partition
        for start, header in self.batches:
            decoded = decode_record_tuples(self.data, start, header, ConsumerRecord, topic, partition,
                                           self.fetch_offset)
            if key_deserializer is not None or value_deserializer is not None:
                new_record = tuple.__new__
                decoded = [
                    new_record(ConsumerRecord, (
                        t, p, o, ts, tt, k if k is None or key_deserializer is None else key_deserializer(k),
                        v if v is None or value_deserializer is None else value_deserializer(v), h, e, ks, vs, hs))
                    for t, p, o, ts, tt, k, v, h, e, ks, vs, hs in decoded
                ]
            records += decoded
        return records


def scan_records(tp: TopicPartition, data: bytes, fetch_offset: int, *, check_crcs: bool = True,
                 aborted_transactions: Sequence[tuple[int, int]] | None = None) -> ScannedRecords:
    """parse_records's per-batch half: which batches hold records at or after `fetch_offset`, and the next offset.

    Costs per batch, not per record, so a consumer knows where its next fetch
    starts before it decodes anything; so does dropping `aborted_transactions`'
    batches. Raises what parse_records raises for a damaged batch or an answer
    without one whole batch.
    """
    if not isinstance(data, bytes):
        data = bytes(data)  # records are read (and sliced) where they are: slices must be bytes
    view = memoryview(data)
    end = len(data)
    pos = 0
    next_offset = fetch_offset
    batches: list[tuple[int, BatchHeader]] = []
    max_records = 0
    # None when nothing can be aborted (READ_UNCOMMITTED, or no aborted transaction named): no per-batch cost.
    aborted = AbortedTransactions(aborted_transactions) if aborted_transactions else None
    while end - pos >= LOG_OVERHEAD:
        size = read_offset_and_length(data, pos)[1] + LOG_OVERHEAD
        if pos + size > end:
            break
        # allow_gaps: a compacted topic's batches keep their offsets but may have lost records in between;
        # the consumer cannot tell the topic's policy and, like Kafka's, takes them.
        header = validate_batch(view, pos, allow_gaps=True) if check_crcs else parse_header(view, pos)
        start = pos
        pos += size
        # Every batch with a producer id goes through the filter, in order, even below the fetch offset: an
        # ABORT marker there still ends its transaction (Kafka walks all of the answer's batches).
        skipped = aborted is not None and aborted.skips(data, start, header)
        if header.last_offset < fetch_offset:
            continue
        next_offset = max(next_offset, header.next_offset)
        if skipped or header.is_control:
            continue
        batches.append((start, header))
        max_records += header.record_count
    if pos == 0 and end > 0:
        raise MessageTooLargeError(
            f"{tp} at offset {fetch_offset}: the answer holds {end} bytes but not one whole batch")
    return ScannedRecords(tp, data, fetch_offset, batches, next_offset, max_records)


class CompletedFetch:
    """One partition's records from one Fetch answer, handed out by poll() in order.

    `records` is None until they are needed: the answer is decoded by poll()
    (decode()), possibly after the next fetch for the partition went out.
    """

    __slots__ = ("_scanned", "fetch_offset", "index", "key_deserializer", "next_fetch_offset", "records",
                 "topic_partition", "value_deserializer")

    def __init__(self, tp: TopicPartition, fetch_offset: int, records: list[ConsumerRecord] | None,
                 next_fetch_offset: int, scanned: ScannedRecords | None = None,
                 key_deserializer: Deserializer | None = None, value_deserializer: Deserializer | None = None) -> None:
        self.topic_partition = tp
        self.fetch_offset = fetch_offset
        self.records = records
        self.next_fetch_offset = next_fetch_offset
        self.index = 0
        self._scanned = scanned
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer

    @property
    def max_records(self) -> int:
        """At least as many records as decode() returns."""
        if self.records is not None:
            return len(self.records) - self.index
        assert self._scanned is not None
        return self._scanned.max_records

    def decode(self) -> list[ConsumerRecord]:
        if self.records is None:
            assert self._scanned is not None
            self.records = self._scanned.decode(self.key_deserializer, self.value_deserializer)
            self._scanned = None
        return self.records


class _PendingFetch(NamedTuple):
    node_id: int
    future: ResponseFuture[pb.FetchResponse]
    offsets: dict[TopicPartition, int]


class Fetcher:
    def __init__(
        self,
        metadata: Metadata,
        subscriptions: SubscriptionState,
        *,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52428800,
        max_partition_fetch_bytes: int = 1048576,
        isolation_level: int = READ_UNCOMMITTED,
        check_crcs: bool = True,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        clock: Callable[[], float] = time.monotonic,
        metrics: FetchManagerMetrics | None = None,
    ) -> None:
        self._metadata = metadata
        self._metrics = metrics
        self._subscriptions = subscriptions
        self._fetch_min_bytes = fetch_min_bytes
        self._fetch_max_wait_ms = fetch_max_wait_ms
        self._fetch_max_bytes = fetch_max_bytes
        self._max_partition_fetch_bytes = max_partition_fetch_bytes
        self._isolation_level = isolation_level
        self._check_crcs = check_crcs
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._clock = clock
        self._pending: dict[int, _PendingFetch] = {}  # by request number
        self._next_request = 0
        self._completed: deque[CompletedFetch] = deque()
        self._answered = threading.Event()

    def _now_ms(self) -> float:
        return self._clock() * 1000

    # ------------------------------------------------------------------ Fetch

    def send_fetches(self) -> int:
        """One Fetch to each leader of partitions with neither buffered records nor a fetch in flight."""
        now = self._now_ms()
        cluster = self._metadata.cluster
        buffered = {c.topic_partition for c in self._completed}
        buffered.update(tp for pending in self._pending.values() for tp in pending.offsets)
        requests: dict[int, tuple[pb.FetchRequest, dict[TopicPartition, int]]] = {}
        topics: dict[tuple[int, str], pb.FetchRequest.FetchTopic] = {}
        for tp in self._subscriptions.fetchable_partitions(now):
            if tp in buffered:
                continue
            leader = cluster.leader_for(tp)
            if leader is None:
                self._metadata.request_update()
                continue
            position = self._subscriptions.position(tp)
            assert position is not None
            entry = requests.get(leader.node_id)
            if entry is None:
                entry = requests[leader.node_id] = (pb.FetchRequest(
                    replica_id=-1, max_wait_ms=self._fetch_max_wait_ms, min_bytes=self._fetch_min_bytes,
                    max_bytes=self._fetch_max_bytes, isolation_level=self._isolation_level), {})
            request, offsets = entry
            topic = topics.get((leader.node_id, tp.topic))
            if topic is None:
                topic = topics[leader.node_id, tp.topic] = request.topics.add(topic=tp.topic)
            topic.partitions.add(partition=tp.partition, current_leader_epoch=cluster.leader_epoch(tp),
                                 fetch_offset=position, log_start_offset=-1,
                                 partition_max_bytes=self._max_partition_fetch_bytes)
            offsets[tp] = position
        for node_id, (request, offsets) in requests.items():
            connection = self._metadata.pool.get(cluster.brokers[node_id].address)
            # The broker may hold the request for max_wait_ms before answering: that is not a timeout.
            future = connection.call_async(lambda stub: stub.Fetch, request,
                                           self._request_timeout_ms + self._fetch_max_wait_ms)
            self._pending[self._next_request] = _PendingFetch(node_id, future, offsets)
            self._next_request += 1
            future.add_done_callback(lambda _: self._answered.set())
        return len(requests)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def wait(self, timeout_ms: float) -> None:
        """Until an answer arrives or `timeout_ms` passes."""
        if self._pending and not any(p.future.done() for p in self._pending.values()):
            self._answered.wait(max(timeout_ms, 0) / 1000)
        self._answered.clear()

    def handle_answers(self) -> None:
        """Turn every Fetch answer that arrived into CompletedFetches, and act on per-partition errors."""
        for number, pending in list(self._pending.items()):
            if not pending.future.done():
                continue
            del self._pending[number]
            now = self._now_ms()
            try:
                response = pending.future.result(0)
            except KafkaError as exc:
                log.debug("fetch from node %d failed: %s", pending.node_id, exc)
                self._back_off(pending.offsets, exc.code, now)
                continue
            if response.error_code:
                self._back_off(pending.offsets, response.error_code, now)
                continue
            for topic in response.responses:
                for part in topic.partitions:
                    tp = TopicPartition(topic.topic, part.partition_index)
                    fetch_offset = pending.offsets.get(tp)
                    if fetch_offset is not None:
                        self._handle_partition(tp, fetch_offset, part, now)

    def _back_off(self, offsets: dict[TopicPartition, int], code: int, now: float) -> None:
        if _invalidates(code):
            self._metadata.request_update()
        for tp in offsets:
            if self._subscriptions.is_assigned(tp):
                self._subscriptions.state(tp).next_retry_ms = now + self._retry_backoff_ms

    def _handle_partition(self, tp: TopicPartition, fetch_offset: int, part: pb.FetchResponse.PartitionData,
                          now: float) -> None:
        subscriptions = self._subscriptions
        # The answer is stale if the partition was unassigned or seeked while the fetch was out.
        if not subscriptions.is_assigned(tp) or subscriptions.position(tp) != fetch_offset:
            return
        state = subscriptions.state(tp)
        action = fetch_action(part.error_code)
        if action is FetchAction.RECORDS:
            state.high_watermark = part.high_watermark
            state.log_start_offset = part.log_start_offset
            state.last_stable_offset = part.last_stable_offset
            data = part.records  # read once: each read of a bytes field copies it out of the message
            if not data:
                return
            aborted = None
            if self._isolation_level == READ_COMMITTED:
                aborted = [(txn.producer_id, txn.first_offset) for txn in part.aborted_transactions]
            scanned = scan_records(tp, data, fetch_offset, check_crcs=self._check_crcs, aborted_transactions=aborted)
            self._completed.append(CompletedFetch(tp, fetch_offset, None, scanned.next_offset, scanned,
                                                  self._key_deserializer, self._value_deserializer))
        elif action is FetchAction.RESET_OFFSET:
            strategy = subscriptions.default_reset_strategy
            if strategy is None:
                raise OffsetOutOfRangeError(f"fetch offset {fetch_offset} is out of range for {tp}"
                                            " and auto_offset_reset is 'none'")
            log.info("fetch offset %d is out of range for %s, resetting to %s", fetch_offset, tp, strategy.name)
            subscriptions.request_offset_reset(tp, strategy)
        elif action is FetchAction.RAISE:
            raise error_for(part.error_code, f"fetching {tp} at offset {fetch_offset}")
        else:
            log.debug("fetching %s: %s, retrying", tp, ErrorCode(part.error_code).name)
            self._back_off({tp: fetch_offset}, part.error_code, now)

    def fetched_records(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to `max_records` buffered records, advancing positions past what is returned."""
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        remaining = max_records
        subscriptions = self._subscriptions
        while self._completed and remaining > 0:
            completed = self._completed[0]
            tp = completed.topic_partition
            if not subscriptions.is_assigned(tp) or subscriptions.position(tp) != completed.fetch_offset:
                self._completed.popleft()  # seeked or unassigned since: these records are not wanted
                continue
            if completed.records is None and completed.max_records <= remaining:
                # All of it goes out in this poll: the position moves past it now and the partition's
                # next fetch leaves before the records are decoded, so the broker reads while we decode.
                self._completed.popleft()
                state = subscriptions.state(tp)
                state.position = max(completed.next_fetch_offset, completed.fetch_offset)
                self.send_fetches()
                try:
                    records = completed.decode()
                except Exception:
                    # Undone: the fetch just sent is answered for a position it no longer has, so dropped.
                    state.position = completed.fetch_offset
                    self._completed.appendleft(completed)
                    if out:
                        return out  # what other partitions gave is not lost: the error comes next poll
                    raise
                if records:
                    out.setdefault(tp, []).extend(records)
                    remaining -= len(records)
                self._record_lag(tp)
                continue
            try:
                records = completed.decode()
            except Exception:
                if out:
                    return out
                raise
            taken = records[completed.index : completed.index + remaining]
            completed.index += len(taken)
            remaining -= len(taken)
            if completed.index >= len(records):
                self._completed.popleft()
                position = completed.next_fetch_offset
            else:
                position = taken[-1].offset + 1
                completed.fetch_offset = position  # what is left starts here
            if taken:
                out.setdefault(tp, []).extend(taken)
            subscriptions.state(tp).position = max(position, completed.fetch_offset)
            self._record_lag(tp)
        return out

    def _record_lag(self, tp: TopicPartition) -> None:
        """Kafka records a partition's lag as its records are handed out: the end a reader of its isolation
        level can reach (high watermark, or last stable offset for READ_COMMITTED) - new position."""
        state = self._subscriptions.state(tp)
        end = state.last_stable_offset if self._isolation_level == READ_COMMITTED else state.high_watermark
        if self._metrics is not None and end >= 0 and state.position is not None:
            self._metrics.record_partition_lag(tp, end - state.position)

    def close(self) -> None:
        for pending in self._pending.values():
            pending.future.cancel()
        self._pending.clear()
        self._completed.clear()

    # ------------------------------------------------------------------ ListOffsets

    def list_offsets(self, timestamps: dict[TopicPartition, int],
                     timeout_ms: float) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """ListOffsets to each partition's leader (-1 latest, -2 earliest, else the first offset at or after
        that timestamp), retrying retriable errors until `timeout_ms`; None where no such offset exists."""
        deadline = self._now_ms() + timeout_ms
        remaining = dict(timestamps)
        results: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        last_error: KafkaError | None = None
        while True:
            attempt_ms = min(self._request_timeout_ms, max(deadline - self._now_ms(), 1))
            last_error = self._list_offsets_once(remaining, results, attempt_ms) or last_error
            if not remaining:
                return results
            now = self._now_ms()
            if now >= deadline:
                raise KafkaTimeoutError(f"ListOffsets for {sorted(map(str, remaining))} did not succeed"
                                        f" within {timeout_ms:.0f} ms (last error: {last_error})")
            time.sleep(min(self._retry_backoff_ms, deadline - now) / 1000)
            self._metadata.maybe_refresh(deadline - self._now_ms())

    def _list_offsets_once(self, remaining: dict[TopicPartition, int],
                           results: dict[TopicPartition, OffsetAndTimestamp | None],
                           timeout_ms: float) -> KafkaError | None:
        """One round of requests, one per leader; settles what it can in `remaining` / `results`."""
        cluster = self._metadata.cluster
        requests: dict[int, pb.ListOffsetsRequest] = {}
        topics: dict[tuple[int, str], pb.ListOffsetsRequest.ListOffsetsTopic] = {}
        last_error: KafkaError | None = None
        for tp, timestamp in remaining.items():
            leader = cluster.leader_for(tp)
            if leader is None:
                self._metadata.request_update()
                last_error = KafkaError(f"no known leader for {tp}", ErrorCode.LEADER_NOT_AVAILABLE)
                continue
            request = requests.get(leader.node_id)
            if request is None:
                request = requests[leader.node_id] = pb.ListOffsetsRequest(
                    replica_id=-1, isolation_level=self._isolation_level)
            topic = topics.get((leader.node_id, tp.topic))
            if topic is None:
                topic = topics[leader.node_id, tp.topic] = request.topics.add(name=tp.topic)
            topic.partitions.add(partition_index=tp.partition, current_leader_epoch=cluster.leader_epoch(tp),
                                 timestamp=timestamp)
        futures = [
            self._metadata.pool.get(cluster.brokers[node_id].address).call_async(
                lambda stub: stub.ListOffsets, request, timeout_ms)
            for node_id, request in requests.items()
        ]
        for future in futures:
            try:
                response = future.result()
            except KafkaError as exc:
                if exc.invalid_metadata:
                    self._metadata.request_update()
                last_error = exc
                continue
            for topic_response in response.topics:
                for part in topic_response.partitions:
                    tp = TopicPartition(topic_response.name, part.partition_index)
                    if tp not in remaining:
                        continue
                    if part.error_code == ErrorCode.NONE:
                        del remaining[tp]
                        results[tp] = OffsetAndTimestamp(part.offset, part.timestamp, part.leader_epoch) \
                            if part.offset >= 0 else None
                        continue
                    error = error_for(part.error_code, f"ListOffsets for {tp}")
                    if not error.retriable:
                        raise error
                    if error.invalid_metadata:
                        self._metadata.request_update()
                    last_error = error
        return last_error


def _invalidates(code: int) -> bool:
    try:
        return invalidates_metadata(ErrorCode(code))
    except ValueError:
        return False

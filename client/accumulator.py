"""The producer's RecordAccumulator: per-partition queues of batches that send() fills and the sender drains.

send() appends each record to the open batch of its partition, encoding it
there and then (Kafka's MemoryRecordsBuilder), under the accumulator's one lock;
the batch header is written once, when the sender takes the batch. A batch is
ready to go when it is full, when linger_ms has passed since it was opened, or
when a flush or close asks for everything.

Order within a partition is kept by limiting how many of its batches are in
flight: one without idempotence (a retried batch would otherwise overtake the
next one, and gRPC does not promise to process concurrent calls in order);
up to max_in_flight_requests_per_connection (<= 5) with idempotence, where the
broker's sequence check puts them in order. A batch coming back for a retry goes
to the front of its queue, in creation order, and waits until none of its
partition's batches is in flight.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from client.builtin_partitioner import BuiltInPartitioner
from client.errors import IllegalStateError, KafkaTimeoutError
from client.future import FutureRecordMetadata, ProduceRequestResult
from client.metadata import ClusterMetadata
from client.structs import Header
from common.record import (
    HEADER_SIZE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    CompressionType,
    assemble_batch,
    encode_record,
    write_batch_header,
)
from proto.errors import KafkaError
from proto.types import TopicPartition

# Upper bound of a record's bytes beyond its key, value and headers: length (5), attributes (1),
# timestamp delta (10), offset delta (5), key and value lengths (5 + 5), header count (5).
RECORD_OVERHEAD_UPPER_BOUND = 36

# send()'s per-record callback: called with the record's future once it is acknowledged or failed.
RecordCallback = Callable[[FutureRecordMetadata], Any]


class ProducerBatch:
    """Records on their way to one partition: encoded as they arrive behind room for the batch header, which is
    written there when the batch is drained (uncompressed: the batch is never copied)."""

    __slots__ = (
        "_limit",
        "base_sequence",
        "base_timestamp",
        "batch_id",
        "buffer",
        "created_ms",
        "encoded",
        "followed_unacked",
        "is_full",
        "last_error",
        "max_timestamp",
        "record_count",
        "reserved",
        "result",
        "retries_done",
        "retry_at_ms",
        "topic_partition",
    )

    def __init__(self, tp: TopicPartition, batch_id: int, created_ms: float, base_timestamp: int, batch_size: int,
                 reserved: int = 0) -> None:
        self.topic_partition = tp
        self.batch_id = batch_id  # creation order, which is the partition's record order
        self.created_ms = created_ms
        self.base_timestamp = base_timestamp
        self.max_timestamp = base_timestamp
        self.buffer = bytearray(HEADER_SIZE)  # the header's room, then the records
        self.record_count = 0
        self._limit = batch_size
        self.is_full = False  # also set once drained: no more appends
        self.result = ProduceRequestResult(tp)
        self.reserved = reserved  # bytes of buffer_memory held until the batch completes
        self.retries_done = 0
        self.retry_at_ms = 0.0
        self.base_sequence = NO_SEQUENCE
        self.encoded: bytes | bytearray | None = None  # uncompressed, `buffer` itself
        # Sent while an earlier batch of its partition was not yet acknowledged (idempotence): the broker
        # may see the two in either order, so an OUT_OF_ORDER_SEQUENCE_NUMBER answer is not a real gap.
        self.followed_unacked = False
        self.last_error: KafkaError | None = None

    def try_append(self, timestamp: int, key: bytes | None, value: bytes | None, headers: Sequence[Header]) -> int:
        """Encode the record into the batch: its size in bytes, or 0 (and the batch is full) if it does not fit.

        A batch always takes its first record, however large: a record bigger
        than batch_size travels alone.
        """
        records = self.buffer
        mark = len(records)
        count = self.record_count
        size = encode_record(records, count, timestamp - self.base_timestamp, key, value, headers)
        if mark + size > self._limit:
            self.is_full = True
            if count:
                del records[mark:]
                return 0
        self.record_count = count + 1
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        return size

    @property
    def size(self) -> int:
        return len(self.encoded) if self.encoded is not None else len(self.buffer)

    def seal(self, compression: CompressionType, producer_id: int = NO_PRODUCER_ID,
             producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
             is_transactional: bool = False) -> bytes | bytearray:
        """Write the header (Kafka's MemoryRecordsBuilder.close); retries resend exactly these bytes."""
        self.base_sequence = base_sequence
        if compression == CompressionType.NONE:
            write_batch_header(self.buffer, self.record_count, self.base_timestamp, self.max_timestamp,
                               producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                               is_transactional=is_transactional)
            self.encoded = self.buffer
        else:
            self.encoded = assemble_batch(
                memoryview(self.buffer)[HEADER_SIZE:], self.record_count, self.base_timestamp, self.max_timestamp,
                compression=compression, producer_id=producer_id, producer_epoch=producer_epoch,
                base_sequence=base_sequence, is_transactional=is_transactional)
        return self.encoded

    def unseal(self) -> None:
        """Forget header and sequence (after a producer id reset) so the next drain seals it afresh."""
        self.encoded = None
        self.base_sequence = NO_SEQUENCE


class ReadyCheckResult(NamedTuple):
    ready_nodes: set[int]
    next_ready_check_delay_ms: float
    unknown_leader_topics: set[str]


class RecordAccumulator:
    def __init__(
        self,
        *,
        batch_size: int = 1_000_000,
        linger_ms: float = 0,
        buffer_memory: int = 32 << 20,
        max_block_ms: float = 60_000,
        delivery_timeout_ms: float = 120_000,
        retry_backoff_ms: float = 100,
        max_in_flight_per_partition: int = 1,
        partitioner_adaptive_partitioning_enable: bool = True,
        partitioner_availability_timeout_ms: float = 0,
        clock: Callable[[], float] = time.monotonic,
        wakeup: Callable[[], None] = lambda: None,
        rand: random.Random | None = None,
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.max_block_ms = max_block_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.max_in_flight_per_partition = max_in_flight_per_partition
        self._clock = clock
        self._wakeup = wakeup
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._in_flight: dict[TopicPartition, int] = {}
        self._incomplete: dict[int, ProducerBatch] = {}  # by batch_id: every batch not yet completed
        self._buffered = 0
        self._memory_waiters = 0
        self._flushes_in_progress = 0
        self._next_batch_id = 0
        self._drain_start = 0
        self.closed = False
        # KIP-794: each topic's sticky partition for keyless records, and what the adaptive draw knows.
        self._sticky: dict[str, BuiltInPartitioner] = {}
        self._rand = rand or random.Random()
        self.adaptive_partitioning = partitioner_adaptive_partitioning_enable
        self.availability_timeout_ms = partitioner_availability_timeout_ms
        self._node_ready_ms: dict[int, float] = {}  # Kafka's NodeLatencyStats: last time with data to send
        self._node_drain_ms: dict[int, float] = {}  # and last time it could be sent

    def _now_ms(self) -> float:
        return self._clock() * 1000

    # ------------------------------------------------------------------ send() side

    def append(self, tp: TopicPartition, timestamp: int, key: bytes | None, value: bytes | None,
               headers: Sequence[Header], key_size: int, value_size: int, header_size: int,
               abort_on_new_batch: bool = False, callback: RecordCallback | None = None) -> FutureRecordMetadata | None:
        """Add a record to the partition's open batch, opening one if needed.

        With `abort_on_new_batch`, returns None instead of opening a batch, so
        a partitioner given to the producer can choose another partition first
        (Kafka's RecordAccumulator.append with abortOnNewBatch, KIP-480).
        """
        lock = self._lock
        lock.acquire()  # not `with`: its __enter__ and __exit__ calls cost a third more, per record
        try:
            return self._append(tp, timestamp, key, value, headers, key_size, value_size, header_size,
                                abort_on_new_batch, callback)[0]
        finally:
            lock.release()

    def append_keyless(self, topic: str, tps: Sequence[TopicPartition], available: Sequence[int], timestamp: int,
                       value: bytes | None, headers: Sequence[Header], value_size: int, header_size: int,
                       callback: RecordCallback | None = None) -> FutureRecordMetadata:
        """Add a record without key or partition to its topic's sticky partition (KIP-794, Kafka 3.3's append
        with UNKNOWN_PARTITION and the built-in partitioner): `tps` are the topic's partitions, `available` the
        numbers of those with a leader.

        The partition is switched under the lock that orders the appends, as Kafka does under the partition's
        queue lock: when the record would open a new batch (so the partition's batches are all full or sent)
        after batch.size bytes went to it, the record goes to the next partition instead; once twice batch.size
        went to it, the next record does, whatever its batches. Per record this costs two comparisons.
        """
        lock = self._lock
        lock.acquire()
        try:
            sticky = self._sticky.get(topic)
            if sticky is None:
                sticky = self._sticky[topic] = BuiltInPartitioner(self.batch_size, self._rand)
            partition = sticky.partition
            if partition < 0 or partition >= len(tps):
                partition = sticky.next_partition(available, len(tps))
            future, appended = self._append(tps[partition], timestamp, None, value, headers, -1, value_size,
                                            header_size, sticky.produced_bytes >= self.batch_size, callback)
            if future is None:
                partition = sticky.next_partition(available, len(tps))
                future, appended = self._append(tps[partition], timestamp, None, value, headers, -1, value_size,
                                                header_size, False, callback)
                assert future is not None
            sticky.produced_bytes += appended
            if sticky.produced_bytes >= 2 * self.batch_size:
                sticky.next_partition(available, len(tps))
            return future
        finally:
            lock.release()

    def _append(self, tp: TopicPartition, timestamp: int, key: bytes | None, value: bytes | None,
                headers: Sequence[Header], key_size: int, value_size: int, header_size: int,
                abort_on_new_batch: bool, callback: RecordCallback | None) -> tuple[FutureRecordMetadata | None, int]:
        """append's work, under the lock: the record's future and its size in the batch (None and 0 when aborted
        before a new batch). send()'s per-record path, so one call holds all of it."""
        # buffer_memory counts the bytes records take (librdkafka's queue.buffering.max.kbytes), not batch_size
        # per open batch (Java's BufferPool): with batches of up to batch_size (1 MB by default), a reservation of
        # a whole batch each would stall a producer writing to a few dozen partitions long before memory is full.
        # Nulls are -1 here, which the upper bound's overhead more than covers.
        estimate = key_size + value_size + header_size + RECORD_OVERHEAD_UPPER_BOUND
        if self.closed:
            raise IllegalStateError("Cannot perform operation after producer has been closed")
        if self._buffered + estimate > self.buffer_memory:
            self._reserve(estimate)
        else:
            self._buffered += estimate
        dq = self._batches.get(tp)
        batch = dq[-1] if dq else None
        size = batch.try_append(timestamp, key, value, headers) if batch is not None and not batch.is_full else 0
        if size:
            batch.reserved += estimate  # type: ignore[union-attr]  # size > 0: a batch took the record
        else:
            self._release(estimate)
            if abort_on_new_batch:
                return None, 0
            reserved = HEADER_SIZE + estimate
            self._reserve(reserved)
            batch = ProducerBatch(tp, self._next_batch_id, self._now_ms(), timestamp, self.batch_size, reserved)
            self._next_batch_id += 1
            size = batch.try_append(timestamp, key, value, headers)
            self._batches.setdefault(tp, deque()).append(batch)
            self._incomplete[batch.batch_id] = batch
            self._wakeup()
        assert batch is not None
        result = batch.result
        future = FutureRecordMetadata(result, batch.record_count - 1, timestamp, key_size, value_size, header_size)
        if callback is not None:
            # send()'s callback, attached while the batch cannot complete (the lock is held), so without the
            # result's lock: ProduceRequestResult.add_record_callback, inline, as this runs once per record.
            result._record_callbacks.append(callback)
            result._record_futures.append(future)
        return future, size

    def _release(self, size: int) -> None:
        self._buffered -= size
        if self._memory_waiters:
            self._space.notify_all()

    def _reserve(self, size: int) -> None:
        """Take `size` bytes of buffer_memory, blocking up to max_block_ms for batches to complete."""
        if self._buffered + size > self.buffer_memory:
            deadline = self._now_ms() + self.max_block_ms
            self._memory_waiters += 1
            try:
                self._wakeup()  # a full buffer makes every batch ready: let the sender empty it
                while self._buffered + size > self.buffer_memory:
                    remaining = deadline - self._now_ms()
                    if remaining <= 0:
                        raise KafkaTimeoutError(
                            f"failed to allocate {size} bytes of buffer_memory within {self.max_block_ms:.0f} ms")
                    self._space.wait(remaining / 1000)
            finally:
                self._memory_waiters -= 1
        self._buffered += size

    # ------------------------------------------------------------------ sender side

    def _sendable(self, tp: TopicPartition, first: ProducerBatch, now_ms: float) -> bool:
        in_flight = self._in_flight.get(tp, 0)
        if first.retries_done:
            return in_flight == 0 and now_ms >= first.retry_at_ms
        return in_flight < self.max_in_flight_per_partition

    def ready(self, cluster: ClusterMetadata, now_ms: float) -> ReadyCheckResult:
        """Leaders with a batch to send now, and when to look again (Kafka's RecordAccumulator.ready)."""
        ready_nodes: set[int] = set()
        unknown_leader_topics: set[str] = set()
        next_delay = float("inf")
        with self._lock:
            send_all = self.closed or self._flushes_in_progress > 0 or self._memory_waiters > 0
            for tp, dq in self._batches.items():
                if not dq:
                    continue
                first = dq[0]
                next_delay = min(next_delay, first.created_ms + self.delivery_timeout_ms - now_ms)
                leader = cluster.leader_for(tp)
                if leader is None:
                    unknown_leader_topics.add(tp.topic)
                    continue
                if leader.node_id in ready_nodes or not self._sendable(tp, first, now_ms):
                    if first.retries_done and first.retry_at_ms > now_ms:
                        next_delay = min(next_delay, first.retry_at_ms - now_ms)
                    continue
                lingered = now_ms - first.created_ms >= self.linger_ms
                if send_all or first.retries_done or lingered or first.is_full or len(dq) > 1:
                    ready_nodes.add(leader.node_id)
                else:
                    next_delay = min(next_delay, first.created_ms + self.linger_ms - now_ms)
            if self.adaptive_partitioning:
                for topic, sticky in self._sticky.items():
                    self._update_partition_load_stats(topic, sticky, cluster)
        return ReadyCheckResult(ready_nodes, max(next_delay, 0.0), unknown_leader_topics)

    def _update_partition_load_stats(self, topic: str, sticky: BuiltInPartitioner, cluster: ClusterMetadata) -> None:
        """The queue sizes the adaptive draw weighs, as Kafka's ready() collects them: once every partition of the
        topic has had a batch, the number of batches waiting in each partition with a leader, leaving out those
        whose leader is past partitioner.availability.timeout.ms."""
        tps = cluster.topic_partitions(topic) or ()
        batches = self._batches
        if not tps or any(tp not in batches for tp in tps):
            sticky.update_partition_load_stats(None, [], len(tps))
            return
        sizes: list[int] = []
        ids: list[int] = []
        for tp in tps:
            leader = cluster.leader_for(tp)
            if leader is None or self._unavailable(leader.node_id):
                continue
            sizes.append(len(batches[tp]))
            ids.append(tp.partition)
        sticky.update_partition_load_stats(sizes, ids, len(tps))

    def _unavailable(self, node_id: int) -> bool:
        timeout = self.availability_timeout_ms
        if timeout <= 0:
            return False
        ready = self._node_ready_ms.get(node_id)
        return ready is not None and ready - self._node_drain_ms[node_id] > timeout

    def update_node_latency_stats(self, ready_nodes: set[int], drainable: set[int], now_ms: float) -> None:
        """Kafka's updateNodeLatencyStats, for partitioner.availability.timeout.ms: each node with data ready was
        ready now, and drained now if the sender could send to it (it had a free in-flight slot)."""
        if self.availability_timeout_ms <= 0:
            return
        with self._lock:
            for node in ready_nodes:
                if node in drainable or node not in self._node_drain_ms:
                    self._node_drain_ms[node] = now_ms
                self._node_ready_ms[node] = now_ms

    def drain(self, cluster: ClusterMetadata, nodes: set[int], max_request_size: int, now_ms: float,
              can_send_unsealed: bool = True,
              partition_allowed: Callable[[TopicPartition], bool] | None = None) -> dict[int, list[ProducerBatch]]:
        """Take at most one batch per partition for each node, up to max_request_size per node.

        Every sendable batch led by a ready node goes, not only the ready ones:
        it rides along at no extra cost. `can_send_unsealed` False holds back
        batches that still need a sequence number (no producer id yet);
        `partition_allowed` False holds back a partition's batches (a
        transactional producer's partition not yet in the transaction).
        """
        drained: dict[int, list[ProducerBatch]] = {}
        sizes: dict[int, int] = {}
        with self._lock:
            partitions = list(self._batches)
            if not partitions:
                return drained
            # Rotate where draining starts so no partition is always last when requests fill up.
            self._drain_start = (self._drain_start + 1) % len(partitions)
            for tp in partitions[self._drain_start:] + partitions[: self._drain_start]:
                dq = self._batches[tp]
                if not dq:
                    continue
                leader = cluster.leader_for(tp)
                if leader is None or leader.node_id not in nodes:
                    continue
                first = dq[0]
                if not self._sendable(tp, first, now_ms) or (first.encoded is None and not can_send_unsealed):
                    continue
                if partition_allowed is not None and not partition_allowed(tp):
                    continue
                node = leader.node_id
                size = sizes.get(node, 0)
                if size and size + first.size > max_request_size:
                    continue
                dq.popleft()
                first.is_full = True
                sizes[node] = size + first.size
                self._in_flight[tp] = self._in_flight.get(tp, 0) + 1
                drained.setdefault(node, []).append(first)
        return drained

    def answered(self, batch: ProducerBatch) -> None:
        """The batch's request came back (or failed): its partition has one batch less in flight."""
        with self._lock:
            self._in_flight[batch.topic_partition] -= 1

    def reenqueue(self, batch: ProducerBatch, now_ms: float) -> None:
        """Put a batch back for a retry after retry_backoff_ms, ahead of every later batch of its partition."""
        with self._lock:
            batch.retries_done += 1
            batch.retry_at_ms = now_ms + self.retry_backoff_ms
            dq = self._batches.setdefault(batch.topic_partition, deque())
            index = 0
            while index < len(dq) and dq[index].batch_id < batch.batch_id:
                index += 1
            dq.insert(index, batch)

    def deallocate(self, batch: ProducerBatch) -> None:
        """The batch is completed: release its memory and forget it."""
        with self._lock:
            if self._incomplete.pop(batch.batch_id, None) is not None:
                self._release(batch.reserved)

    def expired_batches(self, now_ms: float) -> list[ProducerBatch]:
        """Batches waiting longer than delivery_timeout_ms since they were opened (KIP-91); they leave the queue."""
        expired: list[ProducerBatch] = []
        with self._lock:
            for dq in self._batches.values():
                # Older batches are in front, so expiry never leaves a gap behind a live batch.
                while dq and now_ms - dq[0].created_ms >= self.delivery_timeout_ms:
                    batch = dq.popleft()
                    batch.is_full = True
                    expired.append(batch)
        return expired

    def sequenced_batches(self) -> list[ProducerBatch]:
        """Queued batches that already carry a sequence (retries), front first per partition."""
        with self._lock:
            return [b for dq in self._batches.values() for b in dq if b.base_sequence != NO_SEQUENCE]

    def remove(self, batch: ProducerBatch) -> None:
        with self._lock:
            dq = self._batches.get(batch.topic_partition)
            if dq is not None and batch in dq:
                dq.remove(batch)

    def partitions_with_batches(self) -> list[TopicPartition]:
        with self._lock:
            return [tp for tp, dq in self._batches.items() if dq]

    def has_undrained(self) -> bool:
        with self._lock:
            return any(self._batches.values())

    def incomplete_batches(self) -> list[ProducerBatch]:
        with self._lock:
            return list(self._incomplete.values())

    def abort_undrained(self) -> list[ProducerBatch]:
        """Empty every queue (a forced close); returns what was there."""
        with self._lock:
            batches = [b for dq in self._batches.values() for b in dq]
            for dq in self._batches.values():
                dq.clear()
            return batches

    # ------------------------------------------------------------------ flush / close

    def begin_flush(self) -> None:
        with self._lock:
            self._flushes_in_progress += 1

    def end_flush(self) -> None:
        with self._lock:
            self._flushes_in_progress -= 1

    def await_completion(self, batches: list[ProducerBatch], timeout_ms: float | None) -> bool:
        """Wait until all `batches` are completed; False if `timeout_ms` ran out first."""
        deadline = None if timeout_ms is None else self._now_ms() + timeout_ms
        for batch in batches:
            remaining = None if deadline is None else max(deadline - self._now_ms(), 0) / 1000
            if not batch.result.wait(remaining):
                return False
        return True

    def close(self) -> None:
        """No more appends; every queued batch becomes ready."""
        with self._lock:
            self.closed = True

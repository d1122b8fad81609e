"""The marker channel (Kafka 2.8's TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler):
once PrepareCommit / PrepareAbort is durable, a COMMIT or ABORT marker goes to the leader of every partition the
transaction touched, and the transaction completes (CompleteCommit / CompleteAbort appended) only when every one
is written.

- Batched per broker: the markers queued for one broker while its previous request is in flight go together in
  its next WriteTxnMarkers request (one marker per transaction, with that transaction's partitions there).
- Retried through leader changes: a partition with no known leader, a NOT_LEADER_OR_FOLLOWER or other retriable
  answer, or a request that fails whole, is looked up again and resent after `retry_backoff_ms`.
- The coordinator epoch travels with each marker; a coordinator that lost the partition (its epoch moved on, or
  the id left its cache) stops sending, and the new coordinator, which loaded the Prepare state, finishes.
- A partition whose topic is gone from the metadata is dropped from the set (nothing left to mark).

The channel sees the cluster through two callables the server injects: the leader of a partition (the metadata
cache) and `send(broker_id, markers)`, which writes markers on that broker (this broker's own operations for its
own partitions, the inter-broker gRPC listener for others').
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from broker.coordinator.transaction.transaction_metadata import TransactionMetadata, TxnTransitMetadata
from proto.errors import ErrorCode
from proto.types import TopicPartition

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WritableTxnMarker:
    """One marker of a WriteTxnMarkers request (Kafka's WritableTxnMarker)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


# Writes the markers on one broker; each marker's partition errors, in order. Raises on a failed request.
SendMarkers = Callable[[int, Sequence[WritableTxnMarker]], Awaitable[list[dict[TopicPartition, ErrorCode]]]]

# Kafka's TransactionMarkerRequestCompletionHandler: answers after which the marker is sent again.
_RETRIABLE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION,
})
# ... after which sending stops: the producer (or coordinator) moved on, and whoever fenced it finishes.
_ABORT_SENDING = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                            ErrorCode.PRODUCER_FENCED})
# ... after which the partition is skipped (Kafka logs it and completes without it).
_SKIP = frozenset({ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.CLUSTER_AUTHORIZATION_FAILED})


@dataclass(slots=True)
class _Queued:
    marker: WritableTxnMarker
    answer: asyncio.Future[dict[TopicPartition, ErrorCode]]


@dataclass(slots=True)
class _BrokerQueue:
    queued: list[_Queued] = field(default_factory=list)
    sending: bool = False


class TransactionMarkerChannelManager:
    def __init__(self, leader_for: Callable[[TopicPartition], int | None],
                 topic_exists: Callable[[str], bool], send: SendMarkers,
                 is_current: Callable[[str, int], bool],
                 complete: Callable[[TransactionMetadata, int, TxnTransitMetadata], Awaitable[None]],
                 retry_backoff_ms: int, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._leader_for = leader_for
        self._topic_exists = topic_exists
        self._send = send
        # Whether this broker still coordinates the id at that coordinator epoch.
        self._is_current = is_current
        # Appends CompleteCommit / CompleteAbort once every marker is written (the coordinator's job).
        self._complete = complete
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._sleep = sleep
        self._queues: dict[int, _BrokerQueue] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def add_txn_markers_to_send(self, coordinator_epoch: int, commit: bool, txn: TransactionMetadata,
                                complete_transit: TxnTransitMetadata) -> None:
        """Send the transaction's markers in the background, then complete it."""
        task = asyncio.get_running_loop().create_task(
            self._send_until_written(coordinator_epoch, commit, txn, complete_transit))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def pending(self) -> int:
        """Transactions whose markers are still going out."""
        return len(self._tasks)

    async def backoff(self) -> None:
        """retry.backoff.ms before the next attempt."""
        await self._sleep(self._retry_backoff_s)

    def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def _send_until_written(self, coordinator_epoch: int, commit: bool, txn: TransactionMetadata,
                                  complete_transit: TxnTransitMetadata) -> None:
        tid = txn.transactional_id
        try:
            while True:
                if not self._is_current(tid, coordinator_epoch):
                    logger.info("Stopped sending the markers of %s: its coordinator epoch %d is no longer current",
                                tid, coordinator_epoch)
                    return
                for tp in [tp for tp in txn.topic_partitions if not self._topic_exists(tp.topic)]:
                    logger.info("Dropping the marker of %s for %s: the topic no longer exists", tid, tp)
                    txn.remove_partition(tp)
                if not txn.topic_partitions:
                    break
                if await self._send_round(coordinator_epoch, commit, txn) == "abort":
                    return
                if txn.topic_partitions:
                    await self.backoff()
            await self._complete(txn, coordinator_epoch, complete_transit)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("Sending the markers of %s failed", tid)

    async def _send_round(self, coordinator_epoch: int, commit: bool, txn: TransactionMetadata) -> str:
        """One marker per leader for the partitions still unwritten; "abort" when sending must stop."""
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp in sorted(txn.topic_partitions):
            leader = self._leader_for(tp)
            if leader is not None and leader >= 0:
                by_broker.setdefault(leader, []).append(tp)
        answers = await asyncio.gather(*(
            self._submit(broker, WritableTxnMarker(txn.producer_id, txn.producer_epoch, commit, coordinator_epoch,
                                                   tuple(partitions)))
            for broker, partitions in by_broker.items()))
        outcome = "continue"
        for errors in answers:
            for tp, error in errors.items():
                if error is ErrorCode.NONE or error in _SKIP:
                    if error is not ErrorCode.NONE:
                        logger.error("Sending the marker of %s to %s failed with %s: skipping it",
                                     txn.transactional_id, tp, error.name)
                    if tp in txn.topic_partitions:
                        txn.remove_partition(tp)
                elif error in _ABORT_SENDING:
                    logger.info("Sending the markers of %s stops: %s answered %s", txn.transactional_id, tp,
                                error.name)
                    outcome = "abort"
                elif error not in _RETRIABLE:
                    logger.error("Unexpected %s writing the marker of %s to %s: retrying", error.name,
                                 txn.transactional_id, tp)
        return outcome

    # ------------------------------------------------------------------ one request per broker at a time

    def _submit(self, broker: int, marker: WritableTxnMarker) -> asyncio.Future[dict[TopicPartition, ErrorCode]]:
        answer: asyncio.Future[dict[TopicPartition, ErrorCode]] = asyncio.get_running_loop().create_future()
        queue = self._queues.setdefault(broker, _BrokerQueue())
        queue.queued.append(_Queued(marker, answer))
        if not queue.sending:
            queue.sending = True
            task = asyncio.get_running_loop().create_task(self._drain(broker, queue))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return answer

    async def _drain(self, broker: int, queue: _BrokerQueue) -> None:
        """Send what is queued for the broker as one request, again while more arrived meanwhile."""
        try:
            while queue.queued:
                await asyncio.sleep(0)  # let the markers of this loop iteration join the request
                batch, queue.queued = queue.queued, []
                try:
                    answers = await self._send(broker, [q.marker for q in batch])
                except Exception as e:
                    logger.warning("WriteTxnMarkers to broker %d failed: %s", broker, e)
                    answers = [dict.fromkeys(q.marker.partitions, ErrorCode.NETWORK_EXCEPTION) for q in batch]
                for q, errors in zip(batch, answers, strict=True):
                    if not q.answer.done():
                        q.answer.set_result(errors)
        finally:
            queue.sending = False
            for q in queue.queued:
                if not q.answer.done():
                    q.answer.set_result(dict.fromkeys(q.marker.partitions, ErrorCode.NETWORK_EXCEPTION))
            queue.queued.clear()

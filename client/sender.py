"""The producer's I/O thread (Kafka's Sender): drains ready batches into Produce requests and settles them.

One thread owns all of a producer's network state. Each pass it settles the
answers that came back, expires batches past delivery_timeout_ms, makes sure an
idempotent producer has its producer id, refreshes metadata when asked to, and
sends one Produce request per leader broker holding at most one batch per
partition. Calls go out as gRPC futures, so requests to different brokers, and
up to max_in_flight_requests_per_connection to one broker, overlap; their
answers are handed back to this thread through a queue, so nothing here needs
a lock beyond the accumulator's.

How an answer is settled is decided by client.retry.produce_decision: success,
retry after retry_backoff_ms (refreshing metadata first when the error says the
leader moved), or failure with the broker's KafkaError.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from client.accumulator import ProducerBatch, RecordAccumulator
from client.connection import ResponseFuture
from client.errors import KafkaTimeoutError
from client.idempotence import TransactionManager
from client.metadata import ClusterMetadata, Metadata
from client.metrics import SenderMetrics
from client.retry import ProduceAction, produce_decision
from client.transaction_manager import TransactionalState, TxnAction, add_partitions_retry_backoff_ms
from client.transactional_requests import TransactionalRequests
from common.record import CompressionType
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode, KafkaError, error_for
from proto.produce_request import encode_produce_request

log = logging.getLogger(__name__)

# Answers after which the broker may have appended the batch: resending it under a new producer id could
# duplicate it. Every other error answer proves the batch was not appended.
_MAYBE_APPENDED = frozenset({ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT,
                             ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND})
# transaction.timeout.ms's default; InitProducerId carries it even for a producer without transactions.
_TRANSACTION_TIMEOUT_MS = 60_000


def _expiry_error(batch: ProducerBatch, now: float) -> KafkaError:
    """Why a batch past delivery.timeout.ms failed: the broker's last answer if it had one, else a timeout.

    A batch retried until it expired (NOT_ENOUGH_REPLICAS for a topic whose min.insync.replicas the ISR can
    never reach, say) reports that answer, as Kafka reports the last error seen; only a batch that never
    got an answer other than a timeout fails as one.
    """
    expiry = (f"expiring {batch.record_count} record(s) for {batch.topic_partition}:"
              f" {now - batch.created_ms:.0f} ms has passed since batch creation")
    last = batch.last_error
    if last is None or last.code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT):
        return KafkaTimeoutError(expiry)
    return error_for(last.code, f"{expiry}; last error: {last.message}")


# InitProducerId answers an idempotent producer cannot wait out (the principal lacks IdempotentWrite).
_NOT_AUTHORIZED_FOR_PRODUCER_ID = frozenset({ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                             ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})


class _InFlight(NamedTuple):
    node_id: int
    batches: list[ProducerBatch]


class Sender:
    def __init__(
        self,
        accumulator: RecordAccumulator,
        metadata: Metadata,
        *,
        acks: int,
        retries: int,
        compression: CompressionType,
        request_timeout_ms: int,
        delivery_timeout_ms: int,
        retry_backoff_ms: int,
        max_in_flight_requests_per_connection: int,
        max_request_size: int,
        transaction_manager: TransactionManager | None = None,
        transactional_requests: TransactionalRequests | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._accumulator = accumulator
        self._metadata = metadata
        self._acks = acks
        self._retries = retries
        self._compression = compression
        self._request_timeout_ms = request_timeout_ms
        self._delivery_timeout_ms = delivery_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._max_in_flight = max_in_flight_requests_per_connection
        self._max_request_size = max_request_size
        self._txn = transaction_manager
        # A transactional producer's: its state (also self._txn) and its coordinator calls.
        self._transactional = transaction_manager if isinstance(transaction_manager, TransactionalState) else None
        self._txn_requests = transactional_requests
        self._next_add_partitions_attempt_ms = 0.0
        self._clock = clock
        self._completions: deque[tuple[_InFlight, ResponseFuture[pb.ProduceResponse]]] = deque()
        # Acknowledged batches whose futures are settled at the end of the pass, after the next requests left.
        self._acknowledged: list[tuple[ProducerBatch, int, int, int]] = []
        self._requests_in_flight: dict[int, int] = {}
        self.metrics = SenderMetrics()
        self._wakeup_event = threading.Event()
        self._next_producer_id_attempt_ms = 0.0
        self._running = True
        self._forced = False
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="minibroker-producer-network-thread", daemon=True)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._thread.start()

    def wakeup(self) -> None:
        self._wakeup_event.set()

    def initiate_close(self) -> None:
        """Stop after everything queued is sent and answered."""
        self._running = False
        self.wakeup()

    def force_close(self) -> None:
        """Stop now, failing whatever is not yet acknowledged."""
        self._forced = True
        self.initiate_close()

    def join(self, timeout_s: float | None = None) -> bool:
        # An Event, not Thread.join: a KeyboardInterrupt inside Thread.join (Ctrl-C while a producer closes)
        # leaves the thread marked stopped while it runs on (bpo-45274's fix), so a second close would not wait.
        return self._stopped.wait(timeout_s)

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self._stopped.set()

    def _loop(self) -> None:
        while self._running:
            self._run_once_guarded()
        while not self._forced and self._has_work():
            self._run_once_guarded()
        self._settle_acknowledged()  # left by a pass that failed half-way
        if self._forced:
            error = KafkaError("producer closed before the record was acknowledged", ErrorCode.NETWORK_EXCEPTION)
            for batch in self._accumulator.abort_undrained() + self._accumulator.incomplete_batches():
                self._settle(batch, error=error)

    def _run_once_guarded(self) -> None:
        try:
            poll_ms = self.run_once()
            if not self._completions and (self._running or self._has_work()):
                self._wakeup_event.wait(None if poll_ms == float("inf") else poll_ms / 1000)
            # Cleared before the next pass reads the state, so a wakeup during that pass is not lost.
            self._wakeup_event.clear()
        except Exception:
            # The thread outlives a bug in one pass: its batches would otherwise hang until their futures' timeouts.
            log.exception("producer I/O thread pass failed")
            self._settle_acknowledged()
            time.sleep(self._retry_backoff_ms / 1000)

    def _now_ms(self) -> float:
        return self._clock() * 1000

    def _has_work(self) -> bool:
        return self._accumulator.has_undrained() or self._requests_in_flight_total() > 0

    def _requests_in_flight_total(self) -> int:
        return sum(self._requests_in_flight.values())

    # ------------------------------------------------------------------ one pass

    def run_once(self) -> float:
        """One pass; returns how long (ms) nothing needs doing unless an answer arrives or send() wakes us."""
        now = self._now_ms()
        self._handle_completions(now)
        for batch in self._accumulator.expired_batches(now):
            self._fail(batch, _expiry_error(batch, now))
        poll_ms = float("inf")
        can_send_unsealed = True
        partition_allowed = None
        if self._transactional is not None:
            can_send_unsealed = self._maybe_add_partitions_to_transaction(self._transactional, now)
            partition_allowed = self._transactional.is_send_to_partition_allowed
            if self._transactional.partitions_to_add(self._accumulator.partitions_with_batches()):
                poll_ms = max(self._next_add_partitions_attempt_ms - now, 0.0) or self._retry_backoff_ms
        elif self._txn is not None:
            can_send_unsealed = self._maybe_ensure_producer_id(now)
            if not can_send_unsealed:
                poll_ms = max(self._next_producer_id_attempt_ms - now, 0.0) or self._retry_backoff_ms

        if self._metadata.time_to_next_update(now) == 0:
            self._metadata.maybe_refresh(self._request_timeout_ms)
        # One snapshot for the whole pass: a batch found ready for its old leader and then drained against a
        # refreshed cluster naming a new one would be neither sent nor waited for (until its delivery timeout).
        cluster = self._metadata.cluster
        result = self._accumulator.ready(cluster, now)
        if result.unknown_leader_topics:
            self._metadata.add_topics(*result.unknown_leader_topics)
            self._metadata.request_update()
        nodes = {n for n in result.ready_nodes if self._requests_in_flight.get(n, 0) < self._max_in_flight}
        self._accumulator.update_node_latency_stats(result.ready_nodes, nodes, now)
        if nodes:
            drained = self._accumulator.drain(cluster, nodes, self._max_request_size, now, can_send_unsealed,
                                              partition_allowed)
            for node_id, batches in drained.items():
                self._send_produce(cluster, node_id, batches, now)

        self._settle_acknowledged()
        poll_ms = min(poll_ms, result.next_ready_check_delay_ms)
        if result.unknown_leader_topics:
            poll_ms = min(poll_ms, self._metadata.time_to_next_update(self._now_ms()))
        return poll_ms

    def _settle_acknowledged(self) -> None:
        """Complete the futures of the batches acknowledged in this pass.

        Last in the pass: their callbacks (one per record, with send()'s
        `callback`) then run while the requests just sent are on their way,
        instead of holding back the next batch of their partitions.
        """
        acknowledged, self._acknowledged = self._acknowledged, []
        for batch, base_offset, log_append_time, log_start_offset in acknowledged:
            self._settle(batch, base_offset, log_append_time, log_start_offset)

    def _maybe_ensure_producer_id(self, now: float) -> bool:
        """True when batches may get sequence numbers: the producer id is known and not being replaced."""
        txn = self._txn
        assert txn is not None
        if txn.needs_reset:
            if self._requests_in_flight_total():
                return False  # wait for every answer: they decide which batches can be resent
            self._reset_producer_id(txn)
        if txn.has_producer_id:
            return True
        if now < self._next_producer_id_attempt_ms:
            return False
        try:
            response = self._metadata.call_any(
                lambda stub: stub.InitProducerId,
                pb.InitProducerIdRequest(transaction_timeout_ms=_TRANSACTION_TIMEOUT_MS),
                self._request_timeout_ms,
            )
            if response.error_code:
                raise error_for(response.error_code, "InitProducerId")
        except KafkaError as exc:
            self._next_producer_id_attempt_ms = self._now_ms() + self._retry_backoff_ms
            if exc.code in _NOT_AUTHORIZED_FOR_PRODUCER_ID:
                # Fatal in Kafka's TransactionManager: no producer id comes until an ACL changes, so the queued
                # records fail now rather than at their delivery timeout (later ones try again).
                log.error("cannot get a producer id: %s; failing the queued records", exc)
                for batch in self._accumulator.abort_undrained():
                    self._settle(batch, error=exc)
                return False
            log.log(logging.DEBUG if exc.retriable else logging.WARNING, "cannot get a producer id yet: %s", exc)
            return False
        txn.set_producer_id_and_epoch(response.producer_id, response.producer_epoch)
        return True

    def _maybe_add_partitions_to_transaction(self, state: TransactionalState, now: float) -> bool:
        """A transactional producer's pass: queued batches fail once the transaction is to be aborted (Java's
        abortUndrainedBatches); otherwise partitions with batches join the transaction (one AddPartitionsToTxn
        per pass) before any of their batches goes. True when batches may be sealed and sent."""
        if state.is_aborting_or_failed:
            reason = state.last_error
            error = KafkaError(f"Failing batch since transaction was aborted: {reason}",
                               reason.code if reason is not None else None)
            for batch in self._accumulator.abort_undrained():
                if batch.base_sequence >= 0:
                    state.sequence_lost()  # a retry the abort drops: its sequence was given out
                self._settle(batch, error=error)
            return False
        to_add = state.partitions_to_add(self._accumulator.partitions_with_batches())
        if to_add and now >= self._next_add_partitions_attempt_ms:
            assert self._txn_requests is not None
            first = not state.transaction_started
            action, code = self._txn_requests.add_partitions(to_add)
            if action in (TxnAction.RETRY, TxnAction.FIND_COORDINATOR):
                self._next_add_partitions_attempt_ms = self._now_ms() + add_partitions_retry_backoff_ms(
                    code, first, self._retry_backoff_ms)
        return state.has_producer_id

    def _reset_producer_id(self, txn: TransactionManager) -> None:
        """Kafka 2.x's resetProducerId for an idempotent producer.

        Queued retries that the broker provably did not append start over with
        the new producer id; those it may have appended fail, since resending
        them under a new id could write them twice.
        """
        reason = txn.reset_reason
        assert reason is not None
        log.warning("resetting the producer id after: %s", reason)
        uncertain = KafkaError(f"producer id reset while this batch's outcome was unknown, after: {reason}",
                               reason.code)
        for batch in self._accumulator.sequenced_batches():
            if batch.last_error is not None and batch.last_error.code not in _MAYBE_APPENDED:
                batch.unseal()
            else:
                self._accumulator.remove(batch)
                self._settle(batch, error=uncertain)
        txn.set_producer_id_and_epoch(-1, -1)

    # ------------------------------------------------------------------ requests

    def _seal(self, batch: ProducerBatch) -> bytes | bytearray:
        txn = self._txn
        if txn is None:
            return batch.seal(self._compression)
        tp = batch.topic_partition
        return batch.seal(self._compression, txn.producer_id, txn.producer_epoch,
                          txn.assign_sequence(tp, batch.record_count), self._transactional is not None)

    def _send_produce(self, cluster: ClusterMetadata, node_id: int, batches: list[ProducerBatch], now: float) -> None:
        topics: dict[str, list[tuple[int, bytes | bytearray]]] = {}
        for batch in batches:
            records = batch.encoded if batch.encoded is not None else self._seal(batch)
            tp = batch.topic_partition
            if self._txn is not None:
                batch.followed_unacked = not self._txn.is_next_sequence(tp, batch.base_sequence)
            topics.setdefault(tp.topic, []).append((tp.partition, records))
        # The transactional id lets the broker check Write on it.
        request = encode_produce_request(
            self._transactional.transactional_id if self._transactional is not None else None, self._acks,
            self._request_timeout_ms, list(topics.items()))
        self.metrics.record_produce(len(request))
        in_flight = _InFlight(node_id, batches)
        self._requests_in_flight[node_id] = self._requests_in_flight.get(node_id, 0) + 1
        broker = cluster.brokers[node_id]
        try:
            connection = self._metadata.pool.get(broker.address)
            future = connection.call_async(lambda _: connection.produce_bytes, request, self._request_timeout_ms)
        except KafkaError as exc:
            self._requests_in_flight[node_id] -= 1
            for batch in batches:
                self._accumulator.answered(batch)
                self._complete(batch, exc.code, str(exc), now)
            return
        if self._acks == 0:
            # Nothing will say where the records went: they are done once handed to the transport.
            for batch in batches:
                batch.result.complete()

        def on_done(f: ResponseFuture[pb.ProduceResponse]) -> None:
            self._completions.append((in_flight, f))
            self.wakeup()

        future.add_done_callback(on_done)

    def _handle_completions(self, now: float) -> None:
        while self._completions:
            in_flight, future = self._completions.popleft()
            self._requests_in_flight[in_flight.node_id] -= 1
            try:
                response = future.result(0)
            except KafkaError as exc:
                for batch in in_flight.batches:
                    self._accumulator.answered(batch)
                    self._complete(batch, exc.code, str(exc), now)
                continue
            answers = {(t.name, p.index): p for t in response.responses for p in t.partitions}
            for batch in in_flight.batches:
                self._accumulator.answered(batch)
                tp = batch.topic_partition
                answer = answers.get((tp.topic, tp.partition))
                if answer is None:
                    self._complete(batch, ErrorCode.UNKNOWN_SERVER_ERROR, f"no answer for {tp} in Produce response",
                                   now)
                else:
                    self._complete(batch, answer.error_code, answer.error_message, now, answer.base_offset,
                                   answer.log_append_time_ms, answer.log_start_offset)

    def _complete(self, batch: ProducerBatch, code: int, message: str, now: float, base_offset: int = -1,
                  log_append_time: int = -1, log_start_offset: int = -1) -> None:
        """Settle one batch's answer: done, retry, or fail (Kafka's Sender.completeBatch)."""
        if self._acks == 0:
            self._accumulator.deallocate(batch)  # its future was completed when it was sent
            return
        txn = self._txn
        tp = batch.topic_partition
        sequenced = txn is not None and batch.base_sequence >= 0
        decision = produce_decision(
            code,
            retries_done=batch.retries_done,
            retries=self._retries,
            now_ms=now,
            delivery_deadline_ms=batch.created_ms + self._delivery_timeout_ms,
            earlier_batch_unresolved=txn is not None and sequenced
            and (batch.followed_unacked or not txn.is_next_sequence(tp, batch.base_sequence)),
        )
        if decision.refresh_metadata:
            self._metadata.request_update()
        if decision.action is ProduceAction.COMPLETE:
            if sequenced and txn is not None:
                txn.on_acked(tp, batch.base_sequence, batch.record_count)
            self._acknowledged.append((batch, base_offset, log_append_time, log_start_offset))
            return
        error = error_for(code, message)
        if decision.action is ProduceAction.RETRY:
            log.debug("retrying %s (attempt %d): %s", tp, batch.retries_done + 1, error)
            batch.last_error = error
            self._accumulator.reenqueue(batch, now)
        else:
            self._fail(batch, error)

    def _fail(self, batch: ProducerBatch, error: KafkaError) -> None:
        if self._transactional is not None:
            # Java's Sender: the transaction can no longer commit; the abort bumps the epoch if sequences broke.
            self._transactional.batch_failed(error, sequenced=batch.base_sequence >= 0)
        elif self._txn is not None and batch.base_sequence >= 0:
            self._txn.request_reset(error)
        self._settle(batch, error=error)

    def _settle(self, batch: ProducerBatch, base_offset: int = -1, log_append_time: int = -1,
                log_start_offset: int = -1, error: KafkaError | None = None) -> None:
        batch.result.complete(base_offset, log_append_time, log_start_offset, error)
        self._accumulator.deallocate(batch)

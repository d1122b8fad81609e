"""TransactionCoordinator: InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions (KIP-664; ListTransactions is the state manager's listing), leadership of
__transaction_state partitions, and the abort of timed-out transactions (Kafka 2.8's
coordinator/transaction/TransactionCoordinator.scala).

Every answer follows Kafka's: a transition is prepared on the metadata (its pending state set, so no second one
starts), appended with acks=all by the state manager, and answered only once durable. EndTxn answers as soon as
PrepareCommit / PrepareAbort is durable; the marker channel then writes the markers and appends CompleteCommit /
CompleteAbort. An InitProducerId that meets an open transaction fences it first: the epoch is bumped, the
transaction aborted with it (markers carry the bumped epoch, so the old producer's writes are refused), and the
client is told CONCURRENT_TRANSACTIONS until the abort completes, when it retries and gets the next epoch.

One departure in timing, none in rules: an AddPartitionsToTxn (or AddOffsetsToTxn) of the producer whose previous
transaction is still completing (its markers or its CompleteCommit / CompleteAbort still being written) waits for
that completion, up to PREVIOUS_TRANSACTION_WAIT_MS, instead of being told CONCURRENT_TRANSACTIONS at once. The
client would only retry (librdkafka and Java after 20 ms): the next transaction of a producer committing in a loop
always arrives while the previous one's markers are being written, so the immediate answer cost every transaction
a client backoff. After the wait the request is judged as Kafka judges it, CONCURRENT_TRANSACTIONS included.
And one departure in how the log is written: the partitions those waiting requests add start the next transaction
(Ongoing) in the same __transaction_state batch as the CompleteCommit / CompleteAbort, written once every marker is,
so the next transaction costs one acks=all round trip less; the waiting requests then find them added and are
answered as a repeated AddPartitionsToTxn is. Kafka appends the two apart, the second only once the client asks
again; the rules are the same (Ongoing only behind a durable completion, in one batch that lands whole or not at
all, loaded as its last value).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

from broker.coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC_NAME
from broker.coordinator.transaction.transaction_marker_channel import TransactionMarkerChannelManager
from broker.coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from broker.coordinator.transaction.transaction_state_manager import (
    CoordinatorEpochAndTxnMetadata,
    TransactionStateManager,
)
from proto.errors import ErrorCode
from proto.types import TopicPartition

logger = logging.getLogger(__name__)

_S = TransactionState

# How long an AddPartitionsToTxn waits for its producer's previous transaction to complete before it is judged
# (and, if that transaction is still completing, answered CONCURRENT_TRANSACTIONS as Kafka does). Markers and the
# completion take milliseconds; a marker stuck on a partition without a leader is retried every 100 ms for as long
# as it takes, so the client hears Kafka's answer and retries, well within any client's request timeout.
PREVIOUS_TRANSACTION_WAIT_MS = 1_000


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    producer_id: int
    producer_epoch: int
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    """One transaction of DescribeTransactions; with an error, the id and the error alone."""

    transactional_id: str
    error: ErrorCode
    state: TransactionState | None = None
    producer_id: int = 0
    producer_epoch: int = 0
    txn_timeout_ms: int = 0
    txn_start_timestamp: int = 0
    # The partitions whose markers are still to be written (all of them while Ongoing).
    topic_partitions: tuple[TopicPartition, ...] = ()


@dataclass(slots=True, eq=False)
class _NextTransaction:
    """An AddPartitionsToTxn / AddOffsetsToTxn waiting for its producer's previous transaction to complete."""

    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]


@dataclass(slots=True)
class _Completing:
    """A transaction being completed: resolved when its completion ends (written or given up), and the requests of
    its producer's next transaction waiting for it."""

    done: asyncio.Future[None]
    waiting: list[_NextTransaction] = field(default_factory=list)


def _init_error(error: ErrorCode) -> InitProducerIdResult:
    return InitProducerIdResult(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, error)


def is_completing(txn: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """The producer's previous transaction is still being completed: PrepareCommit / PrepareAbort (markers going
    out) or the CompleteCommit / CompleteAbort append under way. Not an epoch fence's abort: that producer's epoch
    is no longer the transaction's."""
    return (txn.producer_id == producer_id and txn.producer_epoch == producer_epoch
            and (txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
                 or txn.pending_state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)))


class TransactionCoordinator:
    def __init__(self, broker_id: int, txn_manager: TransactionStateManager,
                 generate_producer_id: Callable[[], int], time_ms: Callable[[], int],
                 zookeeper_executor: Executor | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.broker_id = broker_id
        self.txn_manager = txn_manager
        # The broker's ProducerIdManager.generate_producer_id (it may claim a block in ZooKeeper).
        self._generate_producer_id = generate_producer_id
        self._time_ms = time_ms
        # Where a producer id block is claimed from ZooKeeper (the broker's ZooKeeper threads).
        self._zookeeper_executor = zookeeper_executor
        self.marker_channel: TransactionMarkerChannelManager | None = None
        self._loads: set[asyncio.Task[None]] = set()  # partitions being loaded on election
        self._sleep = sleep
        # Transactional id -> its completion, which an AddPartitionsToTxn arriving meanwhile waits on.
        self._completions: dict[str, _Completing] = {}

    def bind_marker_channel(self, channel: TransactionMarkerChannelManager) -> None:
        self.marker_channel = channel

    def partition_for(self, transactional_id: str) -> int:
        return self.txn_manager.partition_for(transactional_id)

    # ------------------------------------------------------------------ InitProducerId

    async def handle_init_producer_id(self, transactional_id: str, transaction_timeout_ms: int,
                                      expected: tuple[int, int] | None) -> InitProducerIdResult:
        """`expected`: KIP-360's (producer id, epoch) the client still holds, or None."""
        if not transactional_id:
            return _init_error(ErrorCode.INVALID_REQUEST)
        if not self.txn_manager.validate_transaction_timeout_ms(transaction_timeout_ms):
            return _init_error(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        current = self.txn_manager.get_transaction_state(transactional_id)
        if current is None:
            producer_id = await self._new_producer_id()
            created = TransactionMetadata.new(transactional_id, producer_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH,
                                              NO_PRODUCER_EPOCH, transaction_timeout_ms, self._time_ms())
            current = self.txn_manager.put_transaction_state_if_not_exists(created)
        if isinstance(current, ErrorCode):
            return _init_error(current)
        prepared = await self._prepare_init_producer_id_transit(transactional_id, transaction_timeout_ms, current,
                                                                expected)
        if isinstance(prepared, ErrorCode):
            return _init_error(prepared)
        coordinator_epoch, transit = prepared
        if transit.txn_state is _S.PREPARE_EPOCH_FENCE:
            # The open transaction is aborted with the bumped epoch first; the client retries (Kafka answers
            # CONCURRENT_TRANSACTIONS once the PrepareAbort is durable).
            error = await self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch,
                                                commit=False, is_from_client=False)
            return _init_error(ErrorCode.CONCURRENT_TRANSACTIONS if error is ErrorCode.NONE else error)
        error = await self.txn_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if error is not ErrorCode.NONE:
            logger.info("Returning %s error code to client for %s's InitProducerId request", error.name,
                        transactional_id)
            return _init_error(error)
        logger.info("Initialized transactionalId %s with producerId %d and producer epoch %d on partition"
                    " __transaction_state-%d", transactional_id, transit.producer_id, transit.producer_epoch,
                    self.partition_for(transactional_id))
        return InitProducerIdResult(transit.producer_id, transit.producer_epoch, ErrorCode.NONE)

    async def _new_producer_id(self) -> int:
        """A block may have to be claimed in ZooKeeper: never on the loop."""
        return await asyncio.get_running_loop().run_in_executor(self._zookeeper_executor,
                                                                  self._generate_producer_id)

    async def _prepare_init_producer_id_transit(self, transactional_id: str, transaction_timeout_ms: int,
                                                current: CoordinatorEpochAndTxnMetadata,
                                                expected: tuple[int, int] | None,
                                                new_producer_id: int | None = None
                                                ) -> tuple[int, TxnTransitMetadata] | ErrorCode:
        """The checks and the prepared transition, with no await between them (so no other request changes the
        metadata meanwhile); a rotation's new producer id is allocated first, and the checks run again."""
        txn = current.transaction_metadata

        def is_valid_producer_id(producer_id: int, epoch: int) -> bool:
            return (txn.producer_epoch == NO_PRODUCER_EPOCH or producer_id == txn.producer_id
                    or (producer_id == txn.last_producer_id and is_epoch_exhausted(epoch)))

        if txn.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None and not is_valid_producer_id(*expected):
            return ErrorCode.PRODUCER_FENCED
        if txn.state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT, _S.EMPTY):
            if txn.is_producer_epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
                if new_producer_id is None:
                    return await self._prepare_init_producer_id_transit(
                        transactional_id, transaction_timeout_ms, current, expected, await self._new_producer_id())
                return current.coordinator_epoch, txn.prepare_producer_id_rotation(
                    new_producer_id, transaction_timeout_ms, self._time_ms(), expected is not None)
            result = txn.prepare_increment_producer_epoch(transaction_timeout_ms,
                                                          None if expected is None else expected[1], self._time_ms())
            return result if isinstance(result, ErrorCode) else (current.coordinator_epoch, result)
        if txn.state is _S.ONGOING:
            return current.coordinator_epoch, txn.prepare_fence_producer_epoch()
        raise RuntimeError(f"Found transactionalId {transactional_id} with state {txn.state}. This is illegal as we"
                           " should never have transitioned to this state.")

    # ------------------------------------------------------------------ AddPartitionsToTxn / AddOffsetsToTxn

    def _existing_transaction(self, transactional_id: str) -> CoordinatorEpochAndTxnMetadata | ErrorCode:
        """The state of a transactional id a request names that must exist already (AddPartitionsToTxn, EndTxn):
        INVALID_REQUEST for the empty id, INVALID_PRODUCER_ID_MAPPING for one never initialized, and the
        coordinator's NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        current = self.txn_manager.get_transaction_state(transactional_id)
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING if current is None else current

    async def handle_add_partitions_to_transaction(self, transactional_id: str, producer_id: int,
                                                   producer_epoch: int, partitions: Sequence[TopicPartition]
                                                   ) -> ErrorCode:
        """The error every partition of the request gets (AddOffsetsToTxn adds the group's offsets partition)."""
        current = self._existing_transaction(transactional_id)
        if (isinstance(current, CoordinatorEpochAndTxnMetadata)
                and is_completing(current.transaction_metadata, producer_id, producer_epoch)):
            await self._completed(transactional_id,
                                  _NextTransaction(producer_id, producer_epoch, frozenset(partitions)))
            current = self._existing_transaction(transactional_id)
        if isinstance(current, ErrorCode):
            return current
        txn = current.transaction_metadata
        if txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending_transition_in_progress or txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state is _S.ONGOING and set(partitions) <= txn.topic_partitions:
            return ErrorCode.NONE
        transit = txn.prepare_add_partitions(frozenset(partitions), self._time_ms())
        return await self.txn_manager.append_transaction_to_log(transactional_id, current.coordinator_epoch, transit)

    # ------------------------------------------------------------------ EndTxn

    async def handle_end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                     commit: bool) -> ErrorCode:
        return await self._end_transaction(transactional_id, producer_id, producer_epoch, commit,
                                           is_from_client=True)

    async def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                               is_from_client: bool) -> ErrorCode:
        current = self._existing_transaction(transactional_id)
        if isinstance(current, ErrorCode):
            return current
        txn, coordinator_epoch = current.transaction_metadata, current.coordinator_epoch
        is_epoch_fence = False
        if txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if (is_from_client and producer_epoch != txn.producer_epoch) or producer_epoch < txn.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending_transition_in_progress and txn.pending_state is not _S.PREPARE_EPOCH_FENCE:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state is _S.ONGOING:
            next_state = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
            if next_state is _S.PREPARE_ABORT and txn.pending_state is _S.PREPARE_EPOCH_FENCE:
                # The fence's bumped epoch becomes the transaction's: its abort markers fence the old producer.
                is_epoch_fence = True
                txn.pending_state = None
                txn.producer_epoch = producer_epoch
                txn.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = txn.prepare_abort_or_commit(next_state, self._time_ms())
        elif txn.state is (_S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT):
            return ErrorCode.NONE  # a retry of an EndTxn that completed
        elif txn.state is (_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS  # a retry while the markers go out
        elif txn.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT, _S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            logger.debug("TransactionalId %s's state is %s, but received transaction marker result to send: %s",
                         transactional_id, txn.state, "COMMIT" if commit else "ABORT")
            return ErrorCode.INVALID_TXN_STATE
        else:
            raise RuntimeError(f"Found transactionalId {transactional_id} with state {txn.state}. This is illegal"
                               " as we should never have transitioned to this state.")

        error = await self.txn_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if error is not ErrorCode.NONE:
            logger.info("Aborting sending of transaction markers and returning %s error to client for %s's"
                        " EndTransaction request", error.name, transactional_id)
            if is_epoch_fence:
                after = self.txn_manager.get_transaction_state(transactional_id)
                if isinstance(after, CoordinatorEpochAndTxnMetadata) and after.coordinator_epoch == coordinator_epoch:
                    after.transaction_metadata.has_failed_epoch_fence = True
            return error
        return self._send_markers(transactional_id, producer_id, producer_epoch, commit, coordinator_epoch)

    def _send_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int) -> ErrorCode:
        """PrepareCommit / PrepareAbort is durable: hand the markers to the channel and answer the client."""
        after = self.txn_manager.get_transaction_state(transactional_id)
        if isinstance(after, ErrorCode):
            return after
        if after is None or after.coordinator_epoch != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        txn = after.transaction_metadata
        if txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state is not (_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT):
            return ErrorCode.INVALID_TXN_STATE
        self._add_markers(coordinator_epoch, txn)
        return ErrorCode.NONE

    def _add_markers(self, coordinator_epoch: int, txn: TransactionMetadata) -> None:
        assert self.marker_channel is not None, "the broker binds the marker channel at start-up"
        complete = txn.prepare_complete(self._time_ms())
        self.marker_channel.add_txn_markers_to_send(coordinator_epoch, txn.state is _S.PREPARE_COMMIT, txn,
                                                    complete)

    async def _completed(self, transactional_id: str, next_transaction: _NextTransaction) -> None:
        """Until the id's transaction completion ends or PREVIOUS_TRANSACTION_WAIT_MS passes; meanwhile the
        completion may start `next_transaction` in its own append."""
        completing = self._completions.get(transactional_id)
        if completing is None:
            completing = self._completions[transactional_id] = _Completing(
                asyncio.get_running_loop().create_future())
        completing.waiting.append(next_transaction)
        timer = asyncio.ensure_future(self._sleep(PREVIOUS_TRANSACTION_WAIT_MS / 1000))
        try:
            await asyncio.wait([completing.done, timer], return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if next_transaction in completing.waiting:
                completing.waiting.remove(next_transaction)  # not joined: judged on its own

    def _wake(self, transactional_id: str) -> None:
        completing = self._completions.pop(transactional_id, None)
        if completing is not None and not completing.done.done():
            completing.done.set_result(None)

    def _next_transaction(self, txn: TransactionMetadata, complete: TxnTransitMetadata) -> TxnTransitMetadata | None:
        """The Ongoing that the producer's waiting requests start, to be written behind `complete` in its batch;
        None when none waits. Only requests of the completed transaction's producer id and epoch join (they were
        checked to be when they began to wait; a fence moved the epoch since would leave them out)."""
        completing = self._completions.get(txn.transactional_id)
        added = frozenset().union(*(
            w.partitions for w in (completing.waiting if completing is not None else ())
            if (w.producer_id, w.producer_epoch) == (complete.producer_id, complete.producer_epoch)))
        return txn.prepare_add_partitions_after(complete, added, self._time_ms()) if added else None

    async def complete_transaction(self, txn: TransactionMetadata, coordinator_epoch: int,
                                   transit: TxnTransitMetadata) -> None:
        """Every marker is written: append CompleteCommit / CompleteAbort, retried while the log is not
        available (Kafka's retryOnError for COORDINATOR_NOT_AVAILABLE); a moved coordinator gives up, the new
        one completes from the Prepare state it loaded. The partitions the producer's waiting requests add go in
        the same batch as the next transaction's Ongoing; the requests go on either way."""
        try:
            await self._append_completion(txn, coordinator_epoch, transit)
        finally:
            self._wake(txn.transactional_id)

    async def _append_completion(self, txn: TransactionMetadata, coordinator_epoch: int,
                                 transit: TxnTransitMetadata) -> None:
        while True:
            error = await self.txn_manager.append_transaction_to_log(
                txn.transactional_id, coordinator_epoch, transit,
                retry_on_error=lambda e: e is ErrorCode.COORDINATOR_NOT_AVAILABLE,
                then=self._next_transaction(txn, transit))
            if error is not ErrorCode.COORDINATOR_NOT_AVAILABLE:
                break
            assert self.marker_channel is not None
            await self.marker_channel.backoff()
        if error is ErrorCode.NONE:
            logger.debug("Completed transaction of %s: %s", txn.transactional_id, txn.state)
        else:
            logger.info("Completing the transaction of %s failed: %s", txn.transactional_id, error.name)

    # ------------------------------------------------------------------ KIP-664

    def handle_describe_transactions(self, transactional_id: str) -> DescribedTransaction:
        """Kafka 3.0's handleDescribeTransactions: the id's state as this coordinator holds it;
        COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR as any request, TRANSACTIONAL_ID_NOT_FOUND for an id it does
        not know or is expiring (Dead), INVALID_REQUEST for the empty id."""
        if not transactional_id:
            return DescribedTransaction(transactional_id, ErrorCode.INVALID_REQUEST)
        found = self.txn_manager.get_transaction_state(transactional_id)
        if isinstance(found, ErrorCode):
            return DescribedTransaction(transactional_id, found)
        if found is None or found.transaction_metadata.state is _S.DEAD:
            return DescribedTransaction(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        txn = found.transaction_metadata
        return DescribedTransaction(transactional_id, ErrorCode.NONE, txn.state, txn.producer_id, txn.producer_epoch,
                                    txn.txn_timeout_ms, txn.txn_start_timestamp, tuple(sorted(txn.topic_partitions)))

    def is_current(self, transactional_id: str, coordinator_epoch: int) -> bool:
        """This broker still coordinates the id at that epoch (the marker channel asks before each round)."""
        current = self.txn_manager.get_transaction_state(transactional_id)
        return isinstance(current, CoordinatorEpochAndTxnMetadata) and current.coordinator_epoch == coordinator_epoch

    # ------------------------------------------------------------------ leadership

    def on_leadership_change(self, became_leader: Sequence[tuple[TopicPartition, int]],
                             resigned: Sequence[tuple[TopicPartition, int | None]]) -> None:
        """Kafka's onLeadershipChange, for the __transaction_state partitions among those changed (on the loop)."""
        for tp, maybe_epoch in resigned:
            if tp.topic == TRANSACTION_STATE_TOPIC_NAME:
                self.on_resignation(tp.partition, maybe_epoch)
        for tp, epoch in became_leader:
            if tp.topic == TRANSACTION_STATE_TOPIC_NAME:
                task = asyncio.get_running_loop().create_task(self.on_election(tp.partition, epoch))
                self._loads.add(task)
                task.add_done_callback(self._loads.discard)

    def shutdown(self) -> None:
        for task in list(self._loads):
            task.cancel()
        if self.marker_channel is not None:
            self.marker_channel.shutdown()

    async def on_election(self, partition: int, coordinator_epoch: int) -> None:
        """This broker leads the __transaction_state partition: load it, and finish the transactions it left in a
        Prepare state (their markers may never have gone out)."""
        logger.info("Elected as the txn coordinator for partition %d at epoch %d", partition, coordinator_epoch)
        self.txn_manager.begin_loading(partition, coordinator_epoch)
        for txn in await self.txn_manager.load_transactions_for_partition(partition, coordinator_epoch):
            if txn.pending_state is None:
                self._add_markers(coordinator_epoch, txn)

    def on_resignation(self, partition: int, coordinator_epoch: int | None) -> None:
        logger.info("Resigned as the txn coordinator for partition %d at epoch %s", partition, coordinator_epoch)
        self.txn_manager.remove_transactions_for_partition(partition, coordinator_epoch)
        # Requests waiting for a completion this broker will no longer write are answered now (NOT_COORDINATOR).
        for transactional_id in [t for t in self._completions if self.partition_for(t) == partition]:
            self._wake(transactional_id)

    # ------------------------------------------------------------------ expiry

    async def abort_timed_out_transactions(self) -> None:
        """Every Ongoing transaction past its timeout is fenced (epoch bumped) and aborted."""
        for timed_out in self.txn_manager.timed_out_transactions():
            current = self.txn_manager.get_transaction_state(timed_out.transactional_id)
            if not isinstance(current, CoordinatorEpochAndTxnMetadata):
                continue
            txn = current.transaction_metadata
            if txn.producer_id != timed_out.producer_id or txn.pending_transition_in_progress:
                continue
            fence = txn.prepare_fence_producer_epoch()
            logger.info("Aborting the transaction of %s (producer id %d, epoch %d): it timed out",
                        timed_out.transactional_id, txn.producer_id, txn.producer_epoch)
            error = await self._end_transaction(timed_out.transactional_id, fence.producer_id, fence.producer_epoch,
                                                commit=False, is_from_client=False)
            if error is not ErrorCode.NONE:
                logger.warning("Rollback of ongoing transaction for transactionalId %s failed due to error %s",
                               timed_out.transactional_id, error.name)

"""TransactionStateManager: the transactional ids this broker coordinates and their home in __transaction_state
(Kafka 2.8's coordinator/transaction/TransactionStateManager.scala).

- partitionFor: an id lives in partition abs(java String.hashCode(transactional.id)) %
  transaction.state.log.num.partitions; that partition's leader is its coordinator, and the partition's leader
  epoch is the coordinator epoch its markers carry.
- Every transition is appended to that partition with acks=all (Kafka's EnforcedRequiredAcks) before the metadata
  takes it and the client hears of it; a failed append clears the pending state (unless the caller retries it),
  with Kafka's mapping of append errors to coordinator errors. An append that lands after the partition moved
  (its coordinator epoch changed) changes nothing here: NOT_COORDINATOR. A completion and the next transaction's
  Ongoing may go as two records of one batch (one replication round trip instead of two; Kafka appends them apart).
- Loading (immigration): when this broker becomes the partition's leader its log is read from start to end, the
  last value per id wins, a tombstone removes the id; requests for its ids get COORDINATOR_LOAD_IN_PROGRESS
  meanwhile, NOT_COORDINATOR for a partition not held here. The loaded transactions in PrepareCommit or
  PrepareAbort are handed back: their markers must still go out.
- Unloading (emigration): the partition's ids are dropped.
- Listing (KIP-664's ListTransactions): the ids held here, filtered by producer id and state, never a Dead one;
  COORDINATOR_LOAD_IN_PROGRESS while any partition loads, as Kafka 3.0's listTransactionStates.
- Expiry: transactions open longer than their timeout (timed_out_transactions) and ids idle in Empty /
  CompleteCommit / CompleteAbort longer than transactional.id.expiration.ms (their tombstones:
  remove_expired_transactional_ids).

Everything but the log reading runs on the broker's event loop; the metadata needs no lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass

from broker.coordinator.schema import RecordFormatError
from broker.coordinator.storage import LogReader
from broker.coordinator.transaction import transaction_log
from broker.coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC_NAME
from broker.coordinator.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from broker.replication.delayed_produce import ProducePartitionResponse
from common.java_hash import java_string_hash, kafka_abs
from common.record import ProducerRecord, build_batch, iter_batches
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition

logger = logging.getLogger(__name__)

# Appends one batch to one partition with acks=all and the given timeout (ms); the partition's produce answer.
Append = Callable[[TopicPartition, bytes, int], Awaitable[ProducePartitionResponse]]


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's partitionFor: Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount."""
    return kafka_abs(java_string_hash(transactional_id)) % num_partitions


def append_error(error: ErrorCode) -> ErrorCode:
    """Kafka's appendTransactionToLog mapping of an append's error to what the coordinator answers."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE  # the client retries
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    """One row of ListTransactions."""

    transactional_id: str
    producer_id: int
    state: TransactionState


@dataclass(frozen=True, slots=True)
class ListTransactionsResult:
    error: ErrorCode
    transactions: list[ListedTransaction]
    unknown_state_filters: list[str]


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """The transaction.* keys the manager reads (Kafka's TransactionConfig)."""

    num_partitions: int
    transaction_max_timeout_ms: int
    transactional_id_expiration_ms: int
    load_buffer_size: int


@dataclass(frozen=True, slots=True)
class CoordinatorEpochAndTxnMetadata:
    coordinator_epoch: int
    transaction_metadata: TransactionMetadata


@dataclass(frozen=True, slots=True)
class TransactionalIdAndProducerIdEpoch:
    """A transaction past its timeout (Kafka's timedOutTransactions entry)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class TransactionStateManager:
    def __init__(self, broker_id: int, config: TransactionConfig, append: Append, time_ms: Callable[[], int],
                 read_log: Callable[[TopicPartition], tuple[LogReader, int, int]],
                 load_executor: Executor | None = None) -> None:
        self.broker_id = broker_id
        self.config = config
        self._append = append
        self._time_ms = time_ms
        # The partition's log reader, start and end offsets (raises KafkaError when this broker holds no log).
        self._read_log = read_log
        # Where a partition's log is read (the broker's disk threads; None: the loop's default executor).
        self._load_executor = load_executor
        # Kafka's transactionMetadataCache: partition -> (coordinator epoch, transactional id -> metadata).
        self._cache: dict[int, tuple[int, dict[str, TransactionMetadata]]] = {}
        self.loading_partitions: dict[int, int] = {}  # partition -> the coordinator epoch being loaded

    # ------------------------------------------------------------------ which ids are here

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        return 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms

    def get_transaction_state(self, transactional_id: str) -> ErrorCode | CoordinatorEpochAndTxnMetadata | None:
        """COORDINATOR_LOAD_IN_PROGRESS while its partition loads, NOT_COORDINATOR if it is not held here; else the
        id's metadata with the coordinator epoch (None: an id this coordinator does not know)."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        entry = self._cache.get(partition)
        if entry is None:
            return ErrorCode.NOT_COORDINATOR
        epoch, metadata = entry
        found = metadata.get(transactional_id)
        return None if found is None else CoordinatorEpochAndTxnMetadata(epoch, found)

    def put_transaction_state_if_not_exists(self, metadata: TransactionMetadata
                                            ) -> ErrorCode | CoordinatorEpochAndTxnMetadata:
        """Kafka's putTransactionStateIfNotExists: the metadata already cached wins."""
        partition = self.partition_for(metadata.transactional_id)
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        entry = self._cache.get(partition)
        if entry is None:
            return ErrorCode.NOT_COORDINATOR
        epoch, cached = entry
        return CoordinatorEpochAndTxnMetadata(epoch, cached.setdefault(metadata.transactional_id, metadata))

    def list_transactions(self) -> list[CoordinatorEpochAndTxnMetadata]:
        """Every id held here (what DescribeTransactions / ListTransactions read)."""
        return [CoordinatorEpochAndTxnMetadata(epoch, m) for epoch, ids in self._cache.values() for m in ids.values()]

    def list_transaction_states(self, producer_ids: Collection[int], state_names: Collection[str]
                                ) -> ListTransactionsResult:
        """Kafka 3.0's listTransactionStates: the ids held here whose producer id is among `producer_ids` and whose
        state is named in `state_names` (an empty filter passes all); unknown state names are handed back. Dead ids
        are being expired and never listed."""
        if self.loading_partitions:
            return ListTransactionsResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], [])
        states = {name: TransactionState.from_name(name) for name in state_names}
        wanted = {state for state in states.values() if state is not None}
        unknown = [name for name, state in states.items() if state is None]

        def included(txn: TransactionMetadata) -> bool:
            return (txn.state is not TransactionState.DEAD
                    and (not producer_ids or txn.producer_id in producer_ids)
                    and (not state_names or txn.state in wanted))

        return ListTransactionsResult(ErrorCode.NONE, [
            ListedTransaction(entry.transaction_metadata.transactional_id, entry.transaction_metadata.producer_id,
                              entry.transaction_metadata.state)
            for entry in self.list_transactions() if included(entry.transaction_metadata)], unknown)

    # ------------------------------------------------------------------ storing

    async def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int,
                                        transit: TxnTransitMetadata,
                                        retry_on_error: Callable[[ErrorCode], bool] = lambda _: False,
                                        then: TxnTransitMetadata | None = None) -> ErrorCode:
        """Append the transition (acks=all, the transaction's timeout) and, once acknowledged, complete it on the
        cached metadata; the error the caller answers. A failed append clears the pending state unless
        `retry_on_error` says the caller will try the same transition again.

        `then`: a second transition that follows `transit` at once, written after it in the same batch (one
        replication round trip) and completed after it: the next transaction's Ongoing behind a CompleteCommit /
        CompleteAbort. A batch lands whole or not at all, and a load keeps the last value of the id, so the log
        never holds the first without the second."""
        current = self.get_transaction_state(transactional_id)
        if isinstance(current, ErrorCode):
            return current
        if current is None or current.coordinator_epoch != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        transits = [transit] if then is None else [transit, then]
        now = self._time_ms()
        key = transaction_log.key_to_bytes(transactional_id)
        batch = build_batch([ProducerRecord(transaction_log.value_to_bytes(t), key, now) for t in transits],
                            now_ms=now)
        tp = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, self.partition_for(transactional_id))
        try:
            response = await self._append(tp, batch, transit.txn_timeout_ms)
        except KafkaError as e:
            response = ProducePartitionResponse(e.code, error_message=str(e))
        error = append_error(response.error)
        after = self.get_transaction_state(transactional_id)
        if error is ErrorCode.NONE:
            if isinstance(after, ErrorCode):
                logger.info("Accessing the cached transaction metadata for %s returns %s; aborting the transition"
                            " to %s", transactional_id, after.name, transit)
                return after
            if after is None or after.coordinator_epoch != coordinator_epoch:
                logger.info("The coordinator of %s moved while its new metadata %s was appended: NOT_COORDINATOR",
                            transactional_id, transit)
                return ErrorCode.NOT_COORDINATOR
            after.transaction_metadata.complete_transition_to(transit)
            if then is not None:
                after.transaction_metadata.complete_following_transition_to(then)
            return ErrorCode.NONE
        logger.info("TransactionalId %s append transaction log for %s transition failed due to %s",
                    transactional_id, transit, error.name)
        if (isinstance(after, CoordinatorEpochAndTxnMetadata) and after.coordinator_epoch == coordinator_epoch
                and not retry_on_error(error)):
            after.transaction_metadata.pending_state = None
        return error

    # ------------------------------------------------------------------ immigration and emigration

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """This broker leads the partition from `coordinator_epoch`: its ids load (whatever was held is dropped)."""
        self._cache.pop(partition, None)
        self.loading_partitions[partition] = coordinator_epoch

    async def load_transactions_for_partition(self, partition: int, coordinator_epoch: int
                                              ) -> list[TransactionMetadata]:
        """Read the partition's log (in a worker thread) and install what it holds; the transactions left in
        PrepareCommit / PrepareAbort, whose markers the coordinator must still send."""
        tp = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, partition)
        start = self._time_ms()
        try:
            loaded = await asyncio.get_running_loop().run_in_executor(self._load_executor, self._read_partition, tp)
        except Exception:
            logger.exception("Error loading transactions from %s", tp)
            if self.loading_partitions.get(partition) == coordinator_epoch:
                del self.loading_partitions[partition]
            return []
        if self.loading_partitions.get(partition) != coordinator_epoch:
            return []  # unloaded (or re-elected) while reading
        del self.loading_partitions[partition]
        self._cache[partition] = (coordinator_epoch, loaded)
        logger.info("Finished loading %d transaction metadata from %s in %d milliseconds", len(loaded), tp,
                    self._time_ms() - start)
        return [m for m in loaded.values()
                if m.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)]

    def _read_partition(self, tp: TopicPartition) -> dict[str, TransactionMetadata]:
        reader, start, end = self._read_log(tp)
        loaded: dict[str, TransactionMetadata] = {}
        for offset, key, value in _records(reader, start, end, self.config.load_buffer_size):
            try:
                txn_key = transaction_log.read_txn_record_key(key)
                metadata = transaction_log.read_txn_record_value(txn_key.transactional_id, value)
            except RecordFormatError as e:
                logger.error("Skipping the record at offset %d of %s: %s", offset, tp, e)
                continue
            if metadata is None:
                loaded.pop(txn_key.transactional_id, None)
            else:
                loaded[txn_key.transactional_id] = metadata
        return loaded

    def remove_transactions_for_partition(self, partition: int, coordinator_epoch: int | None) -> None:
        """Stop coordinating the partition's ids (a newer epoch's load is left alone)."""
        loading = self.loading_partitions.get(partition)
        if loading is not None and (coordinator_epoch is None or loading <= coordinator_epoch):
            del self.loading_partitions[partition]
        entry = self._cache.get(partition)
        if entry is not None and (coordinator_epoch is None or entry[0] <= coordinator_epoch):
            del self._cache[partition]
            logger.info("Unloaded transaction metadata of %d ids of %s-%d", len(entry[1]),
                        TRANSACTION_STATE_TOPIC_NAME, partition)

    # ------------------------------------------------------------------ expiry

    def timed_out_transactions(self) -> list[TransactionalIdAndProducerIdEpoch]:
        """Ongoing transactions started longer than their timeout ago, with no transition under way."""
        now = self._time_ms()
        return [TransactionalIdAndProducerIdEpoch(m.transactional_id, m.producer_id, m.producer_epoch)
                for partition, (_, ids) in self._cache.items() if partition not in self.loading_partitions
                for m in ids.values()
                if m.state is TransactionState.ONGOING and m.pending_state is None
                and m.txn_start_timestamp + m.txn_timeout_ms < now]

    async def remove_expired_transactional_ids(self) -> int:
        """Kafka's removeExpiredTransactionalIds: ids idle past transactional.id.expiration.ms in a state that
        allows it get a tombstone per partition (acks=all) and leave the cache; the number removed."""
        now = self._time_ms()
        removed = 0
        for partition, (epoch, ids) in list(self._cache.items()):
            expired = [(m, m.prepare_dead()) for m in list(ids.values())
                       if m.pending_state is None and m.state.is_expiration_allowed
                       and m.txn_last_update_timestamp <= now - self.config.transactional_id_expiration_ms]
            if expired:
                removed += await self._write_tombstones(partition, epoch, expired)
        return removed

    async def _write_tombstones(self, partition: int, epoch: int,
                                expired: list[tuple[TransactionMetadata, TxnTransitMetadata]]) -> int:
        now = self._time_ms()
        batch = build_batch([ProducerRecord(None, transaction_log.key_to_bytes(m.transactional_id), now)
                             for m, _ in expired], now_ms=now)
        tp = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, partition)
        try:
            response = await self._append(tp, batch, self.config.transaction_max_timeout_ms)
        except KafkaError as e:
            response = ProducePartitionResponse(e.code, error_message=str(e))
        if response.error is not ErrorCode.NONE:
            logger.warning("Failed to write tombstones of %d expired transactional ids to %s: %s", len(expired), tp,
                           response.error.name)
        entry = self._cache.get(partition)
        removed = 0
        for metadata, _ in expired:
            metadata.pending_state = None
            if (response.error is ErrorCode.NONE and entry is not None and entry[0] == epoch
                    and entry[1].get(metadata.transactional_id) is metadata):
                # Still the metadata that expired (nothing started meanwhile: the pending Dead state blocked it).
                del entry[1][metadata.transactional_id]
                removed += 1
        return removed


def _records(reader: LogReader, start: int, end: int, buffer_size: int) -> Iterator[tuple[int, bytes, bytes | None]]:
    """Every keyed data record of [start, end) in offset order: (offset, key, value)."""
    offset = start
    while offset < end:
        next_offset = offset
        for batch in iter_batches(reader(offset, buffer_size)):
            next_offset = batch.header.next_offset
            if batch.header.is_control:
                continue
            for record in batch.records:
                if record.offset >= offset and record.key is not None:
                    yield record.offset, record.key, record.value
        if next_offset <= offset:
            return  # nothing more readable (a concurrent truncation)
        offset = next_offset

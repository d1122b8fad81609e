"""broker/coordinator/transaction/transaction_state_manager.py on __transaction_state in memory and a clock only the
test moves: partitionFor, COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR, a transition completed only once its
append is acknowledged (and rolled back when it fails), loading (last value wins, tombstones remove, the Prepare
states handed back), unloading, timed-out transactions and expired ids' tombstones."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from broker.coordinator.storage import LogReader
from broker.coordinator.transaction import transaction_log
from broker.coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC_NAME
from broker.coordinator.transaction.transaction_metadata import TransactionMetadata, TransactionState
from broker.coordinator.transaction.transaction_state_manager import (
    CoordinatorEpochAndTxnMetadata,
    TransactionConfig,
    TransactionStateManager,
    partition_for,
)
from broker.replication.delayed_produce import ProducePartitionResponse
from common.record import ProducerRecord, build_batch, iter_batches
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.fakes import FakeClock

T = TypeVar("T")
NUM_PARTITIONS = 4
EXPIRATION_MS = 7 * 24 * 3600 * 1000
TID = "txn-a"
PARTITION = partition_for(TID, NUM_PARTITIONS)
TP0 = TopicPartition("orders", 0)


class MemoryLog:
    """__transaction_state in memory: appended batches get offsets; a reader returns whole batches."""

    def __init__(self) -> None:
        self.batches: dict[int, list[bytes]] = {}
        self.next_offset: dict[int, int] = {}
        self.fail_with: ErrorCode | None = None
        self.timeouts: list[int] = []

    async def append(self, tp: TopicPartition, batch: bytes, timeout_ms: int) -> ProducePartitionResponse:
        assert tp.topic == TRANSACTION_STATE_TOPIC_NAME
        self.timeouts.append(timeout_ms)
        if self.fail_with is not None:
            return ProducePartitionResponse(self.fail_with)
        base = self.next_offset.get(tp.partition, 0)
        records = [ProducerRecord(r.value, r.key, r.timestamp) for b in iter_batches(batch) for r in b.records]
        self.batches.setdefault(tp.partition, []).append(build_batch(records, base_offset=base))
        self.next_offset[tp.partition] = base + len(records)
        return ProducePartitionResponse(ErrorCode.NONE, base)

    def records(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        return [(r.key, r.value) for data in self.batches.get(partition, []) for b in iter_batches(data)
                for r in b.records]

    def read_log(self, tp: TopicPartition) -> tuple[LogReader, int, int]:
        batches = self.batches.get(tp.partition, [])

        def reader(offset: int, max_bytes: int) -> bytes:
            return b"".join(data for data in batches if next(iter_batches(data)).header.next_offset > offset)

        return reader, 0, self.next_offset.get(tp.partition, 0)


def manager(log: MemoryLog, clock: FakeClock) -> TransactionStateManager:
    return TransactionStateManager(1, TransactionConfig(NUM_PARTITIONS, 900_000, EXPIRATION_MS, 1024),
                                   log.append, clock, log.read_log)


def run(scenario: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(scenario)


async def owned(m: TransactionStateManager, epoch: int = 5) -> list[TransactionMetadata]:
    m.begin_loading(PARTITION, epoch)
    return await m.load_transactions_for_partition(PARTITION, epoch)


async def initialized(m: TransactionStateManager, clock: FakeClock, epoch: int = 5) -> TransactionMetadata:
    """A new id with producer id 100 and epoch 0, as InitProducerId leaves it."""
    put = m.put_transaction_state_if_not_exists(TransactionMetadata.new(TID, 100, -1, -1, -1, 60_000, clock()))
    assert isinstance(put, CoordinatorEpochAndTxnMetadata)
    txn = put.transaction_metadata
    transit = txn.prepare_increment_producer_epoch(60_000, None, clock())
    assert not isinstance(transit, ErrorCode)
    assert await m.append_transaction_to_log(TID, epoch, transit) is ErrorCode.NONE
    return txn


async def prepared_commit(m: TransactionStateManager, clock: FakeClock) -> TransactionMetadata:
    """An initialized id's transaction on TP0, in PrepareCommit: what a completion follows."""
    txn = await initialized(m, clock)
    assert await m.append_transaction_to_log(TID, 5, txn.prepare_add_partitions(frozenset({TP0}), clock())) \
        is ErrorCode.NONE
    prepare = txn.prepare_abort_or_commit(TransactionState.PREPARE_COMMIT, clock())
    assert await m.append_transaction_to_log(TID, 5, prepare) is ErrorCode.NONE
    return txn


def test_partition_for_is_javas_string_hash_code_with_kafkas_abs() -> None:
    # "txn-a".hashCode() == 110_810_558 in Java; Kafka's Utils.abs keeps it; 110_810_558 % 50 == 8.
    assert partition_for("txn-a", 50) == 8
    # A negative hash (Java's "polygenelubricants".hashCode() == Integer.MIN_VALUE): Utils.abs maps it to 0.
    assert partition_for("polygenelubricants", 50) == 0


def test_an_id_is_not_coordinated_here_until_its_partition_loads() -> None:
    async def scenario() -> None:
        m = manager(MemoryLog(), FakeClock())
        assert m.get_transaction_state(TID) is ErrorCode.NOT_COORDINATOR
        m.begin_loading(PARTITION, 5)
        assert m.get_transaction_state(TID) is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert await m.load_transactions_for_partition(PARTITION, 5) == []
        assert m.get_transaction_state(TID) is None
    run(scenario())


def test_a_transition_is_appended_with_acks_all_before_it_completes() -> None:
    async def scenario() -> None:
        log, clock = MemoryLog(), FakeClock()
        m = manager(log, clock)
        await owned(m)
        txn = await initialized(m, clock)
        assert (txn.state, txn.producer_epoch, txn.pending_state) == (TransactionState.EMPTY, 0, None)
        [(key, value)] = log.records(PARTITION)
        assert key == transaction_log.key_to_bytes(TID)
        stored = transaction_log.read_txn_record_value(TID, value)
        assert stored is not None and (stored.producer_id, stored.producer_epoch) == (100, 0)
        assert log.timeouts == [60_000]  # the transaction's timeout, as Kafka's append
    run(scenario())


def test_a_failed_append_leaves_the_state_and_maps_the_error() -> None:
    async def scenario() -> None:
        log, clock = MemoryLog(), FakeClock()
        m = manager(log, clock)
        await owned(m)
        txn = await initialized(m, clock)
        for append_error, answered in [(ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
                                       (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_NOT_AVAILABLE),
                                       (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
                                       (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR)]:
            log.fail_with = append_error
            transit = txn.prepare_add_partitions(frozenset({TP0}), clock())
            assert await m.append_transaction_to_log(TID, 5, transit) is answered
            assert (txn.state, txn.topic_partitions, txn.pending_state) == (TransactionState.EMPTY, set(), None)
        # A caller that retries keeps the pending state (the markers' completion).
        transit = txn.prepare_add_partitions(frozenset({TP0}), clock())
        assert await m.append_transaction_to_log(TID, 5, transit, lambda e: True) is ErrorCode.UNKNOWN_SERVER_ERROR
        assert txn.pending_state is TransactionState.ONGOING
    run(scenario())


def test_an_append_for_a_stale_coordinator_epoch_is_not_coordinator() -> None:
    async def scenario() -> None:
        log, clock = MemoryLog(), FakeClock()
        m = manager(log, clock)
        await owned(m)
        txn = await initialized(m, clock)
        transit = txn.prepare_add_partitions(frozenset({TP0}), clock())
        assert await m.append_transaction_to_log(TID, 4, transit) is ErrorCode.NOT_COORDINATOR
        assert len(log.records(PARTITION)) == 1  # nothing appended
    run(scenario())


def test_the_partition_moving_during_the_append_changes_nothing_here() -> None:
    async def scenario() -> None:
        log, clock = MemoryLog(), FakeClock()
        m = manager(log, clock)
        await owned(m)
        txn = await initialized(m, clock)
        real_append = log.append

        async def append_then_resign(tp: TopicPartition, batch: bytes, timeout_ms: int) -> ProducePartitionResponse:
            response = await real_append(tp, batch, timeout_ms)
            m.remove_transactions_for_partition(PARTITION, 6)
            return response

        m._append = append_then_resign
        transit = txn.prepare_add_partitions(frozenset({TP0}), clock())
        assert await m.append_transaction_to_log(TID, 5, transit) is ErrorCode.NOT_COORDINATOR
        assert txn.state is TransactionState.EMPTY
        assert m.get_transaction_state(TID) is ErrorCode.NOT_COORDINATOR
    run(scenario())


def test_loading_keeps_the_last_value_drops_tombstones_and_returns_the_prepared() -> None:
    async def scenario() -> None:
        log, clock = MemoryLog(), FakeClock()
        m = manager(log, clock)
        await owned(m)
        txn = await initialized(m, clock)
        add = txn.prepare_add_partitions(frozenset({TP0}), clock())
        assert await m.append_transaction_to_log(TID, 5, add) is ErrorCode.NONE
        prepare = txn.prepare_abort_or_commit(TransactionState.PREPARE_COMMIT, clock())
        assert await m.append_transaction_to_log(TID, 5, prepare) is ErrorCode.NONE
        # Another id of the same partition, then its tombstone.
        gone = next(t for i in range(200) if partition_for(t := f"gone-{i}", NUM_PARTITIONS) == PARTITION)
        await log.append(TopicPartition(TRANSACTION_STATE_TOPIC_NAME, PARTITION),
                         build_batch([ProducerRecord(None, transaction_log.key_to_bytes(gone), clock())]), 1)

        successor = manager(log, clock)
        prepared = await owned(successor, epoch=6)
        assert [(p.transactional_id, p.state, p.topic_partitions) for p in prepared] == [
            (TID, TransactionState.PREPARE_COMMIT, {TP0})]
        state = successor.get_transaction_state(TID)
        assert isinstance(state, CoordinatorEpochAndTxnMetadata) and state.coordinator_epoch == 6
        assert successor.get_transaction_state(gone) is None
    run(scenario())


def test_a_completion_and_the_next_ongoing_in_one_batch_load_as_the_ongoing() -> None:
    async def scenario() -> None:
        log, clock = MemoryLog(), FakeClock()
        m = manager(log, clock)
        await owned(m)
        txn = await prepared_commit(m, clock)
        clock.advance(10)
        complete = txn.prepare_complete(clock())
        tp1 = TopicPartition("orders", 1)
        following = txn.prepare_add_partitions_after(complete, frozenset({tp1}), clock())
        assert await m.append_transaction_to_log(TID, 5, complete, then=following) is ErrorCode.NONE
        assert (txn.state, txn.topic_partitions, txn.pending_state) == (TransactionState.ONGOING, {tp1}, None)
        assert len(log.batches[PARTITION]) == 4  # the two transitions in one batch

        # A successor loads the batch's last value: the new transaction, open, with nothing to finish.
        successor = manager(log, clock)
        assert await owned(successor, epoch=6) == []
        state = successor.get_transaction_state(TID)
        assert isinstance(state, CoordinatorEpochAndTxnMetadata)
        loaded = state.transaction_metadata
        assert (loaded.state, loaded.topic_partitions, loaded.producer_id, loaded.producer_epoch,
                loaded.txn_start_timestamp) == (TransactionState.ONGOING, {tp1}, 100, 0, clock())
    run(scenario())


def test_a_failed_batch_of_a_completion_and_the_next_ongoing_changes_neither() -> None:
    async def scenario() -> None:
        log, clock = MemoryLog(), FakeClock()
        m = manager(log, clock)
        await owned(m)
        txn = await prepared_commit(m, clock)
        complete = txn.prepare_complete(clock())
        following = txn.prepare_add_partitions_after(complete, frozenset({TP0}), clock())
        log.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
        # The completion is retried (its pending state kept); the next transaction has not started.
        assert await m.append_transaction_to_log(TID, 5, complete, lambda e: True, then=following) \
            is ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert (txn.state, txn.pending_state) == (TransactionState.PREPARE_COMMIT, TransactionState.COMPLETE_COMMIT)
    run(scenario())


def test_unloading_drops_the_partitions_ids_and_an_older_epoch_cannot() -> None:
    async def scenario() -> None:
        log, clock = MemoryLog(), FakeClock()
        m = manager(log, clock)
        await owned(m, epoch=5)
        await initialized(m, clock)
        m.remove_transactions_for_partition(PARTITION, 4)
        assert isinstance(m.get_transaction_state(TID), CoordinatorEpochAndTxnMetadata)
        m.remove_transactions_for_partition(PARTITION, 5)
        assert m.get_transaction_state(TID) is ErrorCode.NOT_COORDINATOR
    run(scenario())


def test_an_ongoing_transaction_past_its_timeout_is_timed_out() -> None:
    async def scenario() -> None:
        log, clock = MemoryLog(), FakeClock()
        m = manager(log, clock)
        await owned(m)
        txn = await initialized(m, clock)
        assert await m.append_transaction_to_log(TID, 5, txn.prepare_add_partitions(frozenset({TP0}), clock())) \
            is ErrorCode.NONE
        clock.advance(60_000)
        assert m.timed_out_transactions() == []
        clock.advance(1)
        [timed_out] = m.timed_out_transactions()
        assert (timed_out.transactional_id, timed_out.producer_id, timed_out.producer_epoch) == (TID, 100, 0)
        txn.prepare_abort_or_commit(TransactionState.PREPARE_ABORT, clock())
        assert m.timed_out_transactions() == []  # a transition under way
    run(scenario())


def test_an_idle_id_expires_with_a_tombstone() -> None:
    async def scenario() -> None:
        log, clock = MemoryLog(), FakeClock()
        m = manager(log, clock)
        await owned(m)
        await initialized(m, clock)
        clock.advance(EXPIRATION_MS - 1)
        assert await m.remove_expired_transactional_ids() == 0
        clock.advance(1)
        log.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
        assert await m.remove_expired_transactional_ids() == 0
        state = m.get_transaction_state(TID)
        assert isinstance(state, CoordinatorEpochAndTxnMetadata) and state.transaction_metadata.pending_state is None
        log.fail_with = None
        assert await m.remove_expired_transactional_ids() == 1
        assert m.get_transaction_state(TID) is None
        assert log.records(PARTITION)[-1] == (transaction_log.key_to_bytes(TID), None)
        # A new coordinator loads the tombstone: the id is gone there too.
        successor = manager(log, clock)
        await owned(successor, epoch=6)
        assert successor.get_transaction_state(TID) is None
    run(scenario())

"""KIP-664's reads of the transaction coordinator (Kafka 3.0's handleDescribeTransactions and
listTransactionStates): an id's state, producer, timeout, start time and partitions; TRANSACTIONAL_ID_NOT_FOUND,
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS; the listing's producer id and state filters, its unknown state
names, and Dead ids never shown."""

from __future__ import annotations

from broker.coordinator.transaction.transaction_state_manager import ListedTransaction
from proto.errors import ErrorCode
from tests.unit.broker.coordinator.transaction.test_transaction_coordinator import (
    A0,
    A1,
    PARTITION,
    TID,
    Harness,
    S,
    run,
    same_partition,
    settle,
)


def test_describe_shows_an_ongoing_transactions_state_partitions_timeout_and_start_then_its_commit() -> None:
    async def scenario() -> None:
        h = Harness()
        assert h.coordinator.handle_describe_transactions(TID).error is ErrorCode.NOT_COORDINATOR
        h.manager.begin_loading(PARTITION, 5)
        assert h.coordinator.handle_describe_transactions(TID).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await h.elected()
        assert h.coordinator.handle_describe_transactions(TID).error is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        assert h.coordinator.handle_describe_transactions("").error is ErrorCode.INVALID_REQUEST
        pid = await h.init(timeout_ms=45_000)
        h.clock.advance(1500)
        started = h.clock()
        await h.coordinator.handle_add_partitions_to_transaction(TID, pid.producer_id, 0, [A1, A0])
        h.clock.advance(2000)
        described = h.coordinator.handle_describe_transactions(TID)
        assert (described.error, described.state, described.producer_id, described.producer_epoch,
                described.txn_timeout_ms, described.txn_start_timestamp, described.topic_partitions) == (
            ErrorCode.NONE, S.ONGOING, pid.producer_id, 0, 45_000, started, (A0, A1))
        await h.coordinator.handle_end_transaction(TID, pid.producer_id, 0, commit=True)
        await settle()
        committed = h.coordinator.handle_describe_transactions(TID)
        assert (committed.state, committed.topic_partitions) == (S.COMPLETE_COMMIT, ())
        h.state().state = S.DEAD  # being expired: as good as gone
        assert h.coordinator.handle_describe_transactions(TID).error is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    run(scenario())


def test_list_filters_by_producer_id_and_state_names_unknown_ones_and_hides_dead_ids() -> None:
    async def scenario() -> None:
        h = Harness()
        h.manager.begin_loading(PARTITION, 5)
        assert h.manager.list_transaction_states((), ()).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await h.elected()
        other = same_partition("other")
        first = await h.init()
        second = await h.coordinator.handle_init_producer_id(other, 60_000, None)
        await h.coordinator.handle_add_partitions_to_transaction(TID, first.producer_id, 0, [A0])
        everything = h.manager.list_transaction_states((), ())
        assert (everything.error, sorted(everything.transactions, key=lambda t: t.transactional_id)) == (
            ErrorCode.NONE, sorted([ListedTransaction(TID, first.producer_id, S.ONGOING),
                                    ListedTransaction(other, second.producer_id, S.EMPTY)],
                                   key=lambda t: t.transactional_id))
        ongoing = h.manager.list_transaction_states((), ("Ongoing", "Bogus"))
        assert (ongoing.transactions, ongoing.unknown_state_filters) == (
            [ListedTransaction(TID, first.producer_id, S.ONGOING)], ["Bogus"])
        assert h.manager.list_transaction_states((second.producer_id,), ()).transactions == [
            ListedTransaction(other, second.producer_id, S.EMPTY)]
        assert h.manager.list_transaction_states((second.producer_id,), ("Ongoing",)).transactions == []
        h.state(other).state = S.DEAD
        assert [t.transactional_id for t in h.manager.list_transaction_states((), ()).transactions] == [TID]
    run(scenario())

"""broker/coordinator/transaction/transaction_metadata.py: Kafka 2.8's transaction states and transition table, the
prepare / complete pair (a pending state blocks a second transition; a failed append leaves the state as it was),
InitProducerId's epoch bumps and KIP-360's retries, the fence, with timestamps from a clock only the test moves."""

from __future__ import annotations

import pytest

from broker.coordinator.transaction.transaction_metadata import (
    VALID_PREVIOUS_STATES,
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    is_valid_transition,
)
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.fakes import FakeClock

S = TransactionState
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def fresh(clock: FakeClock, epoch: int = -1) -> TransactionMetadata:
    return TransactionMetadata.new("txn", 100, -1, epoch, -1, 60_000, clock())


def test_the_transition_table_is_kafkas() -> None:
    assert VALID_PREVIOUS_STATES[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS_STATES[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE}
    assert VALID_PREVIOUS_STATES[S.ONGOING] == {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert VALID_PREVIOUS_STATES[S.DEAD] == {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}
    assert not is_valid_transition(S.EMPTY, S.PREPARE_COMMIT)
    assert not is_valid_transition(S.PREPARE_COMMIT, S.PREPARE_ABORT)
    assert [s.byte for s in S] == list(range(8))
    assert [str(s) for s in S if s.is_expiration_allowed] == ["Empty", "CompleteCommit", "CompleteAbort"]


def test_a_first_init_gives_epoch_0_and_each_later_one_bumps_it() -> None:
    clock = FakeClock()
    txn = fresh(clock)
    transit = txn.prepare_increment_producer_epoch(30_000, None, clock())
    assert not isinstance(transit, ErrorCode)
    assert (transit.producer_epoch, transit.last_producer_epoch, txn.pending_state) == (0, -1, S.EMPTY)
    txn.complete_transition_to(transit)
    assert (txn.producer_epoch, txn.txn_timeout_ms, txn.state, txn.pending_state) == (0, 30_000, S.EMPTY, None)
    again = txn.prepare_increment_producer_epoch(30_000, None, clock())
    assert not isinstance(again, ErrorCode)
    txn.complete_transition_to(again)
    assert (txn.producer_epoch, txn.last_producer_epoch) == (1, -1)


def test_kip_360_an_expected_epoch_bumps_its_retry_repeats_a_stale_one_is_fenced() -> None:
    clock = FakeClock()
    txn = fresh(clock, epoch=4)
    bump = txn.prepare_increment_producer_epoch(60_000, 4, clock())
    assert not isinstance(bump, ErrorCode)
    txn.complete_transition_to(bump)
    assert (txn.producer_epoch, txn.last_producer_epoch) == (5, 4)
    # The same request again (its answer was lost): the same epoch, no second bump.
    retry = txn.prepare_increment_producer_epoch(60_000, 4, clock())
    assert not isinstance(retry, ErrorCode)
    assert (retry.producer_epoch, retry.last_producer_epoch) == (5, 4)
    txn.complete_transition_to(retry)
    assert txn.prepare_increment_producer_epoch(60_000, 2, clock()) is ErrorCode.PRODUCER_FENCED
    assert txn.pending_state is None


def test_a_transaction_goes_ongoing_prepare_commit_complete_commit() -> None:
    clock = FakeClock()
    txn = fresh(clock, epoch=0)
    clock.advance(10)
    started = clock()
    add = txn.prepare_add_partitions(frozenset({TP0}), started)
    txn.complete_transition_to(add)
    assert (txn.state, txn.topic_partitions, txn.txn_start_timestamp) == (S.ONGOING, {TP0}, started)
    clock.advance(10)
    more = txn.prepare_add_partitions(frozenset({TP1}), clock())
    txn.complete_transition_to(more)
    assert txn.topic_partitions == {TP0, TP1} and txn.txn_start_timestamp == started  # the start stays
    prepare = txn.prepare_abort_or_commit(S.PREPARE_COMMIT, clock())
    txn.complete_transition_to(prepare)
    assert txn.state is S.PREPARE_COMMIT
    txn.remove_partition(TP0)
    complete = txn.prepare_complete(clock())
    assert complete.txn_state is S.COMPLETE_COMMIT and complete.topic_partitions == frozenset()
    txn.complete_transition_to(complete)
    assert (txn.state, txn.topic_partitions, txn.txn_last_update_timestamp) == (S.COMPLETE_COMMIT, set(), clock())


def test_the_next_transaction_is_prepared_behind_a_pending_completion_and_taken_after_it() -> None:
    clock = FakeClock()
    txn = fresh(clock, epoch=0)
    txn.complete_transition_to(txn.prepare_add_partitions(frozenset({TP0}), clock()))
    # Only behind a completion being written: not while Ongoing, nor behind a Prepare state.
    with pytest.raises(IllegalTransitionError, match="cannot start its next transaction"):
        txn.prepare_add_partitions_after(txn.prepare_no_transit(), frozenset({TP1}), clock())
    txn.complete_transition_to(txn.prepare_abort_or_commit(S.PREPARE_COMMIT, clock()))
    clock.advance(10)
    complete = txn.prepare_complete(clock())
    following = txn.prepare_add_partitions_after(complete, frozenset({TP1}), clock())
    assert (following.txn_state, following.topic_partitions, following.producer_id, following.producer_epoch,
            following.txn_start_timestamp) == (S.ONGOING, frozenset({TP1}), 100, 0, clock())
    assert txn.pending_state is S.COMPLETE_COMMIT  # still the completion's
    # Taken in order once the batch holding both is durable; out of order it is a coordinator bug.
    with pytest.raises(IllegalTransitionError):
        txn.complete_following_transition_to(following)
    txn.complete_transition_to(complete)
    txn.complete_following_transition_to(following)
    assert (txn.state, txn.topic_partitions, txn.pending_state, txn.txn_start_timestamp) == (
        S.ONGOING, {TP1}, None, clock())


def test_a_pending_transition_blocks_a_second_one_until_cleared() -> None:
    clock = FakeClock()
    txn = fresh(clock, epoch=0)
    txn.prepare_add_partitions(frozenset({TP0}), clock())
    with pytest.raises(IllegalTransitionError, match="already has a pending state"):
        txn.prepare_add_partitions(frozenset({TP1}), clock())
    # The append failed: the coordinator clears the pending state and nothing else changed.
    txn.pending_state = None
    assert (txn.state, txn.topic_partitions) == (S.EMPTY, set())


def test_transitions_outside_the_table_are_refused() -> None:
    clock = FakeClock()
    txn = fresh(clock, epoch=0)
    with pytest.raises(IllegalTransitionError, match="not a valid previous state"):
        txn.prepare_abort_or_commit(S.PREPARE_COMMIT, clock())
    assert txn.pending_state is None
    with pytest.raises(IllegalTransitionError, match="while removing"):
        txn.remove_partition(TP0)


def test_completing_a_transit_other_than_the_pending_one_fails() -> None:
    clock = FakeClock()
    txn = fresh(clock, epoch=0)
    other = fresh(clock, epoch=0).prepare_add_partitions(frozenset({TP0}), clock())
    with pytest.raises(IllegalTransitionError, match="failed transition"):
        txn.complete_transition_to(other)  # nothing pending
    bump = txn.prepare_increment_producer_epoch(60_000, None, clock())
    assert not isinstance(bump, ErrorCode)
    with pytest.raises(IllegalTransitionError, match="failed transition"):
        txn.complete_transition_to(other)  # pending Empty, given Ongoing


def test_the_fence_bumps_the_epoch_once_and_goes_on_to_prepare_abort() -> None:
    clock = FakeClock()
    txn = fresh(clock, epoch=3)
    txn.complete_transition_to(txn.prepare_add_partitions(frozenset({TP0}), clock()))
    fence = txn.prepare_fence_producer_epoch()
    assert (fence.txn_state, fence.producer_epoch, fence.topic_partitions) == (S.PREPARE_EPOCH_FENCE, 4,
                                                                               frozenset({TP0}))
    with pytest.raises(IllegalTransitionError):
        txn.complete_transition_to(fence)  # a fence is never completed: it goes on to PrepareAbort
    # As Kafka's abort of a fenced transaction: the bumped epoch is set, then PrepareAbort from PrepareEpochFence.
    txn.producer_epoch = fence.producer_epoch
    txn.state = S.PREPARE_EPOCH_FENCE
    txn.pending_state = None
    abort = txn.prepare_abort_or_commit(S.PREPARE_ABORT, clock())
    txn.complete_transition_to(abort)
    assert (txn.state, txn.producer_epoch) == (S.PREPARE_ABORT, 4)
    # A fence whose write failed does not bump again: the client never saw the bumped epoch.
    other = fresh(clock, epoch=3)
    other.complete_transition_to(other.prepare_add_partitions(frozenset({TP0}), clock()))
    other.has_failed_epoch_fence = True
    assert other.prepare_fence_producer_epoch().producer_epoch == 3


def test_an_exhausted_epoch_rotates_the_producer_id() -> None:
    clock = FakeClock()
    txn = fresh(clock, epoch=0x7FFE)
    assert txn.is_producer_epoch_exhausted
    with pytest.raises(IllegalTransitionError, match="Cannot allocate any more producer epochs"):
        txn.prepare_increment_producer_epoch(60_000, None, clock())
    rotation = txn.prepare_producer_id_rotation(101, 60_000, clock(), record_last_epoch=True)
    txn.complete_transition_to(rotation)
    assert (txn.producer_id, txn.producer_epoch, txn.last_producer_id, txn.last_producer_epoch) == (101, 0, 100,
                                                                                                   0x7FFE)

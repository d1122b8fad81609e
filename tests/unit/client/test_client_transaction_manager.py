"""The transactional producer's rules (client/transaction_manager.py): Java's transition table, how each
coordinator answer is handled (look the coordinator up again, retry, abortable, fatal), which partitions must join
the transaction before their batches go, and what a failed batch does to the transaction."""

from __future__ import annotations

import pytest

from client.errors import IllegalStateError
from client.transaction_manager import (
    TransactionalState,
    TransactionState,
    TxnAction,
    add_partitions_retry_backoff_ms,
    classify_answer,
    is_transition_valid,
    partitions_outcome,
)
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition

S = TransactionState
A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def in_transaction() -> TransactionalState:
    state = TransactionalState("tx", 60_000)
    state.begin_init()
    state.init_done(4000, 0)
    state.begin()
    return state


@pytest.mark.parametrize(("source", "target", "valid"), [
    (S.UNINITIALIZED, S.INITIALIZING, True),
    (S.READY, S.IN_TRANSACTION, True),
    (S.IN_TRANSACTION, S.READY, False),  # a transaction ends only through commit or abort
    (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, True),
    (S.ABORTABLE_ERROR, S.COMMITTING_TRANSACTION, False),
    (S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION, True),
    (S.ABORTING_TRANSACTION, S.INITIALIZING, True),  # the epoch bump after an abort (KIP-360)
    (S.READY, S.ABORTABLE_ERROR, False),
    (S.READY, S.FATAL_ERROR, True),
    (S.FATAL_ERROR, S.FATAL_ERROR, True),
])
def test_javas_transition_table(source: TransactionState, target: TransactionState, valid: bool) -> None:
    assert is_transition_valid(source, target) is valid


@pytest.mark.parametrize(("code", "action"), [
    (ErrorCode.NONE, TxnAction.DONE),
    (ErrorCode.NOT_COORDINATOR, TxnAction.FIND_COORDINATOR),
    (ErrorCode.COORDINATOR_NOT_AVAILABLE, TxnAction.FIND_COORDINATOR),
    (ErrorCode.NETWORK_EXCEPTION, TxnAction.FIND_COORDINATOR),
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, TxnAction.RETRY),
    (ErrorCode.CONCURRENT_TRANSACTIONS, TxnAction.RETRY),
    (ErrorCode.PRODUCER_FENCED, TxnAction.FATAL),
    (ErrorCode.INVALID_PRODUCER_EPOCH, TxnAction.FATAL),
    (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TxnAction.FATAL),
    (ErrorCode.INVALID_TXN_STATE, TxnAction.FATAL),
    (ErrorCode.TOPIC_AUTHORIZATION_FAILED, TxnAction.FATAL),  # not an InitProducerId / EndTxn answer
])
def test_a_coordinator_answer_is_handled_as_javas_handlers_do(code: ErrorCode, action: TxnAction) -> None:
    assert classify_answer(code) is action


def test_add_partitions_refused_topic_is_abortable_unknown_retried_and_not_attempted_ignored() -> None:
    assert classify_answer(ErrorCode.TOPIC_AUTHORIZATION_FAILED, add_partitions=True) is TxnAction.ABORTABLE
    assert classify_answer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, add_partitions=True) is TxnAction.RETRY
    assert partitions_outcome({A0: ErrorCode.OPERATION_NOT_ATTEMPTED,
                                   A1: ErrorCode.TOPIC_AUTHORIZATION_FAILED}) == (
        TxnAction.ABORTABLE, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    # The worst partition decides: a fenced producer is fatal whatever the others say.
    assert partitions_outcome({A0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, A1: ErrorCode.PRODUCER_FENCED}) == (
        TxnAction.FATAL, ErrorCode.PRODUCER_FENCED)
    assert partitions_outcome({A0: ErrorCode.NONE, A1: ErrorCode.NONE}) == (TxnAction.DONE, ErrorCode.NONE)


def test_send_needs_init_and_an_open_transaction() -> None:
    state = TransactionalState("tx", 60_000)
    with pytest.raises(IllegalStateError, match="init_transactions"):
        state.check_send()
    state.begin_init()
    state.init_done(4000, 0)
    with pytest.raises(IllegalStateError, match="begin_transaction"):
        state.check_send()
    state.begin()
    state.check_send()
    with pytest.raises(IllegalStateError):
        state.begin()  # one transaction at a time


def test_a_partition_is_sent_to_only_once_added_and_each_transaction_starts_empty() -> None:
    state = in_transaction()
    assert state.partitions_to_add([A1, A0]) == [A0, A1]
    assert not state.is_send_to_partition_allowed(A0)
    state.partitions_added([A0, A1])
    assert state.is_send_to_partition_allowed(A0) and state.partitions_to_add([A0, A1]) == []
    state.begin_commit()
    state.transition_to(S.READY)
    assert state.partitions_in_transaction == frozenset() and not state.is_send_to_partition_allowed(A0)
    assert state.partitions_to_add([A0]) == []  # READY: nothing joins until begin_transaction()


def test_a_failed_batch_makes_the_transaction_abortable_and_its_abort_bumps_the_epoch() -> None:
    state = in_transaction()
    state.batch_failed(KafkaError("too large", ErrorCode.MESSAGE_TOO_LARGE), sequenced=True)
    assert state.state is S.ABORTABLE_ERROR and state.epoch_bump_required
    with pytest.raises(KafkaError) as refused:
        state.begin_commit()
    assert refused.value.code is ErrorCode.MESSAGE_TOO_LARGE
    with pytest.raises(KafkaError):
        state.check_send()
    state.begin_abort()
    assert state.is_aborting_or_failed
    state.transition_to(S.INITIALIZING)
    state.init_done(4000, 1)
    assert (state.state, state.epoch_bump_required, state.last_error) == (S.READY, False, None)


def test_a_fenced_batch_is_fatal_and_nothing_but_close_is_left() -> None:
    state = in_transaction()
    state.batch_failed(KafkaError("fenced", ErrorCode.PRODUCER_FENCED), sequenced=True)
    assert state.state is S.FATAL_ERROR
    for call in (state.begin_abort, state.begin_commit, state.begin):
        with pytest.raises(KafkaError) as raised:
            call()
        assert raised.value.code is ErrorCode.PRODUCER_FENCED


def test_init_transactions_is_called_once() -> None:
    state = in_transaction()
    with pytest.raises(IllegalStateError, match="once"):
        state.begin_init()


@pytest.mark.parametrize(("code", "action"), [
    (ErrorCode.GROUP_AUTHORIZATION_FAILED, TxnAction.ABORTABLE),
    (ErrorCode.ILLEGAL_GENERATION, TxnAction.ABORTABLE),  # KIP-447: a member whose generation has passed
    (ErrorCode.UNKNOWN_MEMBER_ID, TxnAction.ABORTABLE),
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, TxnAction.RETRY),
    (ErrorCode.NOT_COORDINATOR, TxnAction.FIND_COORDINATOR),
    (ErrorCode.PRODUCER_FENCED, TxnAction.FATAL),
])
def test_offsets_answers_as_javas_add_offsets_and_txn_offset_commit_handlers(code: ErrorCode,
                                                                           action: TxnAction) -> None:
    assert classify_answer(code, offsets=True) is action


def test_offsets_alone_start_the_transaction() -> None:
    state = in_transaction()
    state.begin_send_offsets()
    assert not state.transaction_started
    state.offsets_added()
    assert state.transaction_started


def test_the_first_add_of_a_transaction_waits_out_the_previous_ones_markers_briefly() -> None:
    """Java's ADD_PARTITIONS_RETRY_BACKOFF_MS: CONCURRENT_TRANSACTIONS on a transaction's first
    AddPartitionsToTxn means the last one's markers are still being written, a matter of milliseconds."""
    assert add_partitions_retry_backoff_ms(ErrorCode.CONCURRENT_TRANSACTIONS, True, 100) == 20
    assert add_partitions_retry_backoff_ms(ErrorCode.CONCURRENT_TRANSACTIONS, True, 5) == 5
    assert add_partitions_retry_backoff_ms(ErrorCode.CONCURRENT_TRANSACTIONS, False, 100) == 100
    assert add_partitions_retry_backoff_ms(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, True, 100) == 100

"""The transactional producer's rules: the transactional half of Kafka's TransactionManager (KIP-98), no I/O.

A transactional producer moves through Kafka's states (UNINITIALIZED, INITIALIZING, READY, IN_TRANSACTION,
COMMITTING_TRANSACTION, ABORTING_TRANSACTION, ABORTABLE_ERROR, FATAL_ERROR) by Java's transition table;
a partition's batches go out only once AddPartitionsToTxn put it in the transaction; every coordinator
answer is classified as Java's handlers do: look the coordinator up again, retry, abortable (the
application must abort_transaction()), or fatal (the producer can only be closed; PRODUCER_FENCED and
INVALID_PRODUCER_EPOCH among them). The I/O lives in client/transactional_requests.py and client/sender.py.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable

from client.errors import IllegalStateError
from client.idempotence import TransactionManager
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition


class TransactionState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TransactionState
# Java's TransactionManager.State.isTransitionValid: the states each state may be entered from (FATAL_ERROR
# from any). INITIALIZING after ABORTING_TRANSACTION is the epoch bump that follows an abort (KIP-360).
_ENTERED_FROM: dict[TransactionState, frozenset[TransactionState]] = {
    S.UNINITIALIZED: frozenset({S.UNINITIALIZED}),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR}),
    S.FATAL_ERROR: frozenset(TransactionState),
}


def is_transition_valid(source: TransactionState, target: TransactionState) -> bool:
    return source in _ENTERED_FROM[target]


class TxnAction(enum.Enum):
    """What a coordinator's answer asks of the producer (Java's TxnRequestHandler subclasses' branches)."""

    DONE = "done"
    FIND_COORDINATOR = "find_coordinator"  # the coordinator moved or is down: look it up, then retry
    RETRY = "retry"  # the same coordinator, after retry_backoff_ms
    ABORTABLE = "abortable"  # this transaction is lost; abort_transaction() recovers
    FATAL = "fatal"  # the producer is finished (fenced, refused its id, or a state the broker cannot explain)


_FIND_COORDINATOR = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                               ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT})
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})
# AddPartitionsToTxn's answers that cost the transaction but not the producer (Java's
# AddPartitionsToTxnHandler: a refused topic; KIP-360's unknown producer id and mapping, recovered by the
# abort's epoch bump).
_ADD_PARTITIONS_ABORTABLE = frozenset({ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.UNKNOWN_PRODUCER_ID,
                                       ErrorCode.INVALID_PRODUCER_ID_MAPPING})
# AddOffsetsToTxn's and TxnOffsetCommit's answers that cost the transaction only (Java's AddOffsetsToTxnHandler
# and TxnOffsetCommitHandler: a refused group or topic; KIP-447's stale member, its CommitFailedException).
_OFFSETS_ABORTABLE = frozenset({ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                                ErrorCode.FENCED_INSTANCE_ID})


def classify_answer(code: int, *, add_partitions: bool = False, offsets: bool = False) -> TxnAction:
    """How InitProducerId, AddPartitionsToTxn or EndTxn's error `code` is handled (`add_partitions` for the
    partition-level errors of AddPartitionsToTxn, where an unknown topic is retried as Java does; `offsets` for
    AddOffsetsToTxn's and TxnOffsetCommit's)."""
    if code == ErrorCode.NONE:
        return TxnAction.DONE
    if code in _FIND_COORDINATOR:
        return TxnAction.FIND_COORDINATOR
    if code in _RETRY or ((add_partitions or offsets) and code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return TxnAction.RETRY
    if (add_partitions and code in _ADD_PARTITIONS_ABORTABLE) or (offsets and code in _OFFSETS_ABORTABLE):
        return TxnAction.ABORTABLE
    # PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_TXN_STATE,
    # and anything unexpected: Java's handlers end in fatalError for each.
    return TxnAction.FATAL


def partitions_outcome(errors: dict[TopicPartition, int], *, offsets: bool = False) -> tuple[TxnAction, int]:
    """One action for a whole AddPartitionsToTxn (or, `offsets`, TxnOffsetCommit) answer, and the code behind
    it: the worst partition's (OPERATION_NOT_ATTEMPTED only says another partition failed the request)."""
    worst, worst_code = TxnAction.DONE, int(ErrorCode.NONE)
    order = [TxnAction.DONE, TxnAction.RETRY, TxnAction.FIND_COORDINATOR, TxnAction.ABORTABLE, TxnAction.FATAL]
    for code in errors.values():
        if code == ErrorCode.OPERATION_NOT_ATTEMPTED:
            continue
        action = classify_answer(code, add_partitions=not offsets, offsets=offsets)
        if order.index(action) > order.index(worst):
            worst, worst_code = action, code
    return worst, worst_code


# Java's TransactionManager.ADD_PARTITIONS_RETRY_BACKOFF_MS: the first AddPartitionsToTxn of a transaction
# answered CONCURRENT_TRANSACTIONS (the previous one's markers are still being written) is retried this soon.
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20


def add_partitions_retry_backoff_ms(code: int, first_of_transaction: bool, retry_backoff_ms: int) -> int:
    """How long before AddPartitionsToTxn is tried again (Java's AddPartitionsToTxnHandler): the previous
    transaction completes within milliseconds, so the first add of the next one does not wait retry_backoff_ms."""
    if code == ErrorCode.CONCURRENT_TRANSACTIONS and first_of_transaction:
        return min(ADD_PARTITIONS_RETRY_BACKOFF_MS, retry_backoff_ms)
    return retry_backoff_ms


class TransactionalState(TransactionManager):
    """A transactional producer's id, epoch, sequences (TransactionManager) and transaction.

    Shared by the application's thread (init, begin, commit, abort, send's checks) and the producer's I/O
    thread (which adds partitions and fails batches), so each change holds the lock.
    """

    def __init__(self, transactional_id: str, transaction_timeout_ms: int) -> None:
        super().__init__()
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.state = TransactionState.UNINITIALIZED
        self.last_error: KafkaError | None = None
        # A batch with a sequence failed in this transaction: the broker's sequences and ours disagree, so the
        # abort is followed by an InitProducerId that bumps the epoch (KIP-360) and starts sequences at 0.
        self.epoch_bump_required = False
        self._in_transaction: set[TopicPartition] = set()
        # Partitions or offsets were added: the coordinator knows of the transaction, so it ends with EndTxn.
        self.transaction_started = False
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ transitions

    def transition_to(self, target: TransactionState, error: KafkaError | None = None) -> None:
        with self._lock:
            self._transition(target, error)

    def _transition(self, target: TransactionState, error: KafkaError | None) -> None:
        if self.state is TransactionState.FATAL_ERROR and target is not TransactionState.FATAL_ERROR:
            raise self._fatal()
        if not is_transition_valid(self.state, target):
            raise IllegalStateError(f"TransactionalId {self.transactional_id}: Invalid transition attempted"
                                    f" from state {self.state.name} to state {target.name}")
        if error is not None:
            self.last_error = error
        elif target in (TransactionState.READY, TransactionState.INITIALIZING):
            self.last_error = None
        if target is TransactionState.READY:
            self._in_transaction.clear()
            self.transaction_started = False
        self.state = target

    def _fatal(self) -> KafkaError:
        error = self.last_error
        return error if error is not None else KafkaError("the producer hit a fatal error")

    def fail_transaction(self, error: KafkaError, *, fatal: bool) -> None:
        """An answer or a batch failed the transaction (abortable) or the producer (fatal). A failure while
        already aborting or ready changes nothing: it is the outcome the abort was heading to anyway."""
        with self._lock:
            if fatal:
                self._transition(TransactionState.FATAL_ERROR, error)
            elif self.state in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING_TRANSACTION,
                                TransactionState.ABORTABLE_ERROR):
                self._transition(TransactionState.ABORTABLE_ERROR, error)

    def batch_failed(self, error: KafkaError, sequenced: bool) -> None:
        """Java's Sender: a failed send makes the transaction abortable (a fenced producer is fatal)."""
        fatal = error.code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
                               ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if sequenced:
            self.sequence_lost()
        self.fail_transaction(error, fatal=fatal)

    def sequence_lost(self) -> None:
        """A batch that was given a sequence will never be appended: the broker would see a gap."""
        with self._lock:
            self.epoch_bump_required = True

    # ------------------------------------------------------------------ the application's calls

    def begin_init(self) -> None:
        """init_transactions(): from UNINITIALIZED (Java allows it once)."""
        with self._lock:
            if self.state is not TransactionState.UNINITIALIZED:
                raise IllegalStateError(f"TransactionalId {self.transactional_id}: init_transactions() may be"
                                        f" called once, not in state {self.state.name}")
            self._transition(TransactionState.INITIALIZING, None)

    def init_done(self, producer_id: int, producer_epoch: int) -> None:
        with self._lock:
            self.set_producer_id_and_epoch(producer_id, producer_epoch)
            self.epoch_bump_required = False
            self._transition(TransactionState.READY, None)

    def begin(self) -> None:
        with self._lock:
            self._raise_if_error("begin_transaction")
            if self.state is not TransactionState.READY:
                raise IllegalStateError(f"TransactionalId {self.transactional_id}: cannot begin a transaction in"
                                        f" state {self.state.name}" + _hint(self.state))
            self._transition(TransactionState.IN_TRANSACTION, None)

    def begin_commit(self) -> None:
        with self._lock:
            self._raise_if_error("commit_transaction")
            if self.state is not TransactionState.IN_TRANSACTION:
                raise IllegalStateError(f"TransactionalId {self.transactional_id}: cannot commit in state"
                                        f" {self.state.name}")
            self._transition(TransactionState.COMMITTING_TRANSACTION, None)

    def begin_abort(self) -> None:
        with self._lock:
            if self.state is TransactionState.FATAL_ERROR:
                raise self._fatal()
            self._transition(TransactionState.ABORTING_TRANSACTION, None)

    def check_send(self) -> None:
        """Java's failIfNotReadyForSend: records go only into an open transaction that has not failed."""
        with self._lock:
            if self.state is TransactionState.FATAL_ERROR or self.state is TransactionState.ABORTABLE_ERROR:
                raise KafkaError("Cannot perform send because at least one previous transactional or idempotent"
                                 f" request has failed with errors: {self.last_error}",
                                 self.last_error.code if self.last_error is not None else None)
            if not self.has_producer_id:
                raise IllegalStateError("Cannot perform a 'send' before completing a call to init_transactions"
                                        " when transactions are enabled.")
            if self.state is not TransactionState.IN_TRANSACTION:
                raise IllegalStateError(f"Cannot call send in state {self.state.name}" + _hint(self.state))

    def _raise_if_error(self, call: str) -> None:
        if self.state is TransactionState.FATAL_ERROR:
            raise self._fatal()
        if self.state is TransactionState.ABORTABLE_ERROR:
            error = self.last_error
            raise KafkaError(f"Cannot {call}: the transaction failed and must be aborted: {error}",
                             error.code if error is not None else None)

    # ------------------------------------------------------------------ the I/O thread's view

    @property
    def is_aborting_or_failed(self) -> bool:
        """Queued batches are to be failed, not sent: the transaction will be aborted."""
        return self.state in (TransactionState.ABORTING_TRANSACTION, TransactionState.ABORTABLE_ERROR,
                              TransactionState.FATAL_ERROR)

    @property
    def can_add_partitions(self) -> bool:
        return self.state in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING_TRANSACTION)

    def partitions_to_add(self, with_batches: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Partitions that hold batches but are not yet in the transaction (sorted: one request's order)."""
        with self._lock:
            if not self.can_add_partitions:
                return []
            return sorted(set(with_batches) - self._in_transaction)

    def partitions_added(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            if self.can_add_partitions:
                self._in_transaction.update(partitions)
                self.transaction_started = True

    def begin_send_offsets(self) -> None:
        """send_offsets_to_transaction(): only into an open transaction that has not failed."""
        with self._lock:
            self._raise_if_error("send_offsets_to_transaction")
            if self.state is not TransactionState.IN_TRANSACTION:
                raise IllegalStateError("Cannot send offsets if a transaction is not in progress (currentState="
                                        f"{self.state.name})")

    def offsets_added(self) -> None:
        """AddOffsetsToTxn succeeded: the group's __consumer_offsets partition is in the transaction."""
        with self._lock:
            self.transaction_started = True

    def is_send_to_partition_allowed(self, tp: TopicPartition) -> bool:
        return tp in self._in_transaction

    @property
    def partitions_in_transaction(self) -> frozenset[TopicPartition]:
        with self._lock:
            return frozenset(self._in_transaction)


def _hint(state: TransactionState) -> str:
    if state is TransactionState.UNINITIALIZED:
        return " (call init_transactions() first)"
    if state is TransactionState.READY:
        return " (call begin_transaction() first)"
    return ""

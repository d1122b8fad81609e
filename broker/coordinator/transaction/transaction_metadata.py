"""A transactional id's state and its transition rules (Kafka 2.8's coordinator/transaction/TransactionMetadata.scala),
with no I/O: the coordinator prepares a transition (TxnTransitMetadata, the pending state set so nothing else may
start one), appends it to __transaction_state, and completes it only once the append is acknowledged; a failed
append clears the pending state and leaves the metadata as it was.

The states, with the byte __transaction_state stores (TransactionLogValue.TransactionStatus):

  Empty (0)              no transaction; the producer id and epoch are assigned
  Ongoing (1)            partitions added, the transaction open
  PrepareCommit (2)      EndTxn(commit) durable: the markers go out
  PrepareAbort (3)       EndTxn(abort), a fenced or timed-out transaction: the markers go out
  CompleteCommit (4)     every commit marker written
  CompleteAbort (5)      every abort marker written
  Dead (6)               the id expired (only ever a tombstone in the log)
  PrepareEpochFence (7)  a new producer (or the timeout) fences an open transaction: its epoch is bumped and it
                         goes on to PrepareAbort; never written itself

Timestamps are passed in by the caller (its injected clock), as Kafka passes time.milliseconds.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from typing import NoReturn

from proto.errors import ErrorCode
from proto.types import TopicPartition

logger = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
_SHORT_MAX = 0x7FFF


class TransactionState(enum.Enum):
    """Kafka's TransactionState objects: the name Kafka prints and the byte it stores."""

    EMPTY = ("Empty", 0)
    ONGOING = ("Ongoing", 1)
    PREPARE_COMMIT = ("PrepareCommit", 2)
    PREPARE_ABORT = ("PrepareAbort", 3)
    COMPLETE_COMMIT = ("CompleteCommit", 4)
    COMPLETE_ABORT = ("CompleteAbort", 5)
    DEAD = ("Dead", 6)
    PREPARE_EPOCH_FENCE = ("PrepareEpochFence", 7)

    def __init__(self, kafka_name: str, byte: int) -> None:
        self.kafka_name = kafka_name
        self.byte = byte

    @property
    def is_expiration_allowed(self) -> bool:
        """An id idle in these states may expire (transactional.id.expiration.ms)."""
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @classmethod
    def from_byte(cls, byte: int) -> TransactionState:
        for state in cls:
            if state.byte == byte:
                return state
        raise ValueError(f"Unknown transaction state byte {byte} from the transaction status message")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """Kafka's TransactionState.fromName: the state printed as `name` (ListTransactions' state filters)."""
        return next((state for state in cls if state.kafka_name == name), None)

    def __str__(self) -> str:
        return self.kafka_name


_S = TransactionState
# Kafka's validPreviousStates: the states each state may be entered from.
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def is_valid_transition(old: TransactionState, new: TransactionState) -> bool:
    return old in VALID_PREVIOUS_STATES[new]


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka's isEpochExhausted: the last two epochs are kept back (one for the fence, one for the abort)."""
    return producer_epoch >= _SHORT_MAX - 1


class IllegalTransitionError(RuntimeError):
    """A transition the state machine forbids: a coordinator bug, never a client's mistake (Kafka's
    IllegalStateException)."""


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of one transition, as written to __transaction_state (Kafka's TxnTransitMetadata)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass(slots=True, eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    # The state being written to the log; a second transition may not start meanwhile.
    pending_state: TransactionState | None = None
    # A fence whose bumped epoch may not have reached the log: the next fence does not bump again (the client
    # never saw that epoch).
    has_failed_epoch_fence: bool = False

    @classmethod
    def new(cls, transactional_id: str, producer_id: int, last_producer_id: int, producer_epoch: int,
            last_producer_epoch: int, txn_timeout_ms: int, timestamp: int) -> TransactionMetadata:
        return cls(transactional_id, producer_id, last_producer_id, producer_epoch, last_producer_epoch,
                   txn_timeout_ms, TransactionState.EMPTY, set(), timestamp, timestamp)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (_S.ONGOING, _S.PREPARE_ABORT, _S.PREPARE_COMMIT)

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker reached `tp`: it leaves the set the marker channel still has to write."""
        if self.state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise IllegalTransitionError(f"{self.transactional_id} is {self.state} (pending {self.pending_state})"
                                         f" while removing {tp} whose marker was written")
        self.topic_partitions.discard(tp)

    # ------------------------------------------------------------------ preparing transitions

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state as a transit, no pending state set (what an abort of a timed-out transaction starts
        from)."""
        return TxnTransitMetadata(self.producer_id, self.last_producer_id, self.producer_epoch,
                                  self.last_producer_epoch, self.txn_timeout_ms, self.state,
                                  frozenset(self.topic_partitions), self.txn_start_timestamp,
                                  self.txn_last_update_timestamp)

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        if self.producer_epoch == _SHORT_MAX:
            raise IllegalTransitionError("Cannot fence producer with epoch equal to Short.MaxValue: it would overflow")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare_transition_to(_S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH,
                                           self.txn_timeout_ms, frozenset(self.topic_partitions),
                                           self.txn_start_timestamp, self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, new_txn_timeout_ms: int, expected_producer_epoch: int | None,
                                         update_timestamp: int) -> TxnTransitMetadata | ErrorCode:
        """InitProducerId on an id with a producer id: the epoch bumped, or (KIP-360) the retry of a bump answered
        with the same epoch; PRODUCER_FENCED for an expected epoch that is neither the current nor the last."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(f"Cannot allocate any more producer epochs for producerId {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            # A new producer instance: the epoch bumped, no last epoch (an old instance's retry is fenced).
            next_epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            # The producer continues after an error and nobody else initialized meanwhile.
            next_epoch, last_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            # The retry of a bump that succeeded: the same answer again.
            next_epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            logger.info("Expected producer epoch %d does not match current producer epoch %d or previous producer"
                        " epoch %d", expected_producer_epoch, self.producer_epoch, self.last_producer_epoch)
            return ErrorCode.PRODUCER_FENCED
        return self._prepare_transition_to(_S.EMPTY, self.producer_id, next_epoch, last_epoch, new_txn_timeout_ms,
                                           frozenset(), -1, update_timestamp)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_txn_timeout_ms: int, update_timestamp: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        """A new producer id (the epoch exhausted, or a new id for a fresh producer), epoch 0."""
        if self.has_pending_transaction:
            raise IllegalTransitionError("Cannot rotate producer ids while a transaction is still pending")
        return self._prepare_transition_to(_S.EMPTY, new_producer_id, 0,
                                           self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                                           new_txn_timeout_ms, frozenset(), -1, update_timestamp)

    def prepare_add_partitions(self, added: frozenset[TopicPartition], update_timestamp: int) -> TxnTransitMetadata:
        starts = self.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT)
        return self._prepare_transition_to(_S.ONGOING, self.producer_id, self.producer_epoch,
                                           self.last_producer_epoch, self.txn_timeout_ms,
                                           frozenset(self.topic_partitions) | added,
                                           update_timestamp if starts else self.txn_start_timestamp, update_timestamp)

    def prepare_add_partitions_after(self, complete: TxnTransitMetadata, added: frozenset[TopicPartition],
                                     update_timestamp: int) -> TxnTransitMetadata:
        """The next transaction's Ongoing with `added`, to be written right behind the pending CompleteCommit /
        CompleteAbort `complete` (in its batch): what prepare_add_partitions would prepare once `complete` is the
        state. The pending state stays the completion's; complete_following_transition_to takes this one after it."""
        if self.pending_state is not complete.txn_state or complete.txn_state not in (_S.COMPLETE_COMMIT,
                                                                                      _S.COMPLETE_ABORT):
            raise IllegalTransitionError(f"{self.transactional_id} cannot start its next transaction behind"
                                         f" {complete.txn_state} while {self.state} (pending {self.pending_state})")
        return TxnTransitMetadata(complete.producer_id, self.producer_id, complete.producer_epoch,
                                  complete.last_producer_epoch, complete.txn_timeout_ms, _S.ONGOING, added,
                                  update_timestamp, update_timestamp)

    def prepare_abort_or_commit(self, new_state: TransactionState, update_timestamp: int) -> TxnTransitMetadata:
        return self._prepare_transition_to(new_state, self.producer_id, self.producer_epoch,
                                           self.last_producer_epoch, self.txn_timeout_ms,
                                           frozenset(self.topic_partitions), self.txn_start_timestamp,
                                           update_timestamp)

    def prepare_complete(self, update_timestamp: int) -> TxnTransitMetadata:
        new_state = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        # The prepare state reached the log, so a fence that failed before is behind us.
        self.has_failed_epoch_fence = False
        return self._prepare_transition_to(new_state, self.producer_id, self.producer_epoch,
                                           self.last_producer_epoch, self.txn_timeout_ms, frozenset(),
                                           self.txn_start_timestamp, update_timestamp)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare_transition_to(_S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                                           self.txn_timeout_ms, frozenset(), self.txn_start_timestamp,
                                           self.txn_last_update_timestamp)

    def _prepare_transition_to(self, new_state: TransactionState, new_producer_id: int, new_epoch: int,
                               new_last_epoch: int, new_txn_timeout_ms: int,
                               new_topic_partitions: frozenset[TopicPartition], new_txn_start_timestamp: int,
                               update_timestamp: int) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(f"Preparing transaction state transition to {new_state} while it already"
                                         f" has a pending state {self.pending_state}")
        if new_producer_id < 0:
            raise IllegalTransitionError(f"Illegal new producer id {new_producer_id}")
        if new_epoch < 0:
            raise IllegalTransitionError(f"Illegal new producer epoch {new_epoch}")
        if not is_valid_transition(self.state, new_state):
            raise IllegalTransitionError(f"Preparing transaction state transition to {new_state} failed since the"
                                         f" target state {new_state} is not a valid previous state of the current"
                                         f" state {self.state}")
        self.pending_state = new_state
        return TxnTransitMetadata(new_producer_id, self.producer_id, new_epoch, new_last_epoch, new_txn_timeout_ms,
                                  new_state, new_topic_partitions, new_txn_start_timestamp, update_timestamp)

    # ------------------------------------------------------------------ completing them

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """The transit reached the log (acks=all): make it the state. Kafka's checks that it is the transit
        prepared (the pending state, the epoch, the partitions only growing) guard against coordinator bugs."""
        to_state = self.pending_state
        if to_state is None or to_state is not transit.txn_state:
            self._fail(transit)
        if to_state is _S.EMPTY:  # InitProducerId
            if ((self.producer_epoch != transit.producer_epoch and not self._valid_producer_epoch_bump(transit))
                    or transit.topic_partitions or transit.txn_start_timestamp != -1):
                self._fail(transit)
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif to_state is _S.ONGOING:  # AddPartitionsToTxn / AddOffsetsToTxn
            if (not self._valid_producer_epoch(transit) or not self.topic_partitions <= transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms):
                self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions |= transit.topic_partitions
        elif to_state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):  # EndTxn
            if (not self._valid_producer_epoch(transit) or self.topic_partitions != transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms
                    or self.txn_start_timestamp != transit.txn_start_timestamp):
                self._fail(transit)
        elif to_state in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT):  # every marker written
            if (not self._valid_producer_epoch(transit) or self.txn_timeout_ms != transit.txn_timeout_ms
                    or transit.txn_start_timestamp == -1):
                self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions.clear()
        else:
            # PrepareEpochFence goes on to PrepareAbort at once, and Dead ends in removal from the cache: neither
            # is ever completed.
            self._fail(transit)
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = to_state

    def complete_following_transition_to(self, transit: TxnTransitMetadata) -> None:
        """The transit written right behind the one just completed, in the same batch, reached the log with it."""
        if self.pending_state is not None or not is_valid_transition(self.state, transit.txn_state):
            self._fail(transit)
        self.pending_state = transit.txn_state
        self.complete_transition_to(transit)

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id

    def _valid_producer_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return (transit.producer_epoch == self.producer_epoch + 1
                or (transit.producer_epoch == 0 and transit.producer_id != self.producer_id))

    def _fail(self, transit: TxnTransitMetadata) -> NoReturn:
        logger.error("%s's transition to %s failed: this should not happen", self, transit)
        raise IllegalTransitionError(f"TransactionalId {self.transactional_id} failed transition to state {transit}"
                                     " due to unexpected metadata")

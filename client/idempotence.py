"""The idempotent producer's bookkeeping: the idempotent half of Kafka's TransactionManager.

The broker keeps, per producer id, the sequence number of the last batch it
appended for each partition, and accepts a batch only if it continues that
sequence (KIP-98). So the producer gives each partition's batches consecutive
base sequences (increasing by their record counts, wrapping from Int32.MaxValue
to 0) and, on a retry, resends the same bytes: the broker then either appends
them once or answers DUPLICATE_SEQUENCE_NUMBER with the original offsets.

When a batch that had a sequence fails for good (or expires), the broker and
this producer no longer agree on the next sequence; as Kafka 2.x does for an
idempotent producer, the producer then gets a new producer id (epoch) once
nothing is in flight, and sequences start again at 0.
"""

from __future__ import annotations

from common.record import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from proto.errors import KafkaError
from proto.types import TopicPartition

SEQUENCE_SPACE = 1 << 31


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap from Int32.MaxValue to 0."""
    return (sequence + increment) % SEQUENCE_SPACE


def _is_after(a: int, b: int) -> bool:
    """Whether sequence `a` comes after `b`, allowing for the wrap (half the space ahead is "after")."""
    return 0 < (a - b) % SEQUENCE_SPACE < SEQUENCE_SPACE // 2


class TransactionManager:
    """Producer id, epoch and per-partition sequence numbers of an idempotent producer (no transactions)."""

    def __init__(self) -> None:
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self._next_sequence: dict[TopicPartition, int] = {}
        self._last_acked_sequence: dict[TopicPartition, int] = {}
        self.reset_reason: KafkaError | None = None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID and self.reset_reason is None

    @property
    def needs_reset(self) -> bool:
        return self.reset_reason is not None

    def set_producer_id_and_epoch(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self._next_sequence.clear()
        self._last_acked_sequence.clear()
        self.reset_reason = None

    def request_reset(self, reason: KafkaError) -> None:
        """A sequenced batch failed: the next batch would leave a gap the broker refuses."""
        if self.reset_reason is None:
            self.reset_reason = reason

    def assign_sequence(self, tp: TopicPartition, record_count: int) -> int:
        """The base sequence of the partition's next batch; the one after starts `record_count` later."""
        base = self._next_sequence.get(tp, 0)
        self._next_sequence[tp] = increment_sequence(base, record_count)
        return base

    def is_next_sequence(self, tp: TopicPartition, base_sequence: int) -> bool:
        """True if every batch before this one is acknowledged: it is the one the broker waits for."""
        last = self._last_acked_sequence.get(tp)
        return base_sequence == (0 if last is None else increment_sequence(last, 1))

    def on_acked(self, tp: TopicPartition, base_sequence: int, record_count: int) -> None:
        last = increment_sequence(base_sequence, record_count - 1)
        current = self._last_acked_sequence.get(tp)
        # Answers for in-flight batches may come back in any order; the last acked only moves forward.
        if current is None or _is_after(last, current):
            self._last_acked_sequence[tp] = last

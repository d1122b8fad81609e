"""Sequence numbers of the idempotent producer: assignment, wrap at Int32.MaxValue, acknowledgement order."""

from __future__ import annotations

from client.idempotence import SEQUENCE_SPACE, TransactionManager, increment_sequence
from proto.errors import KafkaError
from proto.types import TopicPartition

TP = TopicPartition("t", 0)
INT32_MAX = (1 << 31) - 1


def test_increment_wraps_like_kafka() -> None:
    assert SEQUENCE_SPACE == INT32_MAX + 1
    assert increment_sequence(5, 10) == 15
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 2, 5) == 2  # DefaultRecordBatch.incrementSequence


def test_sequences_increase_by_record_count_per_partition() -> None:
    txn = TransactionManager()
    txn.set_producer_id_and_epoch(7, 0)
    assert [txn.assign_sequence(TP, n) for n in (3, 5, 1)] == [0, 3, 8]
    assert txn.assign_sequence(TopicPartition("t", 1), 4) == 0


def test_sequences_wrap_at_int32_max() -> None:
    txn = TransactionManager()
    txn.set_producer_id_and_epoch(7, 0)
    txn.assign_sequence(TP, INT32_MAX - 1)
    assert txn.assign_sequence(TP, 3) == INT32_MAX - 1
    assert txn.assign_sequence(TP, 1) == 1


def test_next_sequence_follows_acknowledgements_in_any_order() -> None:
    txn = TransactionManager()
    txn.set_producer_id_and_epoch(7, 0)
    first, second, third = (txn.assign_sequence(TP, 10) for _ in range(3))
    assert txn.is_next_sequence(TP, first) and not txn.is_next_sequence(TP, second)
    txn.on_acked(TP, second, 10)  # answers can come back out of order...
    txn.on_acked(TP, first, 10)  # ...and the last acknowledged sequence never moves back
    assert txn.is_next_sequence(TP, third)


def test_acknowledgement_order_survives_the_wrap() -> None:
    txn = TransactionManager()
    txn.set_producer_id_and_epoch(7, 0)
    txn.assign_sequence(TP, INT32_MAX - 4)
    before, after = txn.assign_sequence(TP, 10), txn.assign_sequence(TP, 10)
    txn.on_acked(TP, after, 10)
    txn.on_acked(TP, before, 10)
    assert txn.is_next_sequence(TP, increment_sequence(after, 10))


def test_reset_and_new_producer_id_start_sequences_again() -> None:
    txn = TransactionManager()
    txn.set_producer_id_and_epoch(7, 0)
    txn.assign_sequence(TP, 10)
    txn.request_reset(KafkaError("gap"))
    assert txn.needs_reset and not txn.has_producer_id
    txn.set_producer_id_and_epoch(8, 0)
    assert not txn.needs_reset and txn.has_producer_id
    assert txn.assign_sequence(TP, 1) == 0

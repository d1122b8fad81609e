"""broker/coordinator/transaction/transaction_log.py: __transaction_state keys and values in Kafka 2.8's bytes
(written out field by field from TransactionLogKey.json and TransactionLogValue.json, version 0), read back as
TransactionMetadata, and records no Kafka wrote refused with RecordFormatError."""

from __future__ import annotations

import struct

import pytest

from broker.coordinator.schema import RecordFormatError
from broker.coordinator.transaction import transaction_log
from broker.coordinator.transaction.transaction_metadata import TransactionState, TxnTransitMetadata
from proto.types import TopicPartition


def s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def transit(state: TransactionState, partitions: frozenset[TopicPartition] = frozenset()) -> TxnTransitMetadata:
    return TxnTransitMetadata(producer_id=4000, last_producer_id=-1, producer_epoch=3, last_producer_epoch=2,
                              txn_timeout_ms=60_000, txn_state=state, topic_partitions=partitions,
                              txn_start_timestamp=1_700_000_000_000, txn_last_update_timestamp=1_700_000_000_500)


def test_the_key_is_version_0_and_the_transactional_id() -> None:
    key = transaction_log.key_to_bytes("txn-1")
    assert key == bytes.fromhex("0000" "0005" "74786e2d31")
    assert transaction_log.read_txn_record_key(key) == transaction_log.TxnKey(0, "txn-1")


def test_an_ongoing_value_groups_its_partitions_by_topic() -> None:
    partitions = frozenset({TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 1)})
    data = transaction_log.value_to_bytes(transit(TransactionState.ONGOING, partitions))
    assert data == (i16(0) + i64(4000) + i16(3) + i32(60_000) + i8(1)
                    + i32(2) + s("a") + i32(2) + i32(1) + i32(2) + s("b") + i32(1) + i32(0)
                    + i64(1_700_000_000_500) + i64(1_700_000_000_000))
    metadata = transaction_log.read_txn_record_value("t", data)
    assert metadata is not None
    assert (metadata.producer_id, metadata.producer_epoch, metadata.txn_timeout_ms, metadata.state) == (
        4000, 3, 60_000, TransactionState.ONGOING)
    assert metadata.topic_partitions == set(partitions)
    assert (metadata.txn_start_timestamp, metadata.txn_last_update_timestamp) == (1_700_000_000_000,
                                                                                  1_700_000_000_500)
    # Version 0 has no last producer id or epoch: a loaded id knows neither, as in Kafka.
    assert (metadata.last_producer_id, metadata.last_producer_epoch) == (-1, -1)
    assert metadata.pending_state is None


def test_an_empty_value_has_null_partitions() -> None:
    data = transaction_log.value_to_bytes(transit(TransactionState.EMPTY))
    assert data == (i16(0) + i64(4000) + i16(3) + i32(60_000) + i8(0) + i32(-1)
                    + i64(1_700_000_000_500) + i64(1_700_000_000_000))
    metadata = transaction_log.read_txn_record_value("t", data)
    assert metadata is not None and metadata.state is TransactionState.EMPTY and metadata.topic_partitions == set()


def test_an_empty_value_with_partitions_is_refused() -> None:
    with pytest.raises(ValueError, match="not expected to have any partitions"):
        transaction_log.value_to_bytes(transit(TransactionState.EMPTY, frozenset({TopicPartition("a", 0)})))


def test_every_state_round_trips_through_its_byte() -> None:
    for state in TransactionState:
        if state is not TransactionState.EMPTY:
            data = transaction_log.value_to_bytes(transit(state, frozenset({TopicPartition("x", 5)})))
            metadata = transaction_log.read_txn_record_value("t", data)
            assert metadata is not None and metadata.state is state


def test_a_tombstone_reads_as_none() -> None:
    assert transaction_log.read_txn_record_value("t", None) is None


def test_unknown_versions_and_states_are_refused() -> None:
    with pytest.raises(RecordFormatError, match="Unknown version 1"):
        transaction_log.read_txn_record_key(i16(1) + s("t"))
    good = transaction_log.value_to_bytes(transit(TransactionState.ONGOING, frozenset({TopicPartition("x", 0)})))
    with pytest.raises(RecordFormatError, match="Unknown version 1"):
        transaction_log.read_txn_record_value("t", i16(1) + good[2:])
    bad_state = good[:16] + i8(9) + good[17:]
    with pytest.raises(RecordFormatError, match="Unknown transaction state byte 9"):
        transaction_log.read_txn_record_value("t", bad_state)
    with pytest.raises(RecordFormatError):
        transaction_log.read_txn_record_value("t", good[:-3])

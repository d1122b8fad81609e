"""The records of __transaction_state, byte for byte Kafka 2.8's (coordinator/transaction/TransactionLog.scala, its
TransactionLogKey.json and TransactionLogValue.json, version 0 of both), so Kafka's tools decode them.

  key    int16 version 0, TransactionalId (string)
  value  int16 version 0, ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
         TransactionStatus int8 (TransactionState.byte), TransactionPartitions (nullable array of Topic string and
         PartitionIds int32 array; null in the Empty state), TransactionLastUpdateTimestampMs int64,
         TransactionStartTimestampMs int64

A null value is a tombstone: the transactional id expired. The last producer id and epoch are not in version 0
(Kafka 2.8 writes no later one), so a loaded id knows neither, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.coordinator.schema import I16, Reader, RecordFormatError, Writer
from broker.coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from proto.types import TopicPartition

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class TxnKey:
    version: int
    transactional_id: str


def key_to_bytes(transactional_id: str) -> bytes:
    return bytes(Writer().i16(KEY_VERSION).string(transactional_id).out)


def value_to_bytes(transit: TxnTransitMetadata) -> bytes:
    """Kafka's valueToBytes: the partitions grouped by topic (in first-seen order of their sorted set), null for
    Empty, which may hold none."""
    if transit.txn_state is TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(f"Transaction is not expected to have any partitions since its state is Empty: {transit}")
    w = Writer().i16(VALUE_VERSION).i64(transit.producer_id).i16(transit.producer_epoch)
    w.i32(transit.txn_timeout_ms).i8(transit.txn_state.byte)
    if transit.txn_state is TransactionState.EMPTY:
        w.i32(-1)
    else:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(transit.topic_partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        w.i32(len(by_topic))
        for topic, partitions in by_topic.items():
            w.string(topic).i32(len(partitions))
            for partition in partitions:
                w.i32(partition)
    return bytes(w.i64(transit.txn_last_update_timestamp).i64(transit.txn_start_timestamp).out)


def read_txn_record_key(data: bytes) -> TxnKey:
    r = Reader(data)
    version = r.i16()
    if version != KEY_VERSION:
        raise RecordFormatError(f"Unknown version {version} from the transaction log message")
    return TxnKey(version, r.string())


def read_txn_record_value(transactional_id: str, data: bytes | None) -> TransactionMetadata | None:
    """The metadata a value holds (None for a tombstone), with no pending state and no last producer id or epoch."""
    if data is None:
        return None
    version = I16.unpack_from(data)[0] if len(data) >= 2 else -1
    if version != VALUE_VERSION:
        raise RecordFormatError(f"Unknown version {version} from the transaction log message value")
    r = Reader(data)
    r.pos = 2
    producer_id = r.i64()
    producer_epoch = r.i16()
    txn_timeout_ms = r.i32()
    try:
        state = TransactionState.from_byte(r.i8())
    except ValueError as e:
        raise RecordFormatError(str(e)) from None
    partitions: set[TopicPartition] = set()
    for _ in range(r.nullable_array_length() or 0):
        topic = r.string()
        partitions.update(TopicPartition(topic, r.i32()) for _ in range(r.array_length()))
    last_update = r.i64()
    start = r.i64()
    return TransactionMetadata(transactional_id, producer_id, NO_PRODUCER_ID, producer_epoch, NO_PRODUCER_EPOCH,
                               txn_timeout_ms, state,
                               set() if state is TransactionState.EMPTY else partitions, start, last_update)


"""LogValidator: the checks an append makes of incoming batches before a byte is written, and the offsets a
leader stamps into them (Kafka's kafka.log.LogValidator, with Log.analyzeAndValidateRecords).

Plain functions over the request's bytes (a memoryview) and plain values: no file, lock or clock, so each
rule is tested on its own. The append applies them in this order, and writes nothing unless all pass:
1. every append, leader or follower: each batch's structure and CRC (common.record.validate_batch), and
   its size against max.message.bytes (`analyze_and_validate_records`);
2. a leader's append only: each batch not in the topic's compression.type (unless `producer`) recompressed
   (`recompress_to_topic_codec`, common/recompression.py) and its size checked again; then
   (`validate_leader_append`) the request against segment.bytes, what only a broker may write (control
   batches: transaction markers, from the coordinator's WriteTxnMarkers), a producer id on transactional
   batches, and a key on every record of a compacted topic;
3. under the log's lock, at the log end: offsets, the leader epoch and LogAppendTime patched into each
   header, outside the CRC, so records are never re-encoded (`assign_offsets`).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from broker.log.segment import BatchSpan
from common.recompression import recompress_batches
from common.record import (
    NO_TIMESTAMP,
    BatchHeader,
    CompressionType,
    first_null_key_offset,
    patch_base_offset_and_epoch,
    set_log_append_time,
    validate_batch,
)
from proto.errors import InvalidRecordError, MessageTooLargeError, RecordListTooLargeError
from proto.types import TopicPartition

__all__ = [
    "AppendOrigin", "AssignedOffsets", "analyze_and_validate_records", "assign_offsets", "recompress_to_topic_codec",
    "validate_client_batches", "validate_keys", "validate_leader_append",
]


class AppendOrigin(enum.Enum):
    """Who asks a leader to append (Kafka's AppendOrigin): a client's Produce is checked for what only a broker
    may write; the transaction coordinator's markers (WriteTxnMarkers) are control batches."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


class AssignedOffsets(NamedTuple):
    """What stamping a leader's batches produced (Kafka's ValidationAndOffsetAssignResult, per batch)."""

    spans: list[BatchSpan]  # each batch's last offset, max timestamp (as stored) and size
    producer_batch_positions: list[int]  # byte positions of the batches from idempotent producers


def analyze_and_validate_records(view: memoryview, max_message_bytes: int, tp: TopicPartition,
                                 allow_gaps: bool = False) -> list[BatchHeader]:
    """Every batch's header, after checking its structure, CRC and size; raise on the first bad one.

    `allow_gaps` accepts a batch whose offsets skip inside it (a compacted log's follower copies them).
    """
    batches = []
    position = 0
    while position < len(view):
        header = validate_batch(view, position, allow_gaps)
        if header.size > max_message_bytes:
            raise MessageTooLargeError(
                f"The record batch size in the append to {tp} is {header.size} bytes which"
                f" exceeds the maximum configured value of {max_message_bytes}."
            )
        batches.append(header)
        position += header.size
    return batches


def recompress_to_topic_codec(view: memoryview, batches: list[BatchHeader], target: CompressionType | None,
                              max_message_bytes: int, tp: TopicPartition) -> tuple[memoryview, list[BatchHeader]]:
    """Kafka's LogValidator with a target codec (compression.type other than `producer`): the batches in another
    codec recompressed into a new (writable) buffer, whose batches are checked again, since recompression may
    have grown one past max.message.bytes; the request as it is when every batch is already in `target`."""
    if target is None or all(header.compression == target for header in batches):
        return view, batches
    recompressed = memoryview(recompress_batches(view, batches, target))
    return recompressed, analyze_and_validate_records(recompressed, max_message_bytes, tp)


def validate_leader_append(view: memoryview, batches: list[BatchHeader], *, segment_bytes: int, compacted: bool,
                           tp: TopicPartition, origin: AppendOrigin = AppendOrigin.CLIENT) -> bool:
    """A produce request's checks beyond each batch's own; True if any batch comes from an idempotent producer."""
    if len(view) > segment_bytes:
        # Kafka's Log.append: the request must fit one segment, or no roll could ever take it.
        raise RecordListTooLargeError(
            f"Message batch size is {len(view)} bytes in append to partition {tp} which"
            f" exceeds the maximum configured segment size of {segment_bytes}."
        )
    if origin is AppendOrigin.CLIENT:
        idempotent = validate_client_batches(batches, tp)
    else:
        idempotent = any(header.producer_id >= 0 for header in batches)
    if compacted:
        validate_keys(view, batches, tp)
    return idempotent


def validate_client_batches(batches: list[BatchHeader], tp: TopicPartition) -> bool:
    """Refuse what only a broker may write; True if any batch comes from an idempotent producer."""
    idempotent = False
    for header in batches:
        if header.is_control:
            raise InvalidRecordError(f"Appending control records to {tp} is not allowed: only brokers write them")
        if header.is_transactional and header.producer_id < 0:
            raise InvalidRecordError(f"Transactional record batch for {tp} has no producerId")
        idempotent = idempotent or header.producer_id >= 0
    return idempotent


def validate_keys(view: memoryview, batches: list[BatchHeader], tp: TopicPartition) -> None:
    """Kafka's LogValidator.validateKey for compacted topics: every record needs a key, or the cleaner could not
    keep it."""
    position = 0
    for header in batches:
        if first_null_key_offset(view, position, header) is not None:
            raise InvalidRecordError(f"Compacted topic cannot accept message without key in topic partition {tp}.")
        position += header.size


def assign_offsets(view: memoryview, batches: list[BatchHeader], first_offset: int, leader_epoch: int,
                   log_append_time: int) -> AssignedOffsets:
    """Patch consecutive offsets from `first_offset` and `leader_epoch` into each batch of the writable `view`,
    and `log_append_time` as every batch's time unless it is NO_TIMESTAMP (message.timestamp.type=CreateTime):
    Kafka's assignOffsetsNonCompressed, without touching a record."""
    offset = first_offset
    position = 0
    spans = []
    producer_batch_positions = []
    for header in batches:
        size = header.size
        patch_base_offset_and_epoch(view, position, offset, leader_epoch)
        if log_append_time != NO_TIMESTAMP:
            set_log_append_time(view, position, size, log_append_time)
        if header.producer_id >= 0:
            producer_batch_positions.append(position)
        offset += header.record_count
        max_timestamp = log_append_time if log_append_time != NO_TIMESTAMP else header.max_timestamp
        spans.append(BatchSpan(offset - 1, max_timestamp, size))
        position += size
    return AssignedOffsets(spans, producer_batch_positions)

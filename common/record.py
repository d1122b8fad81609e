"""Kafka RecordBatch v2 (magic 2), byte for byte.

The one codec of the project: the broker validates and stamps batches with it,
the client builds and decodes them, the Spark audit and `dump-log` read them.

Batch header (61 bytes, big-endian), as DefaultRecordBatch.java lays it out:

    offset  size  field
         0     8  baseOffset
         8     4  batchLength            (bytes after this field)
        12     4  partitionLeaderEpoch
        16     1  magic (2)
        17     4  crc                    (CRC-32C of bytes 21..end)
        21     2  attributes
        23     4  lastOffsetDelta
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  records count
        61     -  records (compressed as one block when attributes & 0x7)

Because the CRC starts at `attributes`, a leader assigns offsets and stamps its
epoch by patching bytes 0..7 and 12..15 only: the broker never re-encodes
records, so its cost per batch does not depend on the number of records.

Each record: length varint, attributes int8, timestampDelta varlong, offsetDelta
varint, key (varint length, -1 = null), value (likewise), header count varint,
then per header a varint-length UTF-8 key and a varint-length value. Varints
are zig-zag encoded as in protobuf's sint64.
"""

from __future__ import annotations

import enum
import gzip
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import crc32c as _crc32c

from proto.errors import (
    CorruptMessageError,
    InvalidRecordError,
    UnsupportedCompressionTypeError,
)

MAGIC = 2
# baseOffset + batchLength: the part of a batch not counted by batchLength (Kafka's LOG_OVERHEAD).
LOG_OVERHEAD = 12
HEADER_SIZE = 61
# Smallest batchLength a v2 batch can have: the header after LOG_OVERHEAD.
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

BASE_OFFSET_POS = 0
LENGTH_POS = 8
LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
MAX_TIMESTAMP_POS = 35

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
# KIP-534: set by the log cleaner on a batch whose tombstones it kept; baseTimestamp then holds the
# delete horizon (the time after which a later cleaning may drop them), and record timestamp deltas
# stay relative to it, so every reader still gets each record's own timestamp.
DELETE_HORIZON_MASK = 0x40


class CompressionType(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str | None) -> CompressionType:
        if name is None:
            return cls.NONE
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(f"unknown compression.type {name!r}") from None


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def crc32c(data: bytes | bytearray | memoryview) -> int:
    return _crc32c.crc32c(data)


# --------------------------------------------------------------------------- varints


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_varint(out: bytearray, n: int) -> None:
    """Append a zig-zag varint (Kafka's ByteUtils.writeVarlong; varint is the same for int32)."""
    v = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint at `pos`; return (value, position after it)."""
    b = buf[pos]
    if b < 0x80:  # one-byte fast path: most lengths and deltas in practice
        return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = read_raw_varint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_raw_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The varint at `pos` before zig-zag decoding, and the position after it."""
    result = 0
    shift = 0
    while True:
        if shift > 63:
            raise InvalidRecordError("varint is longer than 10 bytes")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def varint_size(n: int) -> int:
    v = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while v >= 0x80:
        v >>= 7
        size += 1
    return size


def varint_bytes(n: int) -> bytes:
    """The zig-zag varint of `n` as bytes; pre-encoded for the small values records are made of."""
    if 0 <= n < _SMALL_VARINT_LIMIT:
        return _SMALL_VARINTS[n]
    out = bytearray()
    write_varint(out, n)
    return bytes(out)


# Every non-negative value below 16384 (a varint of one, two or three bytes): record lengths, timestamp
# deltas and the offset deltas of batches of up to 16384 records (a 1 MB batch of 100-byte records holds
# ~9,000), so encoding a record is a few table look-ups.
_SMALL_VARINT_LIMIT = 1 << 14


def _small_varint(n: int) -> bytes:
    z = n << 1
    if z < 0x80:
        return bytes((z,))
    if z < 0x4000:
        return bytes(((z & 0x7F) | 0x80, z >> 7))
    return bytes(((z & 0x7F) | 0x80, ((z >> 7) & 0x7F) | 0x80, z >> 14))


_SMALL_VARINTS: tuple[bytes, ...] = tuple(_small_varint(n) for n in range(_SMALL_VARINT_LIMIT))


# --------------------------------------------------------------------------- compression


def compress(codec: CompressionType, data: bytes) -> bytes:
    if codec == CompressionType.NONE:
        return data
    if codec == CompressionType.GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == CompressionType.SNAPPY:
        from common import snappy

        return snappy.compress(data)
    if codec == CompressionType.LZ4:
        import lz4.frame

        # Kafka 2.x writes LZ4 frames with independent 64 KiB blocks and no content size.
        return bytes(lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB))
    if codec == CompressionType.ZSTD:
        import zstandard

        return zstandard.ZstdCompressor(level=3).compress(data)
    raise UnsupportedCompressionTypeError(f"compression codec {codec.name} is not supported")


def decompress(codec: CompressionType, data: bytes | memoryview) -> bytes:
    try:
        if codec == CompressionType.NONE:
            return bytes(data)
        if codec == CompressionType.GZIP:
            return gzip.decompress(bytes(data))
        if codec == CompressionType.SNAPPY:
            from common import snappy

            return snappy.decompress(data)
        if codec == CompressionType.LZ4:
            import lz4.frame

            return bytes(lz4.frame.decompress(bytes(data)))
        if codec == CompressionType.ZSTD:
            import zstandard

            # Kafka's zstd frames may omit the content size, so stream-decode.
            return zstandard.ZstdDecompressor().decompressobj().decompress(bytes(data))
    except (OSError, EOFError, RuntimeError, ValueError) as exc:
        if isinstance(exc, UnsupportedCompressionTypeError):
            raise
        raise CorruptMessageError(f"cannot decompress {codec.name} records: {exc}") from exc
    raise UnsupportedCompressionTypeError(f"compression codec {codec.name} is not supported")


# --------------------------------------------------------------------------- batch header


class BatchHeader(NamedTuple):
    """The 61-byte v2 batch header, decoded.

    A NamedTuple rather than a frozen dataclass: the broker builds one per
    batch on its hot path, and a tuple is built several times faster.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies in a log."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> CompressionType:
        try:
            return CompressionType(self.attributes & COMPRESSION_MASK)
        except ValueError:
            raise UnsupportedCompressionTypeError(
                f"unknown compression codec id {self.attributes & COMPRESSION_MASK}"
            ) from None

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & TIMESTAMP_TYPE_MASK else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """KIP-534: when the log cleaner may drop this batch's tombstones; None until it first kept them."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap at Int32.MaxValue, as in DefaultRecordBatch.incrementSequence.
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def read_offset_and_length(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(baseOffset, batchLength) of the batch at `pos`: the 12 bytes a log scan needs."""
    return _OFFSET_LENGTH.unpack_from(buf, pos)


def has_more_than_one_batch(buf: bytes | bytearray | memoryview) -> bool:
    """Whether a second batch starts after the first one's end, by its batchLength alone (per request, not per
    record), as Kafka's batch iterator sees one: at least a baseOffset and batchLength's worth of bytes. Fewer are
    no batch at all (the log refuses them as corrupt)."""
    if len(buf) < LOG_OVERHEAD:
        return False
    _offset, length = read_offset_and_length(buf)
    return len(buf) - (LOG_OVERHEAD + length) >= LOG_OVERHEAD


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the 61-byte header at `pos` without checking anything."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptMessageError(
            f"batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} available at position {pos}"
        )
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def validate_batch(buf: bytes | bytearray | memoryview, pos: int = 0, allow_gaps: bool = False) -> BatchHeader:
    """Check one batch's structure and CRC; raise a Kafka error naming what is wrong.

    Per-batch checks only (header fields and the CRC over the whole batch): the
    records themselves are not walked, so this costs the same for one record or
    a thousand. CORRUPT_MESSAGE for damaged bytes, INVALID_RECORD for a batch
    whose bytes are intact but whose header contradicts itself. `allow_gaps`
    (compacted logs) accepts fewer records than lastOffsetDelta + 1.
    """
    available = len(buf) - pos
    if available < HEADER_SIZE:
        raise CorruptMessageError(f"{available} bytes at position {pos} are too few for a batch header")
    fields = _HEADER.unpack_from(buf, pos)
    # Checked on the raw tuple (fields 1, 3, 4, 5, 6, 12 are batchLength, magic, crc,
    # attributes, lastOffsetDelta, count): this runs once per batch on every append.
    batch_length, magic, crc, attributes, last_offset_delta, count = (
        fields[1], fields[3], fields[4], fields[5], fields[6], fields[12])
    if magic != MAGIC:
        raise CorruptMessageError(f"batch at position {pos} has magic {magic}, expected {MAGIC}")
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptMessageError(f"batch at position {pos} has batchLength {batch_length} < {MIN_BATCH_LENGTH}")
    end = pos + batch_length + LOG_OVERHEAD
    if end - pos > available:
        raise CorruptMessageError(
            f"batch at position {pos} declares {end - pos} bytes but only {available} follow"
        )
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    computed = _crc32c.crc32c(view[pos + ATTRIBUTES_POS : end])
    if computed != crc:
        raise CorruptMessageError(
            f"batch at position {pos} (baseOffset {fields[0]}) has CRC {crc:#010x}, computed {computed:#010x}"
        )
    if count <= 0:
        raise InvalidRecordError(f"batch at position {pos} has record count {count}")
    # A compacted batch keeps its base and last offsets but may have lost records in between.
    if last_offset_delta != count - 1 and not (allow_gaps and last_offset_delta > count - 1):
        raise InvalidRecordError(
            f"batch at position {pos} has {count} records but lastOffsetDelta {last_offset_delta}"
        )
    if attributes & COMPRESSION_MASK > CompressionType.ZSTD:
        raise UnsupportedCompressionTypeError(f"unknown compression codec id {attributes & COMPRESSION_MASK}")
    return BatchHeader._make(fields)


def iter_headers(buf: bytes | bytearray | memoryview, validate: bool = True,
                 allow_gaps: bool = False) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of every batch in a buffer of back-to-back batches."""
    pos = 0
    end = len(buf)
    while pos < end:
        header = validate_batch(buf, pos, allow_gaps) if validate else parse_header(buf, pos)
        yield pos, header
        pos += header.size


def patch_base_offset_and_epoch(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Stamp a batch with the offsets and leader epoch the leader assigns.

    Both fields lie before the CRC's range, so the CRC stays valid.
    """
    _INT64.pack_into(buf, pos + BASE_OFFSET_POS, base_offset)
    _INT32.pack_into(buf, pos + LEADER_EPOCH_POS, leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, timestamp: int) -> None:
    """Turn a batch into a LogAppendTime batch stamped `timestamp` (message.timestamp.type).

    Attributes and maxTimestamp are inside the CRC's range, so the CRC is
    recomputed: still one pass over the batch, never a re-encode of records.
    """
    attrs = _INT16.unpack_from(buf, pos + ATTRIBUTES_POS)[0]
    _INT16.pack_into(buf, pos + ATTRIBUTES_POS, attrs | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_POS, timestamp)
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    _UINT32.pack_into(buf, pos + CRC_POS, _crc32c.crc32c(view[pos + ATTRIBUTES_POS : pos + size]))


# --------------------------------------------------------------------------- records

Header = tuple[str, bytes | None]


class Record(NamedTuple):
    """One decoded record, with its absolute offset and timestamp.

    A NamedTuple, not a frozen dataclass: decoding builds one per record, and a
    frozen dataclass's __init__ costs ten times a tuple's.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(slots=True)
class RecordBatch:
    """A decoded batch: its header and its records with absolute offsets and timestamps."""

    header: BatchHeader
    records: list[Record]


_NULL_LENGTH = b"\x01"  # zig-zag(-1): a null key, value or header value
_ZERO = b"\x00"  # the (unused) record attributes, and a header count of 0


def _encode_headers(headers: Sequence[Header]) -> bytes:
    parts = [varint_bytes(len(headers))]
    for hkey, hvalue in headers:
        encoded = hkey.encode("utf-8")
        parts += (varint_bytes(len(encoded)), encoded)
        parts += (_NULL_LENGTH,) if hvalue is None else (varint_bytes(len(hvalue)), hvalue)
    return b"".join(parts)


def encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, key: bytes | None,
                  value: bytes | None, headers: Sequence[Header] = ()) -> int:
    """Append one record (Kafka's DefaultRecord.writeTo) to `out`; return how many bytes it took.

    This is a producer's per-record cost, so the small varints come from a
    table, inline, and the record is joined in one step.
    """
    small = _SMALL_VARINTS
    limit = _SMALL_VARINT_LIMIT
    if key is None:
        key_length = _NULL_LENGTH
        key = b""
    else:
        n = len(key)
        key_length = small[n] if n < limit else varint_bytes(n)
    if value is None:
        value_length = _NULL_LENGTH
        value = b""
    else:
        n = len(value)
        value_length = small[n] if n < limit else varint_bytes(n)
    body = b"".join((
        _ZERO,
        small[timestamp_delta] if 0 <= timestamp_delta < limit else varint_bytes(timestamp_delta),
        small[offset_delta] if offset_delta < limit else varint_bytes(offset_delta),
        key_length, key, value_length, value,
        _encode_headers(headers) if headers else _ZERO,
    ))
    n = len(body)
    length = small[n] if n < limit else varint_bytes(n)
    out += length
    out += body
    return len(length) + n


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    """What a producer puts into a batch: offsets are assigned later by the leader."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int = NO_TIMESTAMP
    headers: tuple[Header, ...] = ()


def assemble_batch(
    records: bytes | bytearray | memoryview,
    record_count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
    last_offset_delta: int | None = None,
    has_delete_horizon: bool = False,
) -> bytes:
    """Put the header on `record_count` records written by encode_record (offset deltas 0..count-1).

    Kafka's MemoryRecordsBuilder.close: compress the records as one block, then
    write the header and the CRC; the cost per batch is independent of how the
    records were collected. The log cleaner passes `last_offset_delta` (its
    records keep their original offset deltas, with gaps) and, when it keeps
    tombstones, `has_delete_horizon` with the horizon as `base_timestamp`.
    """
    if record_count <= 0:
        raise ValueError("a batch holds at least one record")
    payload = records if compression == CompressionType.NONE else compress(compression, bytes(records))
    attributes = int(compression) | (TIMESTAMP_TYPE_MASK if timestamp_type else 0)
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if has_delete_horizon:
        attributes |= DELETE_HORIZON_MASK
    header = bytearray(HEADER_SIZE)
    _pack_header(header, len(payload), base_offset, partition_leader_epoch, attributes,
                 record_count - 1 if last_offset_delta is None else last_offset_delta, base_timestamp, max_timestamp,
                 producer_id, producer_epoch, base_sequence, record_count)
    crc = _crc32c.crc32c(payload, _crc32c.crc32c(memoryview(header)[ATTRIBUTES_POS:]))
    _UINT32.pack_into(header, CRC_POS, crc)
    return b"".join((header, payload))


def write_batch_header(buffer: bytearray, record_count: int, base_timestamp: int, max_timestamp: int, *,
                       producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                       base_sequence: int = NO_SEQUENCE, is_transactional: bool = False) -> None:
    """assemble_batch for uncompressed records written by encode_record behind HEADER_SIZE reserved bytes of
    `buffer` (a producer's batch): the header and CRC go over those bytes, so the batch is never copied. Written
    again (a new producer id or sequence), it replaces the last."""
    if record_count <= 0:
        raise ValueError("a batch holds at least one record")
    _pack_header(buffer, len(buffer) - HEADER_SIZE, 0, NO_PARTITION_LEADER_EPOCH,
                 TRANSACTIONAL_MASK if is_transactional else 0, record_count - 1, base_timestamp, max_timestamp,
                 producer_id, producer_epoch, base_sequence, record_count)
    _UINT32.pack_into(buffer, CRC_POS, _crc32c.crc32c(memoryview(buffer)[ATTRIBUTES_POS:]))


def _pack_header(buffer: bytearray, payload_size: int, base_offset: int, partition_leader_epoch: int, attributes: int,
                 last_offset_delta: int, base_timestamp: int, max_timestamp: int, producer_id: int,
                 producer_epoch: int, base_sequence: int, record_count: int) -> None:
    """A v2 batch header, all but its CRC, into buffer's first HEADER_SIZE bytes."""
    _HEADER.pack_into(buffer, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD + payload_size, partition_leader_epoch,
                      MAGIC, 0, attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
                      producer_epoch, base_sequence, record_count)


def build_batch(
    records: Sequence[ProducerRecord],
    *,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
    now_ms: int = 0,
) -> bytes:
    """Encode one v2 batch; records without a timestamp get `now_ms`."""
    if not records:
        raise ValueError("a batch holds at least one record")
    timestamps = [r.timestamp if r.timestamp >= 0 else now_ms for r in records]
    base_ts = timestamps[0]
    body = bytearray()
    for i, (rec, ts) in enumerate(zip(records, timestamps, strict=True)):
        encode_record(body, i, ts - base_ts, rec.key, rec.value, rec.headers)
    return assemble_batch(
        body, len(records), base_ts, max(timestamps), base_offset=base_offset, compression=compression,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch, timestamp_type=timestamp_type,
        is_transactional=is_transactional, is_control=is_control,
    )


def decode_records(batch: bytes | bytearray | memoryview, header: BatchHeader | None = None) -> list[Record]:
    """Decode the records of one batch (per-record work: for clients and tools, not the broker)."""
    if header is None:
        header = parse_header(batch)
    return [Record(r[2], r[3], r[5], r[6], r[7]) for r in decode_record_tuples(bytes(batch), 0, header)]


def serialized_header_size(headers: Sequence[Header]) -> int:
    """kafka-python's serialized_header_size: the bytes of header keys and values, -1 without headers."""
    if not headers:
        return -1
    return sum(len(k.encode("utf-8")) + (len(v) if v is not None else 0) for k, v in headers)


def decode_record_tuples(buf: bytes, start: int, header: BatchHeader, record_class: type[tuple[Any, ...]] = tuple,
                         topic: str = "", partition: int = -1, min_offset: int = 0) -> list[Any]:
    """The records of the batch at `start` in `buf` at or after `min_offset`, as `record_class` tuples.

    Each tuple is kafka-python's ConsumerRecord shape: (topic, partition, offset,
    timestamp, timestamp_type, key, value, headers, leader_epoch, key_size,
    value_size, header_size), sizes -1 when null; `record_class` is a NamedTuple
    of that shape (the consumer's ConsumerRecord) or plain tuple.

    This is every consumer's hot loop, so it makes no call per field: varints
    of one or two bytes (nearly all lengths and deltas) are decoded inline, each
    as the same four lines, and longer ones go through read_raw_varint. Lengths
    are read without zig-zag decoding: an odd raw value is a negative length,
    which Kafka reads as null for keys and values. Uncompressed records are read
    where they are in `buf`, not copied out first (slices of bytes are bytes in
    one copy).
    """
    codec = header.compression
    if codec == CompressionType.NONE:
        data = buf
        pos = start + HEADER_SIZE
        end = start + header.size
    else:
        data = decompress(codec, memoryview(buf)[start + HEADER_SIZE : start + header.size])
        pos = 0
        end = len(data)
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    timestamp_type = 0 if log_append_time is None else 1
    epoch = header.partition_leader_epoch
    new_record = tuple.__new__
    out: list[Any] = []
    append = out.append
    try:
        for _ in range(header.record_count):
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                b, pos = read_raw_varint(data, pos)
            record_end = pos + (b >> 1)
            if b & 1 or record_end > end:
                raise InvalidRecordError(f"record length {(b >> 1) ^ -(b & 1)} runs past the batch end")
            pos += 1  # the record attributes, unused in v2
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                b, pos = read_raw_varint(data, pos)
            timestamp = base_ts + ((b >> 1) ^ -(b & 1)) if log_append_time is None else log_append_time
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                b, pos = read_raw_varint(data, pos)
            offset = base_offset + ((b >> 1) ^ -(b & 1))
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                b, pos = read_raw_varint(data, pos)
            if b & 1:
                key = None
                key_size = -1
            else:
                key_size = b >> 1
                key = data[pos : pos + key_size]
                pos += key_size
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                b, pos = read_raw_varint(data, pos)
            if b & 1:
                value = None
                value_size = -1
            else:
                value_size = b >> 1
                value = data[pos : pos + value_size]
                pos += value_size
            if data[pos] == 0:
                headers: tuple[Header, ...] = ()
                header_size = -1
                pos += 1
            else:
                headers, pos = decode_headers(data, pos)
                header_size = serialized_header_size(headers)
            if pos != record_end:
                raise InvalidRecordError(f"record at offset {offset} ends at {pos}, its length says {record_end}")
            if offset >= min_offset:
                append(new_record(record_class, (topic, partition, offset, timestamp, timestamp_type, key, value,
                                                 headers, epoch, key_size, value_size, header_size)))
    except (IndexError, UnicodeDecodeError) as exc:
        raise InvalidRecordError(f"malformed record in batch at baseOffset {base_offset}: {exc}") from exc
    if pos != end:
        raise InvalidRecordError(f"{end - pos} bytes left after the last record of batch {base_offset}")
    return out


def first_null_key_offset(buf: bytes | bytearray | memoryview, start: int, header: BatchHeader) -> int | None:
    """The offset delta of the first record without a key in the batch at `start`, or None if all have one.

    A compacted topic refuses keyless records (Kafka's LogValidator), so a leader
    must look at every record of such a topic: this reads only each record's
    length and its first three fields, then jumps to the next record.
    """
    codec = header.compression
    if codec == CompressionType.NONE:
        data: bytes | memoryview = buf if isinstance(buf, memoryview) else memoryview(buf)
        pos = start + HEADER_SIZE
    else:
        data = decompress(codec, memoryview(buf)[start + HEADER_SIZE : start + header.size])
        pos = 0
    try:
        for _ in range(header.record_count):
            length, pos = read_varint(data, pos)
            record_end = pos + length
            _, field = read_varint(data, pos + 1)  # past attributes: timestampDelta
            offset_delta, field = read_varint(data, field)
            key_length, _ = read_varint(data, field)
            if key_length < 0:
                return offset_delta
            pos = record_end
    except IndexError as exc:
        raise InvalidRecordError(f"malformed record in batch at baseOffset {header.base_offset}: {exc}") from exc
    return None


def decode_headers(data: bytes, pos: int) -> tuple[tuple[Header, ...], int]:
    count, pos = read_varint(data, pos)
    headers: list[Header] = []
    for _ in range(count):
        hklen, pos = read_varint(data, pos)
        hkey = data[pos : pos + hklen].decode("utf-8")
        pos += hklen
        hvlen, pos = read_varint(data, pos)
        hvalue = None
        if hvlen >= 0:
            hvalue = data[pos : pos + hvlen]
            pos += hvlen
        headers.append((hkey, hvalue))
    return tuple(headers), pos


def iter_batches(buf: bytes | bytearray | memoryview, validate: bool = True,
                 allow_gaps: bool = False) -> Iterator[RecordBatch]:
    """Decode every batch in a buffer of back-to-back batches (a fetch response, a segment)."""
    view = memoryview(buf)
    for pos, header in iter_headers(view, validate, allow_gaps):
        yield RecordBatch(header, decode_records(view[pos : pos + header.size], header))


# --------------------------------------------------------------------------- control records (transaction markers)

# A control record's key is (version int16, type int16) and an end-transaction marker's value is (version int16,
# coordinatorEpoch int32), both version 0: Kafka's ControlRecordType and EndTransactionMarker.
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VALUE_VERSION = 0


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


def build_end_txn_marker(producer_id: int, producer_epoch: int, control_type: ControlRecordType,
                         coordinator_epoch: int, timestamp: int, *, base_offset: int = 0,
                         partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A transaction marker batch (Kafka's MemoryRecords.withEndTransactionMarker): transactional and control,
    uncompressed, no sequence, one record whose key says COMMIT or ABORT and whose value the coordinator epoch."""
    key = _CONTROL_KEY.pack(CONTROL_RECORD_KEY_VERSION, control_type)
    value = _MARKER_VALUE.pack(END_TXN_MARKER_VALUE_VERSION, coordinator_epoch)
    return build_batch([ProducerRecord(value, key, timestamp)], base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                       partition_leader_epoch=partition_leader_epoch, is_transactional=True, is_control=True)


class EndTxnMarker(NamedTuple):
    control_type: ControlRecordType
    coordinator_epoch: int


def read_end_txn_marker(buf: bytes | bytearray | memoryview, start: int, header: BatchHeader) -> EndTxnMarker | None:
    """The marker a control batch at `start` carries, or None for a control record of another type (Kafka skips
    those: a newer broker's, e.g. KRaft's). One record decoded per control batch, never per data record."""
    record = decode_record_tuples(bytes(memoryview(buf)[start:start + header.size]), 0, header)[0]
    key, value = record[5], record[6]
    if key is None or len(key) < _CONTROL_KEY.size:
        raise InvalidRecordError(f"control batch at offset {header.base_offset} has a key of"
                                 f" {0 if key is None else len(key)} bytes")
    _version, type_id = _CONTROL_KEY.unpack_from(key)
    if type_id not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    if value is None or len(value) < _MARKER_VALUE.size:
        raise InvalidRecordError(f"end transaction marker at offset {header.base_offset} has a value of"
                                 f" {0 if value is None else len(value)} bytes")
    _version, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    return EndTxnMarker(ControlRecordType(type_id), coordinator_epoch)


def has_transactional_batch(buf: bytes | bytearray | memoryview) -> bool:
    """Whether any batch in a produce request's records is transactional (Kafka's
    ProduceRequest.hasTransactionalRecords)."""
    return _any_batch(buf, lambda attributes: bool(attributes & TRANSACTIONAL_MASK))


def has_zstd_batch(buf: bytes | bytearray | memoryview) -> bool:
    """Whether any batch in a produce request's records is zstd-compressed (ProduceRequest.validateRecords refuses
    them below Produce v7)."""
    return _any_batch(buf, lambda attributes: attributes & COMPRESSION_MASK == CompressionType.ZSTD)


def _any_batch(buf: bytes | bytearray | memoryview, test: Callable[[int], bool]) -> bool:
    """Whether any batch's attributes pass `test`, by each batch's header alone; malformed bytes end the walk (the
    log refuses them)."""
    pos = 0
    while len(buf) - pos >= HEADER_SIZE:
        if test(_INT16.unpack_from(buf, pos + ATTRIBUTES_POS)[0]):
            return True
        _offset, length = read_offset_and_length(buf, pos)
        if length < MIN_BATCH_LENGTH:
            return False
        pos += LOG_OVERHEAD + length
    return False

"""A topic's `compression.type` applied to a producer's batch (Kafka's LogValidator when the target codec
differs from the batch's: validateMessagesAndAssignOffsetsCompressed with in-place assignment off).

A v2 batch's records are the same bytes compressed or not: the codec wraps the whole records section. So a batch
is recompressed as one block (decompress, compress with the target codec) under a new header carrying the new
codec, length and CRC; producer id, epoch, sequence, timestamps and record count are kept. Kafka re-encodes
each record instead; the cost here is per byte of the batch, paid only on topics whose compression.type is
neither `producer` nor the codec the producer chose.
"""

from __future__ import annotations

from common.record import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    CRC_POS,
    HEADER_SIZE,
    LENGTH_POS,
    LOG_OVERHEAD,
    BatchHeader,
    CompressionType,
    compress,
    crc32c,
    decompress,
    parse_header,
)

# compression.type's values (Kafka's BrokerCompressionCodec): a codec, or `producer` (keep the producer's).
PRODUCER = "producer"
UNCOMPRESSED = "uncompressed"
TOPIC_CODECS = {UNCOMPRESSED: CompressionType.NONE, "gzip": CompressionType.GZIP, "snappy": CompressionType.SNAPPY,
                "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}
COMPRESSION_TYPES = (UNCOMPRESSED, "zstd", "lz4", "snappy", "gzip", PRODUCER)  # Kafka's order, as it lists them


def target_codec(compression_type: str) -> CompressionType | None:
    """The codec a topic's compression.type imposes; None for `producer` (batches kept as written)."""
    return None if compression_type == PRODUCER else TOPIC_CODECS[compression_type]


def recompress_batch(batch: bytes | bytearray | memoryview, target: CompressionType) -> bytes:
    """One whole v2 batch (already validated) re-encoded with `target`; CorruptMessageError if its records do
    not decompress."""
    header = parse_header(batch)
    view = memoryview(batch)
    records = decompress(header.compression, view[HEADER_SIZE:header.size])
    payload = compress(target, records)
    out = bytearray(view[:HEADER_SIZE])
    out[LENGTH_POS:LENGTH_POS + 4] = (HEADER_SIZE - LOG_OVERHEAD + len(payload)).to_bytes(4, "big")
    out[ATTRIBUTES_POS + 1] = (header.attributes & ~COMPRESSION_MASK & 0xFF) | int(target)
    out += payload
    out[CRC_POS:CRC_POS + 4] = crc32c(memoryview(out)[ATTRIBUTES_POS:]).to_bytes(4, "big")
    return bytes(out)


def recompress_batches(buf: bytes | bytearray | memoryview, headers: list[BatchHeader],
                       target: CompressionType) -> bytearray:
    """Back-to-back batches (whose validated headers are `headers`) with every one not already in `target`
    recompressed; a new buffer the leader may patch offsets into."""
    view = memoryview(buf)
    out = bytearray()
    position = 0
    for header in headers:
        batch = view[position:position + header.size]
        out += batch if header.compression == target else recompress_batch(batch, target)
        position += header.size
    return out

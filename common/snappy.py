"""Snappy for RecordBatch v2 (compression codec 2), as Kafka's clients write and read it.

The Java client compresses a batch through xerial's SnappyOutputStream: a
16-byte header (magic `\\x82SNAPPY\\x00`, version 1, minimum compatible version
1) and then blocks of at most 32 KiB of input, each a big-endian int32 length
followed by that many bytes of raw snappy. librdkafka writes raw snappy, one
block with no framing. Kafka reads both (KafkaLZ4/SnappyInputStream sniff the
magic), so decompress() does too; compress() writes the Java client's framing,
which every Kafka reader accepts.

The snappy block format itself comes from cramjam (Rust bindings to the snappy
crate), the library python-snappy is built on.
"""

from __future__ import annotations

import struct

import cramjam

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
# xerial's SnappyOutputStream.DEFAULT_BLOCK_SIZE: how much input goes into one raw snappy block.
XERIAL_BLOCK_SIZE = 32 * 1024
_BLOCK_LENGTH = struct.Struct(">i")


class SnappyError(ValueError):
    """Bytes that are not snappy (raw or xerial-framed)."""


def compress(data: bytes) -> bytes:
    """xerial framing around raw snappy blocks of at most 32 KiB of input (the Java client's output)."""
    out = bytearray(_XERIAL_HEADER)
    view = memoryview(data)
    for start in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start:start + XERIAL_BLOCK_SIZE])
        out += _BLOCK_LENGTH.pack(len(block))
        out += block
    return bytes(out)


def decompress(data: bytes | memoryview) -> bytes:
    """Raw snappy (librdkafka) or xerial-framed snappy (the Java client): whichever `data` is."""
    data = bytes(data)
    try:
        if not data.startswith(XERIAL_MAGIC) or len(data) < len(_XERIAL_HEADER):
            return bytes(cramjam.snappy.decompress_raw(data))
        out = bytearray()
        position = len(_XERIAL_HEADER)
        while position < len(data):
            if position + _BLOCK_LENGTH.size > len(data):
                raise SnappyError(f"truncated xerial block length at byte {position}")
            (length,) = _BLOCK_LENGTH.unpack_from(data, position)
            position += _BLOCK_LENGTH.size
            if length < 0 or position + length > len(data):
                raise SnappyError(f"xerial block of {length} bytes at byte {position} overruns the data")
            out += cramjam.snappy.decompress_raw(data[position:position + length])
            position += length
        return bytes(out)
    except cramjam.DecompressionError as exc:
        raise SnappyError(f"invalid snappy data: {exc}") from exc

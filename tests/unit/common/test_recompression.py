"""A batch recompressed to a topic's compression.type (Kafka's LogValidator with a target codec): the same
records, header fields and timestamps under the new codec, with a CRC that validates."""

from __future__ import annotations

import pytest

from common.recompression import recompress_batch, recompress_batches, target_codec
from common.record import (
    CompressionType,
    ProducerRecord,
    TimestampType,
    build_batch,
    decode_records,
    iter_headers,
    validate_batch,
)

RECORDS = [ProducerRecord(f"value-{i}".encode() * 20, f"k{i}".encode(), 1_000 + i, (("h", b"x"),))
           for i in range(50)]


def batch(codec: CompressionType) -> bytes:
    return build_batch(RECORDS, compression=codec, producer_id=7, producer_epoch=2, base_sequence=40,
                       timestamp_type=TimestampType.LOG_APPEND_TIME)


@pytest.mark.parametrize("source", list(CompressionType))
@pytest.mark.parametrize("target", list(CompressionType))
def test_a_recompressed_batch_keeps_its_records_and_header_under_the_new_codec(
        source: CompressionType, target: CompressionType) -> None:
    original = validate_batch(batch(source))
    out = recompress_batch(batch(source), target)
    header = validate_batch(out)
    assert header.compression is target and header.size == len(out)
    assert header._replace(batch_length=0, crc=0, attributes=0) == \
        original._replace(batch_length=0, crc=0, attributes=0)
    assert header.attributes & ~0x07 == original.attributes & ~0x07  # LogAppendTime, no other flag lost
    assert decode_records(out) == decode_records(batch(source))


def test_only_batches_in_another_codec_are_recompressed() -> None:
    gzip, none = batch(CompressionType.GZIP), batch(CompressionType.NONE)
    buf = gzip + none
    headers = [header for _, header in iter_headers(buf)]
    out = recompress_batches(buf, headers, CompressionType.GZIP)
    assert bytes(out[:len(gzip)]) == gzip
    assert [h.compression for _, h in iter_headers(out)] == [CompressionType.GZIP, CompressionType.GZIP]


def test_producer_keeps_the_producers_codec() -> None:
    assert target_codec("producer") is None
    assert target_codec("uncompressed") is CompressionType.NONE and target_codec("zstd") is CompressionType.ZSTD

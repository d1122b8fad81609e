"""The codec's fast paths that the client leans on (table varints, inline decoding), against kafka-python.

tests/unit/common/test_record.py covers the format; these cover the edges of the
shortcuts: varints of one, two and three bytes, negative timestamp deltas,
offset deltas past the table, and batches built record by record.
"""

from __future__ import annotations

import os

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from common import record as rec
from common.record import CompressionType, ProducerRecord


@pytest.mark.parametrize("n", [0, 1, 63, 64, 4095, 4096, 8191, 8192, 16383, 16384, 1 << 20, -1, -65, -(1 << 40)])
def test_varint_bytes_matches_write_varint(n: int) -> None:
    out = bytearray()
    rec.write_varint(out, n)
    assert rec.varint_bytes(n) == bytes(out)
    assert rec.read_varint(rec.varint_bytes(n), 0) == (n, len(out))


@pytest.mark.parametrize("value_size", [0, 50, 63, 64, 200, 8000, 8192, 20000, 70000])
def test_record_sizes_across_varint_widths_match_kafka_python(value_size: int) -> None:
    value = os.urandom(value_size)
    records = [ProducerRecord(value, b"k" * (i % 70), 1_000_000 + (i % 3) * 5000 - 2000) for i in range(5)]
    batch = rec.build_batch(records, base_offset=10)
    theirs = [(r.offset, r.timestamp, r.key, r.value) for r in DefaultRecordBatch(batch)]
    ours = [(r.offset, r.timestamp, r.key, r.value) for r in rec.decode_records(batch)]
    assert ours == theirs == [(10 + i, p.timestamp, p.key, p.value) for i, p in enumerate(records)]


def test_offset_deltas_beyond_the_small_varint_table() -> None:
    records = [ProducerRecord(b"%d" % i, None, 5) for i in range(10_000)]
    decoded = rec.decode_records(rec.build_batch(records))
    assert [r.offset for r in decoded] == list(range(10_000))
    assert decoded[9_999].value == b"9999"


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4,
                                   CompressionType.ZSTD], ids=lambda c: c.name)
def test_kafka_python_batches_with_wide_varints_decode(codec: CompressionType) -> None:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=int(codec), is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 24)
    values = [os.urandom(size) for size in (0, 10, 100, 5000, 9000, 30000)]
    for i, value in enumerate(values):
        builder.append(i * 3000, timestamp=2_000_000 - i * 100_000, key=None if i % 2 else b"key",
                       value=value, headers=[(f"h{i}", b"x" * i)] if i % 3 == 0 else [])
    decoded = rec.decode_records(bytes(builder.build()))
    assert [r.offset for r in decoded] == [i * 3000 for i in range(6)]
    assert [r.timestamp for r in decoded] == [2_000_000 - i * 100_000 for i in range(6)]
    assert [r.value for r in decoded] == values
    assert decoded[3].headers == (("h3", b"xxx"),) and decoded[1].key is None and decoded[0].key == b"key"


def test_negative_key_length_other_than_minus_one_reads_as_null_like_kafka() -> None:
    # DefaultRecord.readFrom treats any negative key size as null.
    body = bytearray(b"\x00\x00\x00")  # attributes, timestamp delta 0, offset delta 0
    body += rec.varint_bytes(-2) + rec.varint_bytes(1) + b"v" + b"\x00"
    records = rec.varint_bytes(len(body)) + bytes(body)
    batch = rec.assemble_batch(records, 1, 7, 7)
    (decoded,) = rec.decode_records(batch)
    assert (decoded.key, decoded.value) == (None, b"v")


def test_encode_record_reports_its_size() -> None:
    out = bytearray(b"xx")
    size = rec.encode_record(out, 3, 0, b"k", b"value", (("a", None),))
    assert len(out) == 2 + size
    assert rec.read_varint(bytes(out), 2) == (size - 1, 3)

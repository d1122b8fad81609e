"""RecordBatch v2 codec: round trips, Kafka's field layout, and byte compatibility with kafka-python."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from common import record as rec
from common.record import CompressionType, ProducerRecord, TimestampType, build_batch, has_more_than_one_batch
from proto.errors import ErrorCode, KafkaError

SUPPORTED = list(CompressionType)
KAFKA_PYTHON_CODEC = {
    CompressionType.NONE: DefaultRecordBatch.CODEC_NONE,
    CompressionType.GZIP: DefaultRecordBatch.CODEC_GZIP,
    CompressionType.SNAPPY: DefaultRecordBatch.CODEC_SNAPPY,
    CompressionType.LZ4: DefaultRecordBatch.CODEC_LZ4,
    CompressionType.ZSTD: DefaultRecordBatch.CODEC_ZSTD,
}


def sample(n: int = 3) -> list[ProducerRecord]:
    return [
        ProducerRecord(f"value-{i}".encode(), f"key-{i}".encode() if i % 2 else None, 1_700_000_000_000 + i,
                       (("trace", f"t{i}".encode()), ("empty", None)) if i % 3 == 0 else ())
        for i in range(n)
    ]


def test_header_layout_matches_kafka() -> None:
    batch = rec.build_batch(sample(3), base_offset=7, producer_id=42, producer_epoch=3, base_sequence=11,
                            partition_leader_epoch=5)
    base_offset, length, epoch, magic, crc = struct.unpack_from(">qiibI", batch, 0)
    assert (base_offset, length, epoch, magic) == (7, len(batch) - 12, 5, 2)
    assert crc == rec.crc32c(batch[21:])
    attrs, lod, first_ts, max_ts, pid, pepoch, seq, count = struct.unpack_from(">hiqqqhii", batch, 21)
    assert (attrs, lod, first_ts, max_ts) == (0, 2, 1_700_000_000_000, 1_700_000_000_002)
    assert (pid, pepoch, seq, count) == (42, 3, 11, 3)
    assert rec.HEADER_SIZE == 61


@pytest.mark.parametrize("codec", SUPPORTED, ids=lambda c: c.name)
def test_round_trip_every_codec(codec: CompressionType) -> None:
    records = sample(20)
    batch = rec.build_batch(records, base_offset=100, compression=codec)
    header = rec.validate_batch(batch)
    assert header.compression == codec
    decoded = rec.decode_records(batch)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (100 + i, p.timestamp, p.key, p.value, p.headers) for i, p in enumerate(records)
    ]


@pytest.mark.parametrize("codec", SUPPORTED, ids=lambda c: c.name)
def test_our_batches_decode_with_kafka_python(codec: CompressionType) -> None:
    records = sample(10)
    batch = rec.build_batch(records, base_offset=5, compression=codec, producer_id=9, producer_epoch=1,
                            base_sequence=0)
    theirs = DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    assert (theirs.base_offset, theirs.producer_id, theirs.records_count) == (5, 9, 10)
    got = [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in theirs]
    assert got == [(5 + i, p.timestamp, p.key, p.value, list(p.headers)) for i, p in enumerate(records)]


@pytest.mark.parametrize("codec", SUPPORTED, ids=lambda c: c.name)
def test_kafka_python_batches_decode_with_ours(codec: CompressionType) -> None:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=KAFKA_PYTHON_CODEC[codec], is_transactional=False,
                                        producer_id=77, producer_epoch=2, base_sequence=40, batch_size=1 << 20)
    for i in range(15):
        builder.append(i, timestamp=1_600_000_000_000 + i, key=None if i % 2 else b"k%d" % i,
                       value=b"v" * i, headers=[("h", b"x")] if i == 3 else [])
    batch = bytes(builder.build())
    header = rec.validate_batch(batch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence) == (77, 2, 40, 54)
    records = rec.decode_records(batch)
    assert [r.offset for r in records] == list(range(15))
    assert records[3].headers == (("h", b"x"),)
    assert records[1].key is None and records[2].key == b"k2" and records[4].value == b"vvvv"


def test_patch_offsets_keeps_crc_valid() -> None:
    batch = bytearray(rec.build_batch(sample(4)))
    rec.patch_base_offset_and_epoch(batch, 0, 1_000_000, 9)
    header = rec.validate_batch(batch)
    assert (header.base_offset, header.partition_leader_epoch, header.last_offset) == (1_000_000, 9, 1_000_003)


def test_log_append_time_rewrites_header_only() -> None:
    batch = bytearray(rec.build_batch(sample(2)))
    rec.set_log_append_time(batch, 0, len(batch), 123_456)
    header = rec.validate_batch(batch)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in rec.decode_records(batch)] == [123_456, 123_456]


def test_flipped_byte_is_corrupt_message() -> None:
    batch = bytearray(rec.build_batch(sample(3)))
    batch[70] ^= 0xFF
    with pytest.raises(KafkaError) as err:
        rec.validate_batch(batch)
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE
    assert "CRC" in str(err.value)


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda b: b[:40], ErrorCode.CORRUPT_MESSAGE),  # torn header
        (lambda b: b[:-3], ErrorCode.CORRUPT_MESSAGE),  # torn body
        (lambda b: b[:16] + b"\x01" + b[17:], ErrorCode.CORRUPT_MESSAGE),  # magic 1
        (lambda b: b[:8] + struct.pack(">i", 10) + b[12:], ErrorCode.CORRUPT_MESSAGE),  # length below header
    ],
)
def test_structural_damage_has_precise_code(mutate, code) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaError) as err:
        rec.validate_batch(mutate(rec.build_batch(sample(3))))
    assert err.value.code == code


def _with_fields(batch: bytes, fmt: str, pos: int, *values: int) -> bytes:
    """Rewrite header fields inside the CRC's range and fix the CRC, as a hostile producer could."""
    out = bytearray(batch)
    struct.pack_into(fmt, out, pos, *values)
    struct.pack_into(">I", out, rec.CRC_POS, rec.crc32c(out[rec.ATTRIBUTES_POS:]))
    return bytes(out)


def test_count_and_last_offset_delta_disagree_is_invalid_record() -> None:
    batch = _with_fields(rec.build_batch(sample(3)), ">i", 23, 7)
    with pytest.raises(KafkaError) as err:
        rec.validate_batch(batch)
    assert err.value.code == ErrorCode.INVALID_RECORD


def test_unknown_codec_is_unsupported_compression_type() -> None:
    batch = _with_fields(rec.build_batch(sample(1)), ">h", rec.ATTRIBUTES_POS, 6)
    with pytest.raises(KafkaError) as err:
        rec.validate_batch(batch)
    assert err.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_malformed_records_with_valid_crc_fail_to_decode_precisely() -> None:
    batch = bytearray(rec.build_batch([ProducerRecord(b"abc")]))
    batch[rec.HEADER_SIZE] = 0x7E  # record length varint: far past the batch end
    struct.pack_into(">I", batch, rec.CRC_POS, rec.crc32c(batch[rec.ATTRIBUTES_POS:]))
    rec.validate_batch(batch)  # header and CRC are fine: the broker's per-batch check passes
    with pytest.raises(KafkaError) as err:
        rec.decode_records(batch)
    assert err.value.code == ErrorCode.INVALID_RECORD


def test_iter_headers_walks_back_to_back_batches() -> None:
    batches = [rec.build_batch(sample(n), base_offset=off) for n, off in ((1, 0), (5, 1), (2, 6))]
    positions = [(pos, h.base_offset, h.last_offset) for pos, h in rec.iter_headers(b"".join(batches))]
    sizes = [len(b) for b in batches]
    assert positions == [(0, 0, 0), (sizes[0], 1, 5), (sizes[0] + sizes[1], 6, 7)]


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_varint_round_trip(n: int) -> None:
    out = bytearray()
    rec.write_varint(out, n)
    assert len(out) == rec.varint_size(n)
    assert rec.read_varint(bytes(out), 0) == (n, len(out))


record_strategy = st.builds(
    ProducerRecord,
    value=st.one_of(st.none(), st.binary(max_size=300)),
    key=st.one_of(st.none(), st.binary(max_size=40)),
    timestamp=st.integers(min_value=0, max_value=1 << 45),
    headers=st.lists(st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))),
                     max_size=3).map(tuple),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(record_strategy, min_size=1, max_size=30), st.sampled_from(SUPPORTED))
def test_round_trip_property(records: list[ProducerRecord], codec: CompressionType) -> None:
    batch = rec.build_batch(records, compression=codec)
    rec.validate_batch(batch)
    decoded = rec.decode_records(batch)
    assert [(r.key, r.value, r.timestamp, r.headers) for r in decoded] == [
        (p.key, p.value, p.timestamp, p.headers) for p in records
    ]


def test_more_than_one_batch_is_told_by_the_first_batch_length_alone() -> None:
    one = build_batch([ProducerRecord(b"a", b"k"), ProducerRecord(b"b", b"k")])
    assert not has_more_than_one_batch(one)
    assert has_more_than_one_batch(one + one)
    assert has_more_than_one_batch(one + one[:12]) and not has_more_than_one_batch(one + one[:11])
    assert not has_more_than_one_batch(b"") and not has_more_than_one_batch(one[:8])

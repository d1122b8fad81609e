"""Snappy for RecordBatch v2: the Java client's xerial framing out, raw (librdkafka) and xerial in."""

from __future__ import annotations

import struct

import cramjam
import pytest
from kafka.codec import snappy_decode, snappy_encode

from common import record as rec
from common import snappy
from common.record import CompressionType, ProducerRecord
from proto.errors import ErrorCode, KafkaError

# Several xerial blocks: more than 32 KiB of input, and not a multiple of it.
PAYLOAD = b"".join(b"record %d of a snappy batch;" % i for i in range(4000))


def test_compress_writes_the_java_clients_xerial_framing() -> None:
    framed = snappy.compress(PAYLOAD)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    position, blocks = 16, []
    while position < len(framed):
        (length,) = struct.unpack_from(">i", framed, position)
        blocks.append(bytes(cramjam.snappy.decompress_raw(framed[position + 4:position + 4 + length])))
        position += 4 + length
    assert [len(b) for b in blocks] == [32768] * (len(PAYLOAD) // 32768) + [len(PAYLOAD) % 32768]
    assert b"".join(blocks) == PAYLOAD


def test_decompress_reads_raw_and_xerial_snappy_from_other_clients() -> None:
    assert snappy.decompress(bytes(cramjam.snappy.compress_raw(PAYLOAD))) == PAYLOAD  # librdkafka
    assert snappy.decompress(snappy_encode(PAYLOAD)) == PAYLOAD  # kafka-python, xerial as the Java client
    assert snappy.decompress(snappy_encode(PAYLOAD, xerial_compatible=False)) == PAYLOAD
    assert snappy_decode(snappy.compress(PAYLOAD)) == PAYLOAD


def test_raw_snappy_batch_from_librdkafka_decodes() -> None:
    records = [ProducerRecord(b"v%d" % i, None, 1_700_000_000_000 + i, ()) for i in range(5)]
    framed = rec.build_batch(records, compression=CompressionType.SNAPPY)
    header = rec.validate_batch(framed)
    body = snappy.decompress(framed[rec.HEADER_SIZE:])
    # The same batch as librdkafka writes it: raw snappy, no xerial header (the CRC is recomputed).
    raw = bytearray(framed[:rec.HEADER_SIZE] + bytes(cramjam.snappy.compress_raw(body)))
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    struct.pack_into(">I", raw, 17, rec.crc32c(bytes(raw[21:])))
    assert header.compression == CompressionType.SNAPPY
    assert [r.value for r in rec.decode_records(bytes(raw))] == [b"v%d" % i for i in range(5)]


@pytest.mark.parametrize("damaged", [
    b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 500) + b"short",  # a block longer than the data
    b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"\x00\x00",  # a torn block length
    b"this is not snappy at all",
])
def test_damaged_snappy_is_a_corrupt_message(damaged: bytes) -> None:
    records = [ProducerRecord(b"v", None, 1_700_000_000_000, ())]
    good = rec.build_batch(records, compression=CompressionType.SNAPPY)
    bad = bytearray(good[:rec.HEADER_SIZE] + damaged)
    struct.pack_into(">i", bad, 8, len(bad) - 12)
    struct.pack_into(">I", bad, 17, rec.crc32c(bytes(bad[21:])))
    with pytest.raises(KafkaError) as err:
        rec.decode_records(bytes(bad))
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE

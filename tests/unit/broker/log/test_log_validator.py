"""LogValidator: each rule an append applies to incoming batches, on plain bytes, and at the log that nothing is
written when one fails."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from log_helpers import make_batch, read_all

from broker.config.log_config import LogConfig
from broker.log.log import Log
from broker.log.log_validator import (
    AppendOrigin,
    analyze_and_validate_records,
    assign_offsets,
    recompress_to_topic_codec,
    validate_client_batches,
    validate_keys,
    validate_leader_append,
)
from broker.log.segment import BatchSpan
from common.record import (
    NO_TIMESTAMP,
    BatchHeader,
    CompressionType,
    ProducerRecord,
    TimestampType,
    build_batch,
    crc32c,
    iter_batches,
    iter_headers,
    validate_batch,
)
from proto.errors import (
    CorruptMessageError,
    ErrorCode,
    InvalidRecordError,
    KafkaError,
    MessageTooLargeError,
    RecordListTooLargeError,
    UnsupportedCompressionTypeError,
)
from proto.types import TopicPartition
from tests.fakes import FakeClock

OpenLog = Callable[..., Log]
TP = TopicPartition("orders", 3)
COMPACT = LogConfig(segment_bytes=300, cleanup_policy=("compact",))


@pytest.fixture
def open_log(tmp_path: Path) -> OpenLog:
    def opener(**settings: object) -> Log:
        config = {"segment_bytes": 2000, "index_interval_bytes": 200, "max_index_size": 400, **settings}
        return Log.open(tmp_path / "orders-3", LogConfig(**config), time=FakeClock())  # type: ignore[arg-type]
    return opener


def headers(request: bytes) -> list[BatchHeader]:
    return [header for _, header in iter_headers(request)]


def idempotent_batch(seq: int, n: int = 2, **flags: bool) -> bytes:
    return build_batch([ProducerRecord(b"s%d" % (seq + i)) for i in range(n)], producer_id=4000, producer_epoch=0,
                       base_sequence=seq, now_ms=1_000, **flags)


def corrupt(batch: bytes, at: int) -> bytes:
    damaged = bytearray(batch)
    damaged[at] ^= 0x01
    return bytes(damaged)


def with_header_field(batch: bytes, position: int, value: bytes) -> bytes:
    data = bytearray(batch)
    data[position:position + len(value)] = value
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    return bytes(data)


# ---------------------------------------------------------------------- each batch: structure, CRC, size


def test_every_header_comes_back_in_order_and_an_empty_request_has_none() -> None:
    request = make_batch(records=2, tag=1) + make_batch(records=3, tag=2)
    found = analyze_and_validate_records(memoryview(request), 1 << 20, TP)
    assert [(h.record_count, h.size) for h in found] == [(2, len(make_batch(records=2))),
                                                         (3, len(make_batch(records=3)))]
    assert analyze_and_validate_records(memoryview(b""), 1 << 20, TP) == []


def test_a_batch_of_exactly_max_message_bytes_passes_and_one_byte_more_is_too_large() -> None:
    batch = make_batch()
    assert len(analyze_and_validate_records(memoryview(batch), len(batch), TP)) == 1
    with pytest.raises(MessageTooLargeError) as err:
        analyze_and_validate_records(memoryview(batch), len(batch) - 1, TP)
    assert err.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert f"append to {TP} is {len(batch)} bytes" in str(err.value)


def test_offsets_skipping_inside_a_batch_pass_only_where_gaps_are_allowed() -> None:
    # Three records whose batch claims five offsets: what the cleaner leaves in a compacted log.
    gapped = memoryview(with_header_field(make_batch(records=3), 23, (4).to_bytes(4, "big")))
    with pytest.raises(InvalidRecordError, match="3 records but lastOffsetDelta 4"):
        analyze_and_validate_records(gapped, 1 << 20, TP)
    (header,) = analyze_and_validate_records(gapped, 1 << 20, TP, allow_gaps=True)
    assert (header.record_count, header.last_offset) == (3, 4)


# ---------------------------------------------------------------------- a leader's request


def test_a_request_of_exactly_segment_bytes_passes_and_one_byte_more_is_too_large() -> None:
    request = make_batch(tag=1) + make_batch(tag=2)
    view = memoryview(request)
    assert validate_leader_append(view, headers(request), segment_bytes=len(request), compacted=False,
                                  tp=TP) is False
    with pytest.raises(RecordListTooLargeError) as err:
        validate_leader_append(view, headers(request), segment_bytes=len(request) - 1, compacted=False, tp=TP)
    assert err.value.code == ErrorCode.RECORD_LIST_TOO_LARGE
    assert f"Message batch size is {len(request)} bytes in append to partition {TP}" in str(err.value)


def test_only_a_broker_writes_control_batches() -> None:
    request = make_batch() + idempotent_batch(0, is_control=True)
    with pytest.raises(InvalidRecordError) as err:
        validate_client_batches(headers(request), TP)
    assert err.value.code == ErrorCode.INVALID_RECORD
    view = memoryview(request)
    assert validate_leader_append(view, headers(request), segment_bytes=len(request), compacted=False, tp=TP,
                                  origin=AppendOrigin.COORDINATOR) is True


def test_a_client_writes_transactional_batches_with_a_producer_id_only() -> None:
    assert validate_client_batches(headers(idempotent_batch(0, is_transactional=True)), TP) is True
    without_producer = build_batch([ProducerRecord(b"v")], is_transactional=True)
    with pytest.raises(InvalidRecordError) as err:
        validate_client_batches(headers(without_producer), TP)
    assert err.value.code == ErrorCode.INVALID_RECORD


def test_a_request_is_idempotent_when_any_batch_carries_a_producer_id() -> None:
    assert validate_client_batches(headers(make_batch() + make_batch(tag=1)), TP) is False
    assert validate_client_batches(headers(make_batch() + idempotent_batch(0)), TP) is True


def test_every_record_of_a_compacted_topic_needs_a_key_in_every_batch() -> None:
    keyed = build_batch([ProducerRecord(b"a", b"k"), ProducerRecord(b"b", b"l")])
    keyless_second = build_batch([ProducerRecord(b"c", b"m"), ProducerRecord(b"d", None)])
    validate_keys(memoryview(keyed + keyed), headers(keyed + keyed), TP)
    request = keyed + keyless_second
    with pytest.raises(InvalidRecordError) as err:
        validate_keys(memoryview(request), headers(request), TP)
    assert str(err.value).endswith(f"Compacted topic cannot accept message without key in topic partition {TP}.")
    # Only a compacted topic asks.
    validate_leader_append(memoryview(request), headers(request), segment_bytes=1 << 20, compacted=False, tp=TP)
    with pytest.raises(InvalidRecordError):
        validate_leader_append(memoryview(request), headers(request), segment_bytes=1 << 20, compacted=True, tp=TP)


# ---------------------------------------------------------------------- offsets a leader assigns


def test_batches_in_another_codec_than_the_topics_are_recompressed_and_checked_again() -> None:
    """Kafka's LogValidator with a target codec: the request is kept as it is under `producer` or when every
    batch is in the codec already; otherwise each other batch is recompressed, and a batch recompression grew
    past max.message.bytes is MESSAGE_TOO_LARGE."""
    records = [ProducerRecord(bytes(range(256)) * 4, b"k")]
    gzip, raw = build_batch(records, compression=CompressionType.GZIP), build_batch(records)
    request = memoryview(gzip + raw)
    for target in (None, CompressionType.GZIP):
        view, _ = recompress_to_topic_codec(memoryview(gzip), headers(gzip), target, 10_000, TP)
        assert bytes(view) == gzip
    view, batches = recompress_to_topic_codec(request, headers(gzip + raw), CompressionType.ZSTD, 10_000, TP)
    assert [b.compression for b in batches] == [CompressionType.ZSTD] * 2 and not view.readonly
    assert [b.records for b in iter_batches(bytes(view))] == [b.records for b in iter_batches(gzip + raw)]
    with pytest.raises(MessageTooLargeError):
        recompress_to_topic_codec(memoryview(gzip), headers(gzip), CompressionType.NONE, len(gzip), TP)


def test_offsets_and_epoch_are_patched_without_touching_the_crc() -> None:
    request = make_batch(records=2, timestamp=100, tag=1) + idempotent_batch(0, n=3)
    sent = headers(request)
    view = memoryview(bytearray(request))
    spans, producer_positions = assign_offsets(view, sent, 40, 7, NO_TIMESTAMP)
    stamped = [validate_batch(view, 0), validate_batch(view, sent[0].size)]
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in stamped] == [(40, 41, 7), (42, 44, 7)]
    assert [h.crc for h in stamped] == [h.crc for h in sent]
    assert spans == [BatchSpan(41, sent[0].max_timestamp, sent[0].size),
                     BatchSpan(44, sent[1].max_timestamp, sent[1].size)]
    assert producer_positions == [sent[0].size]


def test_log_append_time_stamps_every_batch_and_its_span() -> None:
    request = make_batch(records=2, timestamp=5) + make_batch(records=2, timestamp=9)
    view = memoryview(bytearray(request))
    spans, _ = assign_offsets(view, headers(request), 0, 0, 123_456)
    assert [span.max_timestamp for span in spans] == [123_456, 123_456]
    stored = list(iter_batches(bytes(view)))
    assert all(b.header.timestamp_type == TimestampType.LOG_APPEND_TIME for b in stored)
    assert {r.timestamp for b in stored for r in b.records} == {123_456}


# ---------------------------------------------------------------------- at the log: nothing written on a refusal


def test_batch_larger_than_max_message_bytes_is_refused(open_log: OpenLog) -> None:
    small = make_batch()
    log = open_log(max_message_bytes=len(small))
    log.append_as_leader(small, 0)
    big = make_batch(value_size=11)
    with pytest.raises(MessageTooLargeError) as err:
        log.append_as_leader(small + big, 0)
    assert err.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert f"is {len(big)} bytes which exceeds the maximum configured value of {len(small)}" in str(err.value)
    assert log.log_end_offset == 3


def test_request_larger_than_a_segment_is_refused(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1000)
    request = make_batch(value_size=200) * 3
    assert len(request) > 1000
    with pytest.raises(RecordListTooLargeError, match="exceeds the maximum configured segment size of 1000"):
        log.append_as_leader(request, 0)
    assert (log.log_end_offset, log.size_in_bytes) == (0, 0)


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (corrupt(make_batch(tag=9), 80), CorruptMessageError),  # a record byte: CRC mismatch
        (make_batch(tag=9)[:-5], CorruptMessageError),  # torn batch at the end of the request
        (corrupt(make_batch(tag=9), 16), CorruptMessageError),  # magic 3
    ],
)
def test_a_bad_batch_anywhere_rejects_the_whole_request(open_log: OpenLog, bad: bytes, error: type) -> None:
    log = open_log()
    log.append_as_leader(make_batch(), 0)
    with pytest.raises(error):
        log.append_as_leader(make_batch(tag=1) + bad + make_batch(tag=2), 0)
    assert (log.log_end_offset, log.size_in_bytes) == (3, len(make_batch()))
    assert len(read_all(log)) == 1


def test_invalid_record_count_and_unknown_codec_get_their_own_codes(open_log: OpenLog) -> None:
    log = open_log()
    wrong_count = with_header_field(make_batch(records=3), 57, (4).to_bytes(4, "big"))
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(wrong_count, 0)
    codec_7 = with_header_field(make_batch(), 21, (7).to_bytes(2, "big"))
    with pytest.raises(UnsupportedCompressionTypeError):
        log.append_as_leader(codec_7, 0)
    assert log.log_end_offset == 0


def test_control_batches_from_clients_are_invalid(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=400), time=lambda: 1_000)
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(idempotent_batch(0, is_control=True), 0)
    assert err.value.code == ErrorCode.INVALID_RECORD
    assert log.log_end_offset == 0
    assert log.append_as_leader(idempotent_batch(0, is_transactional=True), 0).last_offset == 1


def test_a_compacted_topic_refuses_records_without_a_key(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", COMPACT, time=FakeClock())
    batch = build_batch([ProducerRecord(b"a", b"k"), ProducerRecord(b"b", None)])
    with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message without key") as e:
        log.append_as_leader(batch, 0)
    assert e.value.code is ErrorCode.INVALID_RECORD and log.log_end_offset == 0
    delete = Log.open(tmp_path / "d-0", LogConfig(), time=FakeClock())
    assert delete.append_as_leader(batch, 0).last_offset == 1

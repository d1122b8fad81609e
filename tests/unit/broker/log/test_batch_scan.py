"""scan_batches: the same batches whatever the chunk size, and the exact place where a file stops being batches."""

from __future__ import annotations

import pytest

from broker.log.batch_scan import scan_batches
from broker.log.checkpoint import EpochEntry, LeaderEpochCheckpointFile, OffsetCheckpointFile
from broker.log.index import OffsetPosition, TimestampOffset, decode_offset_index, decode_time_index
from common.record import HEADER_SIZE, ProducerRecord, build_batch
from proto.types import TopicPartition


def _segment(count: int) -> tuple[bytes, list[int]]:
    batches, positions, position = [], [], 0
    for i in range(count):
        batch = build_batch([ProducerRecord(b"v" * (10 + 37 * i))] * (i + 1), base_offset=i * 100)
        batches.append(batch)
        positions.append(position)
        position += len(batch)
    return b"".join(batches), positions


def _reader(data: bytes):
    return lambda pos, n: data[pos : pos + n]


@pytest.mark.parametrize("chunk_size", [1, HEADER_SIZE, 100, 1 << 20])
def test_every_batch_whatever_the_chunk_size(chunk_size: int) -> None:
    data, positions = _segment(6)
    scanned = list(scan_batches(_reader(data), len(data), chunk_size))
    assert [s.position for s in scanned] == positions
    assert [s.header.base_offset for s in scanned] == [i * 100 for i in range(6)]
    assert all(s.problem is None for s in scanned)
    assert b"".join(bytes(s.data) for s in scanned if s.data is not None) == data


def test_a_cut_batch_ends_the_scan_with_its_position() -> None:
    data, positions = _segment(3)
    cut = data[: positions[2] + 70]
    *whole, last = scan_batches(_reader(cut), len(cut), 64)
    assert [s.position for s in whole] == positions[:2]
    assert last.position == positions[2] and last.data is None
    declared = len(data) - positions[2]
    assert last.problem == f"batch at position {positions[2]} declares {declared} bytes but only 70 remain"


def test_a_short_tail_and_garbage_are_problems() -> None:
    data, _ = _segment(2)
    tail = list(scan_batches(_reader(data + b"\x01" * 10), len(data) + 10))[-1]
    assert tail.problem == f"10 bytes at position {len(data)} are too few for a batch header"
    garbage = list(scan_batches(_reader(data + bytes(80)), len(data) + 80))[-1]
    assert garbage.problem == f"no valid batch at position {len(data)} (magic 0, batchLength 0)"


def test_index_and_checkpoint_contents_decode_without_a_file() -> None:
    offsets = bytes.fromhex("00000005 00000100 00000009 00000200") + bytes(16)  # preallocated zero tail
    assert decode_offset_index(offsets, 1000) == [OffsetPosition(1005, 0x100), OffsetPosition(1009, 0x200)]
    times = (7).to_bytes(8, "big") + (3).to_bytes(4, "big")
    assert decode_time_index(times, 10) == [TimestampOffset(7, 13)]
    assert OffsetCheckpointFile("hw").parse(b"0\n1\norders 2 17\n") == {TopicPartition("orders", 2): 17}
    assert LeaderEpochCheckpointFile("e").parse(b"0\n2\n0 0\n3 40\n") == [EpochEntry(0, 0), EpochEntry(3, 40)]

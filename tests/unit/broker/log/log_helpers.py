"""Shared builders for the log engine's tests (batches, whole-log reads, a recording epoch cache, open files)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from broker.log.log import Log
from common.record import (
    CompressionType,
    ProducerRecord,
    RecordBatch,
    build_batch,
    iter_batches,
    iter_headers,
)


def make_batch(records: int = 3, value_size: int = 10, timestamp: int = 1_000, *, tag: int = 0,
               compression: CompressionType = CompressionType.NONE, base_offset: int = 0,
               partition_leader_epoch: int = -1) -> bytes:
    """A valid v2 batch of `records` records; `tag` makes its content recognisable."""
    return build_batch(
        [ProducerRecord(f"{tag}:{i}:".encode().ljust(value_size, b"x"), timestamp=timestamp + i)
         for i in range(records)],
        compression=compression,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
    )


def read_all(log: Log, start: int | None = None) -> list[RecordBatch]:
    """Every batch from `start` (default: the log start) to the log end, one read per segment."""
    offset = log.log_start_offset if start is None else start
    batches: list[RecordBatch] = []
    while offset < log.log_end_offset:
        got = list(iter_batches(log.read(offset, 1 << 30).records.read()))
        assert got, f"empty read at offset {offset} below the log end {log.log_end_offset}"
        batches += got
        offset = got[-1].header.next_offset
    return batches


def read_raw(log: Log) -> list[bytes]:
    """The bytes of every batch from the log start to the log end, as stored."""
    offset = log.log_start_offset
    out: list[bytes] = []
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30).records.read()
        headers = list(iter_headers(data))
        assert headers, f"empty read at offset {offset} below the log end {log.log_end_offset}"
        out += [data[position:position + header.size] for position, header in headers]
        offset = headers[-1][1].next_offset
    return out


def values(batches: list[RecordBatch]) -> list[bytes | None]:
    return [record.value for batch in batches for record in batch.records]


@dataclass
class RecordingEpochCache:
    """A LeaderEpochCache stand-in that keeps (epoch, start) entries and records every call."""

    entries: list[tuple[int, int]] = field(default_factory=list)
    calls: list[tuple[object, ...]] = field(default_factory=list)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int, log_end_offset: int | None = None) -> None:
        self.calls.append(("assign", epoch, start_offset))
        if not self.entries or self.entries[-1][0] != epoch:
            self.entries = [e for e in self.entries if e[0] < epoch and e[1] < start_offset]
            self.entries.append((epoch, start_offset))

    def truncate_from_end(self, end_offset: int) -> None:
        self.calls.append(("truncate_from_end", end_offset))
        self.entries = [e for e in self.entries if e[1] < end_offset]

    def truncate_from_start(self, start_offset: int) -> None:
        self.calls.append(("truncate_from_start", start_offset))

    def clear_and_flush(self) -> None:
        self.calls.append(("clear_and_flush",))
        self.entries = []

    def sync(self) -> None:
        self.calls.append(("sync",))


def open_files_under(directory: Path) -> list[str]:
    """The names (relative to `directory`) of the files this process holds open there, one per descriptor."""
    prefix = str(directory.resolve()) + os.sep
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed meanwhile
            continue
        if target.startswith(prefix):
            names.append(target[len(prefix):])
    return sorted(names)

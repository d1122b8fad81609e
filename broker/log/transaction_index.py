"""TransactionIndex: a segment's `.txnindex`, the aborted transactions whose marker is in that segment (Kafka's
kafka.log.TransactionIndex), so a READ_COMMITTED fetch can tell its consumer which records to drop.

Each entry is Kafka's AbortedTxn, version 0, 34 bytes, big-endian:

    version           int16   (0)
    producerId        int64
    firstOffset       int64   the transaction's first data offset in this partition
    lastOffset        int64   its ABORT marker's offset
    lastStableOffset  int64   the partition's LSO once the marker was written

Entries are appended in marker order, so lastOffset only grows. The file is created on the first abort (most
segments never have one), truncated with the log, deleted and renamed with its segment, and rebuilt by
recovery from the log's markers. No descriptor is kept: the file is read on the first look at its entries
(Kafka's lazy `maybeChannel`) and opened for each append. Not thread-safe: the log calls it under its own lock.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import NamedTuple

from broker.log.index import CorruptIndexError

__all__ = ["ABORTED_TXN_SIZE", "AbortedTxn", "TransactionIndex", "collect_aborted_txns", "decode_entries"]

ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, *self)


def decode_entries(data: bytes, path: Path | str = "") -> list[AbortedTxn]:
    """Every whole entry of a `.txnindex`'s bytes (a torn tail, from a crash mid-append, is left out)."""
    entries = []
    for position in range(0, len(data) - len(data) % ABORTED_TXN_SIZE, ABORTED_TXN_SIZE):
        version, *fields = _ENTRY.unpack_from(data, position)
        if version != ABORTED_TXN_VERSION:
            raise CorruptIndexError(f"transaction index {path} has an entry of unknown version {version} at byte"
                                    f" {position}")
        entries.append(AbortedTxn(*fields))
    return entries


def collect_aborted_txns(entries: Iterable[AbortedTxn], fetch_offset: int, upper_bound_offset: int
                         ) -> tuple[list[AbortedTxn], bool]:
    """The aborted transactions overlapping [fetch_offset, upper_bound_offset), and whether the search may stop
    here: once an entry's LSO is at or past the upper bound, every transaction that began below the bound was
    closed by then, so no later marker can belong to one (Kafka's TransactionIndex.collectAbortedTxns)."""
    found = []
    for entry in entries:
        if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
            found.append(entry)
        if entry.last_stable_offset >= upper_bound_offset:
            return found, True
    return found, False


class TransactionIndex:
    """One segment's `.txnindex`: its entries in memory, the file written through on each append."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        # Read from the file on first use: a log opens every segment, and most are never asked.
        self._loaded: list[AbortedTxn] | None = None
        self._corruption: str | None = None

    @property
    def _entries(self) -> list[AbortedTxn]:
        if self._loaded is None:
            self._loaded = self._read()
        return self._loaded

    @_entries.setter
    def _entries(self, entries: list[AbortedTxn]) -> None:
        self._loaded = entries

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            entries = decode_entries(data, self.path)
        except CorruptIndexError as exc:
            self._corruption = str(exc)
            return []
        if len(data) != len(entries) * ABORTED_TXN_SIZE:
            self._loaded = entries
            self._truncate_file()
        return entries

    @property
    def corruption(self) -> str | None:
        """Why the file could not be read (an entry of an unknown version), for the segment's sanity check: the
        loader then rebuilds it from the log's markers, as Kafka's TransactionIndex.sanityCheck leads it to."""
        self._entries  # noqa: B018  # reading the file is what finds it
        return self._corruption

    @property
    def is_loaded(self) -> bool:
        return self._loaded is not None

    @property
    def entries(self) -> tuple[AbortedTxn, ...]:
        return tuple(self._entries)

    @property
    def last_offset(self) -> int | None:
        """The last entry's marker offset, None when the segment has no aborted transaction."""
        entries = self._entries
        return entries[-1].last_offset if entries else None

    def append(self, entry: AbortedTxn) -> None:
        last = self.last_offset
        if last is not None and entry.last_offset <= last:
            raise ValueError(f"The last offset of appended transaction {entry} is not above {last} in {self.path}")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, entry.encode())
        finally:
            os.close(fd)
        self._entries.append(entry)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        return collect_aborted_txns(self._entries, fetch_offset, upper_bound_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or past `offset` (the log is cut there)."""
        keep = [entry for entry in self._entries if entry.last_offset < offset]
        if len(keep) != len(self._entries):
            self._entries = keep
            self._truncate_file()

    def reset(self) -> None:
        """Forget every entry (recovery rebuilds them from the log's markers)."""
        self._entries = []
        self._corruption = None
        with suppress(FileNotFoundError):
            self.path.unlink()

    def _truncate_file(self) -> None:
        """Cut the file to the entries kept: they are a prefix of it (entries only grow), so a crash midway
        leaves the old file or the new one, never an empty one."""
        if not self._entries:
            self.reset()
            return
        os.truncate(self.path, len(self._entries) * ABORTED_TXN_SIZE)

    def flush(self) -> None:
        if not self._loaded:  # nothing read, nothing appended: nothing of ours to make durable
            return
        # The segment may have been deleted meanwhile (truncation, retention, a cleaner swap): Log.flush fsyncs
        # outside the log's lock on purpose, and a file that is gone needs no fsync.
        with suppress(FileNotFoundError):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename(self, target: Path) -> None:
        with suppress(FileNotFoundError):
            os.replace(self.path, target)
        self.path = target

    def delete(self) -> None:
        with suppress(FileNotFoundError):
            self.path.unlink()

"""A segment's sparse indexes: `.index` (offset -> position) and `.timeindex` (timestamp -> offset).

Both are memory-mapped files of fixed-size big-endian entries, as Kafka's
AbstractIndex / OffsetIndex / TimeIndex:

    .index      8 bytes: relative offset (int32), physical position (int32)
    .timeindex 12 bytes: timestamp (int64), relative offset (int32)

Offsets are stored relative to the segment's base offset, which is why a
segment rolls before an offset would no longer fit in an int32.

The active segment's index files are preallocated to `max_index_size` (rounded
down to whole entries) so appends only write into the mapping; they are trimmed
to their real size when the segment rolls or the log closes. After an unclean
stop the file is still at full size with a zero-filled tail: opening it counts
entries up to the last non-zero one, and `sanity_check` says whether what is
left can be trusted or must be rebuilt from the log.

No file descriptor is held (Kafka's AbstractIndex closes its RandomAccessFile right after mapping): the
mapping outlives the close, so an index costs a mapping, not one of the broker's descriptors. A change of
size (roll, truncation, rebuild) opens the file, sets its length and maps it again; `flush` is `msync`.
"""

from __future__ import annotations

import errno
import mmap
import operator
import os
import struct
import sys
import threading
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, NamedTuple

from broker.log.mapped_file import MappedFile
from common.config import INT_MAX
from common.record import NO_TIMESTAMP

__all__ = [
    "CorruptIndexError", "OffsetIndex", "OffsetPosition", "TimeIndex", "TimestampOffset", "decode_offset_index",
    "decode_time_index", "used_entries",
]



class CorruptIndexError(Exception):
    """An index file that cannot be trusted; the segment rebuilds it from its log (Kafka's CorruptIndexException)."""


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


def _all_increasing(values: list[int] | array[int]) -> bool:
    return all(map(operator.lt, values, values[1:]))


# The zero-filled tail is compared a chunk at a time (memcmp), not stripped byte by byte: an
# active segment's index is preallocated to segment.index.bytes (10 MiB) and every partition
# opens one after an unclean stop.
_ZERO_CHUNK = bytes(1 << 16)


def _write_zeros(fd: int, position: int, length: int) -> None:
    """pwrite `length` zero bytes at `position` (short writes continued)."""
    zeros = memoryview(_ZERO_CHUNK)
    while length > 0:
        written = os.pwrite(fd, zeros[:min(length, len(zeros))], position)
        position += written
        length -= written


def _length_before_zero_tail(data: bytes | memoryview, end: int | None = None) -> int:
    """The length of `data` (its first `end` bytes) up to its last non-zero byte."""
    end = len(data) if end is None else min(end, len(data))
    while end > 0:
        start = max(end - len(_ZERO_CHUNK), 0)
        chunk = bytes(data[start:end])
        if chunk != _ZERO_CHUNK[: end - start]:
            return start + len(chunk.rstrip(b"\0"))
        end = start
    return 0


class AbstractIndex:
    """The mmap, entry count and resizing shared by both index kinds."""

    entry_size: ClassVar[int]

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, read_only: bool = False) -> None:
        """Open (or create) an index for the log; `read_only` opens a snapshot of an existing file for tools.

        A read-only index (dump-log) never creates, resizes, trims or writes the file: it may be a
        running broker's active index, whose size and mapping belong to the broker. Its content is
        copied into private memory, so a broker trimming the file meanwhile cannot fault the reader.
        """
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.read_only = read_only
        # A missing file is created empty; the segment then knows to rebuild it from the log.
        self.newly_created = not read_only and not path.exists()
        self._path = path
        # The entries' bytes: the file's mapping, or a private copy for a read-only look.
        self._mmap: memoryview | None = None
        self._mapping: MappedFile | None = None
        # Held by resize, flush and unmapping: Log.flush msyncs outside the log's lock, and an msync must not
        # meet a mapping being replaced (Kafka's AbstractIndex lock).
        self._lock = threading.Lock()
        self._length = 0
        self._entries = 0
        # Bytes from the start known to have disk blocks: the preallocated file is sparse, and a write through
        # the mapping into a hole of a full file system is a SIGBUS that kills the process, not an error.
        self._allocated = 0
        if self.newly_created:
            self.resize(max_index_size)
        else:
            fd = self._open()
            try:
                self._map(fd, os.fstat(fd).st_size)
                self._entries = self._entries_before_zero_tail(fd)
            finally:
                os.close(fd)
            self._allocated = self._entries * self.entry_size
        self._refresh_last_entry()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}, entries={self._entries}, length={self._length})"

    @property
    def path(self) -> Path:
        return self._path

    @property
    def is_mapped(self) -> bool:
        """Whether the file's content is mapped now (an empty file has no mapping)."""
        return self._mmap is not None

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // self.entry_size

    @property
    def length(self) -> int:
        """The file's size in bytes (larger than entries * entry_size while preallocated)."""
        return self._length

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT_MAX

    def relative_offset(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT_MAX:
            raise ValueError(f"offset {offset} does not fit in index {self.path} with base offset {self.base_offset}")
        return relative

    # ------------------------------------------------------------------ file size

    def _open(self) -> int:
        """A descriptor for one change of the file; the caller closes it (the mapping needs none)."""
        flags = os.O_RDONLY if self.read_only else os.O_RDWR | os.O_CREAT
        return os.open(self._path, flags | os.O_CLOEXEC, 0o644)

    def _map(self, fd: int, length: int) -> None:
        if self.read_only:
            self._snapshot(fd, length)
            return
        self._length = length
        if length > 0:
            self._mapping = MappedFile(fd, length)
            self._mmap = self._mapping.view

    def _snapshot(self, fd: int, length: int) -> None:
        """Copy the file into anonymous memory (short if the owner trimmed it since fstat)."""
        data = os.pread(fd, length, 0)
        self._length = len(data)
        if data:
            self._mmap = memoryview(bytearray(data))

    def _check_writable(self) -> None:
        if self.read_only:
            raise RuntimeError(f"index {self.path} was opened read-only")

    def _entries_before_zero_tail(self, fd: int) -> int:
        """Entries up to the last non-zero byte: the rest is preallocated space never written.

        No valid offset-index entry is all zeros (position 0 is never indexed). A
        time-index entry (0, base offset) can be, but only as the first entry: kept
        when the file holds exactly one entry (trimmed), left out otherwise, which
        costs only a longer scan.
        """
        if self._mmap is None:
            return 0
        return used_entries(self._mmap, self.entry_size, data_end(fd, len(self._mmap)))

    def resize(self, new_size: int) -> None:
        """Set the file to `new_size` rounded down to whole entries (AbstractIndex.resize)."""
        self._check_writable()
        rounded = new_size - new_size % self.entry_size
        if rounded == self._length:
            return
        with self._lock:
            self._unmap()
            self._length = 0
            fd = self._open()
            try:
                os.ftruncate(fd, rounded)
                self._map(fd, rounded)
            finally:
                os.close(fd)
        self._allocated = min(self._allocated, rounded)
        if self._entries > self.max_entries:
            self._truncate_to_entries(self.max_entries)

    def _allocate_next_entry(self) -> None:
        """Write the page the next entry goes to through the file first (zeros, past every entry), so its disk
        blocks are reserved, a full disk is an OSError (ENOSPC) the log dir's failure handling can act on, and
        the page is in the page cache when the mapping writes it. The mapping's first write into a page that
        was never written (a hole, or a posix_fallocate'd unwritten extent) takes ext4's page_mkwrite path:
        18-28 ms a page on this machine under load, against 9 us for the write of zeros then the mapped write
        (issue 27: a producer spreading records over 2,000 partitions puts each one's first index entries in
        such pages, 80% of the leader's event loop by py-spy --gil)."""
        end = (self._entries + 1) * self.entry_size
        if end <= self._allocated:
            return
        start = self._allocated
        stop = min(end + (-end) % mmap.PAGESIZE, self._length)
        fd = self._open()  # once a page of entries, not per entry
        try:
            _write_zeros(fd, start, stop - start)
        finally:
            os.close(fd)
        self._allocated = stop

    def trim_to_valid_size(self) -> None:
        self.resize(self._entries * self.entry_size)

    def reset(self) -> None:
        """Forget every entry and make room for a full index again (before a rebuild)."""
        self._truncate_to_entries(0)
        self.resize(self.max_index_size)

    def _truncate_to_entries(self, entries: int) -> None:
        self._entries = entries
        self._refresh_last_entry()

    def _refresh_last_entry(self) -> None:
        """Reload the cached last entry after the entry count changed other than by an append."""
        raise NotImplementedError

    # ------------------------------------------------------------------ lifecycle

    def flush(self) -> None:
        """Write the mapped pages back (Kafka's mmap.force): msync is fdatasync of the mapped range, so a length
        the file got with them is durable too."""
        with self._lock:
            if self._mapping is not None:
                self._mapping.flush()

    def close(self) -> None:
        if not self.read_only:
            self.trim_to_valid_size()
        self.close_handler()

    def close_handler(self) -> None:
        """Unmap without touching the file (for a segment being deleted: unmapped before it is unlinked)."""
        with self._lock:
            self._unmap()

    def _unmap(self) -> None:
        self._mmap = None
        if self._mapping is not None:
            self._mapping.close()
            self._mapping = None

    def rename(self, target: Path) -> None:
        self._check_writable()
        os.rename(self._path, target)
        self._path = target

    # ------------------------------------------------------------------ search

    def _raw(self) -> bytes:
        """The bytes of the valid entries (a copy: safe to keep across a resize)."""
        if self._mmap is None:
            return b""
        return bytes(self._mmap[: self._entries * self.entry_size])

    def _check_length(self) -> None:
        """A sealed index is exactly its entries: segments are trimmed when they stop being active.

        A longer file still has the zero-filled tail of an active segment that was
        never sealed, so it may lack entries the log has; it is rebuilt rather than trusted.
        """
        if self._length % self.entry_size != 0:
            raise CorruptIndexError(
                f"Index file {self.path} is corrupt, found {self._length} bytes which is not a multiple of"
                f" {self.entry_size}"
            )
        # A tool's read-only look may be at a running broker's active index, preallocated by design.
        if self._length != self._entries * self.entry_size and not self.read_only:
            raise CorruptIndexError(
                f"Index file {self.path} has {self._length} bytes but {self._entries} entries: it was not"
                f" trimmed when its segment was sealed"
            )

    def _truncate_to_offset(self, offset: int, offset_of_slot: Callable[[int], int]) -> None:
        """Drop every entry for an offset >= `offset` (entries are sorted by offset)."""
        slot = _largest_lower_bound(self._entries, offset, offset_of_slot)
        if slot < 0:
            self._truncate_to_entries(0)
        elif offset_of_slot(slot) == offset:
            self._truncate_to_entries(slot)
        else:
            self._truncate_to_entries(slot + 1)


def _largest_lower_bound(n: int, target: int, key_of_slot: Callable[[int], int]) -> int:
    """Slot of the largest key <= `target` among `n` sorted keys; -1 if every key is larger."""
    if n == 0 or key_of_slot(0) > target:
        return -1
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if key_of_slot(mid) <= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32 = struct.Struct(">i")


def data_end(fd: int, length: int) -> int:
    """Where the file's last data ends (SEEK_DATA / SEEK_HOLE), at most `length`: past it the file is a hole,
    zeros that need no reading. An active index is preallocated sparse to segment.index.bytes (10 MiB) and gets
    its blocks a page at a time as entries come, so after an unclean stop every partition's two active indexes
    were read through 10 MiB of holes each to find their entries (most of a 1,000-partition broker's start)."""
    end = position = 0
    try:
        while position < length:
            start = os.lseek(fd, position, os.SEEK_DATA)
            end = position = os.lseek(fd, start, os.SEEK_HOLE)
    except OSError as e:
        if e.errno != errno.ENXIO:  # ENXIO: no data past `position`; anything else: no answer, read it all
            return length
    return min(end, length)


def used_entries(raw: bytes | memoryview, entry_size: int, end: int | None = None) -> int:
    """How many entries of an index file's content `raw` are real: those up to its zero-filled tail (which
    starts at `end` at the latest, when known).

    See AbstractIndex._entries_before_zero_tail for why a lone all-zero entry counts.
    """
    used = _length_before_zero_tail(raw, end)
    if used == 0 and len(raw) == entry_size:
        return 1
    return min(-(-used // entry_size), len(raw) // entry_size)


def decode_offset_index(raw: bytes, base_offset: int) -> list[OffsetPosition]:
    """The entries of a `.index` file's content, for readers without the file at hand (the audit)."""
    size = _OFFSET_ENTRY.size
    return [OffsetPosition(base_offset + relative, position)
            for relative, position in _OFFSET_ENTRY.iter_unpack(raw[: used_entries(raw, size) * size])]


def decode_time_index(raw: bytes, base_offset: int) -> list[TimestampOffset]:
    """The entries of a `.timeindex` file's content."""
    size = _TIME_ENTRY.size
    return [TimestampOffset(timestamp, base_offset + relative)
            for timestamp, relative in _TIME_ENTRY.iter_unpack(raw[: used_entries(raw, size) * size])]


class OffsetIndex(AbstractIndex):
    """Relative offset -> position of the batch start, one entry per `index.interval.bytes` of log.

    An entry is keyed by the last offset of the batch it points at, so the
    largest entry <= a target offset points at a batch starting at or before
    the target, and a forward scan from there finds the batch holding it.
    """

    entry_size = _OFFSET_ENTRY.size

    def entry(self, slot: int) -> OffsetPosition:
        assert self._mmap is not None
        relative, position = _OFFSET_ENTRY.unpack_from(self._mmap, slot * self.entry_size)
        return OffsetPosition(self.base_offset + relative, position)

    def _offset_of_slot(self, slot: int) -> int:
        assert self._mmap is not None
        return _OFFSET_ENTRY.unpack_from(self._mmap, slot * self.entry_size)[0] + self.base_offset

    def _position_of_slot(self, slot: int) -> int:
        assert self._mmap is not None
        return _INT32.unpack_from(self._mmap, slot * self.entry_size + 4)[0]

    def _refresh_last_entry(self) -> None:
        self._last_entry = self.entry(self._entries - 1) if self._entries else OffsetPosition(self.base_offset, 0)

    @property
    def last_entry(self) -> OffsetPosition:
        return self._last_entry

    @property
    def last_offset(self) -> int:
        return self._last_entry.offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The largest entry with offset <= `target_offset`, else (base offset, 0)."""
        slot = _largest_lower_bound(self._entries, target_offset, self._offset_of_slot)
        return self.entry(slot) if slot >= 0 else OffsetPosition(self.base_offset, 0)

    def lookup_by_position(self, target_position: int) -> OffsetPosition:
        """The largest entry with position <= `target_position`, else (base offset, 0).

        Positions grow with offsets, so this is the same search on the other column;
        it lets a read find the last whole batch within max_bytes without walking
        every batch header in between.
        """
        slot = _largest_lower_bound(self._entries, target_position, self._position_of_slot)
        return self.entry(slot) if slot >= 0 else OffsetPosition(self.base_offset, 0)

    def append(self, offset: int, position: int) -> None:
        if self.is_full:
            raise ValueError(f"Attempt to append to a full index (size = {self._entries}) {self.path}")
        if self._entries and offset <= self.last_offset:
            raise ValueError(
                f"Attempt to append an offset ({offset}) to position {self._entries} no larger than the last"
                f" offset appended ({self.last_offset}) to {self.path}"
            )
        assert self._mmap is not None
        self._allocate_next_entry()
        _OFFSET_ENTRY.pack_into(self._mmap, self._entries * self.entry_size, self.relative_offset(offset), position)
        self._entries += 1
        self._last_entry = OffsetPosition(offset, position)

    def truncate_to(self, offset: int) -> None:
        self._truncate_to_offset(offset, self._offset_of_slot)

    def sanity_check(self, log_size: int) -> None:
        """Raise CorruptIndexError unless offsets and positions strictly grow and stay inside the log."""
        self._check_length()
        if not self._entries:
            return
        values = array("i", self._raw())
        if sys.byteorder == "little":
            values.byteswap()
        offsets, positions = values[0::2], values[1::2]
        if offsets[0] < 0 or not _all_increasing(offsets):
            raise CorruptIndexError(f"Corrupt index found, index file ({self.path}) has offsets that do not increase")
        if positions[0] < 0 or not _all_increasing(positions):
            raise CorruptIndexError(f"Corrupt index found, index file ({self.path}) has positions that do not increase")
        if positions[-1] >= log_size:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) points at position {positions[-1]}"
                f" but the log has {log_size} bytes"
            )


class TimeIndex(AbstractIndex):
    """Timestamp -> relative offset: the largest timestamp seen so far and where it was first reached.

    Timestamps strictly grow from entry to entry, offsets never shrink. One slot
    is kept free (isFull is entries >= maxEntries - 1, as Kafka) for the final
    entry a segment gets when it stops being active.
    """

    entry_size = _TIME_ENTRY.size

    def entry(self, slot: int) -> TimestampOffset:
        assert self._mmap is not None
        timestamp, relative = _TIME_ENTRY.unpack_from(self._mmap, slot * self.entry_size)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def _timestamp_of_slot(self, slot: int) -> int:
        assert self._mmap is not None
        return _TIME_ENTRY.unpack_from(self._mmap, slot * self.entry_size)[0]

    def _offset_of_slot(self, slot: int) -> int:
        return self.entry(slot).offset

    def _refresh_last_entry(self) -> None:
        self._last_entry = (
            self.entry(self._entries - 1) if self._entries else TimestampOffset(NO_TIMESTAMP, self.base_offset)
        )

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        return self._last_entry

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The largest entry with timestamp <= `target_timestamp`, else (-1, base offset)."""
        slot = _largest_lower_bound(self._entries, target_timestamp, self._timestamp_of_slot)
        return self.entry(slot) if slot >= 0 else TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's.

        `skip_full_check` is for the final entry of a segment that stops being
        active: it may use the slot `is_full` keeps free.
        """
        if not skip_full_check and self.is_full:
            raise ValueError(f"Attempt to append to a full time index (size = {self._entries}) {self.path}")
        last = self._last_entry
        if self._entries and offset < last.offset:
            raise ValueError(
                f"Attempt to append an offset ({offset}) to slot {self._entries} no larger than the last offset"
                f" appended ({last.offset}) to {self.path}"
            )
        if timestamp <= last.timestamp:
            return
        if self._entries >= self.max_entries:
            self.resize((self._entries + 1) * self.entry_size)
        assert self._mmap is not None
        self._allocate_next_entry()
        _TIME_ENTRY.pack_into(self._mmap, self._entries * self.entry_size, timestamp, self.relative_offset(offset))
        self._entries += 1
        self._last_entry = TimestampOffset(timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        self._truncate_to_offset(offset, self._offset_of_slot)

    def sanity_check(self, next_offset: int) -> None:
        """Raise CorruptIndexError unless timestamps grow, offsets never shrink and stay below `next_offset`."""
        self._check_length()
        if not self._entries:
            return
        entries = list(_TIME_ENTRY.iter_unpack(self._raw()))
        timestamps = [ts for ts, _ in entries]
        offsets = [rel for _, rel in entries]
        if not _all_increasing(timestamps):
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has timestamps that do not increase"
            )
        if offsets[0] < 0 or not all(map(operator.le, offsets, offsets[1:])):
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has offsets that decrease"
            )
        if self.base_offset + offsets[-1] >= next_offset:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has last offset"
                f" {self.base_offset + offsets[-1]} but the segment ends at offset {next_offset}"
            )

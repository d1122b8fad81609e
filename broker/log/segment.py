"""LogSegment: one `.log` file of back-to-back record batches, with its `.index`, `.timeindex` and `.txnindex`.

A segment is named by its base offset, zero-padded to 20 digits, and holds a
contiguous run of offsets starting there (increasing, with holes, once the log
cleaner has compacted it). Not thread-safe: the Log calls it
under its lock (Kafka's @nonthreadsafe LogSegment).

Indexing follows Kafka's LogSegment.append: after more than
`index.interval.bytes` of log since the last entry, the next batch gets an
offset-index entry (its last offset -> its start position) and the time index
records the largest timestamp so far. Recovery rebuilds both indexes by
replaying the same rule over the file, so a rebuilt index equals the one the
appends wrote.

Files held open: the `.log` only. The indexes are mapped without a descriptor (index.py); a segment opened by
loading maps them on first lookup (lazy_index.py: an inactive segment nobody reads costs no mapping); the
`.txnindex` is opened only to append an abort or read its entries (transaction_index.py).
"""

from __future__ import annotations

import logging
import mmap
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

from broker.config.log_config import LogConfig
from broker.log.file_slice import FileSlice, SharedFile
from broker.log.files import (
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    filename_prefix_from_offset,
)
from broker.log.index import CorruptIndexError, OffsetIndex, TimeIndex, TimestampOffset
from broker.log.lazy_index import LazyIndex
from broker.log.transaction_index import TransactionIndex
from common.record import (
    HEADER_SIZE,
    MAGIC,
    MIN_BATCH_LENGTH,
    NO_TIMESTAMP,
    BatchHeader,
    EndTxnMarker,
    decode_records,
    parse_header,
    read_end_txn_marker,
    validate_batch,
)
from proto.errors import CorruptMessageError, KafkaError, KafkaStorageError

__all__ = [
    "DELETED_FILE_SUFFIX",
    "INDEX_FILE_SUFFIX",
    "LOG_FILE_SUFFIX",
    "TIME_INDEX_FILE_SUFFIX",
    "BatchSpan",
    "FetchDataInfo",
    "LeaderEpochCache",
    "LogOffsetMetadata",
    "LogSegment",
    "SegmentRecovery",
    "TimestampAndOffset",
]


logger = logging.getLogger(__name__)



class LeaderEpochCache(Protocol):
    """What the log needs from broker.log.leader_epoch.LeaderEpochFileCache."""

    @property
    def latest_epoch(self) -> int: ...

    def assign(self, epoch: int, start_offset: int, log_end_offset: int | None = None) -> None: ...

    def truncate_from_end(self, end_offset: int) -> None: ...

    def truncate_from_start(self, start_offset: int) -> None: ...

    def clear_and_flush(self) -> None: ...

    def sync(self) -> None: ...


class LogOffsetMetadata(NamedTuple):
    """An offset and where it lives on disk (Kafka's LogOffsetMetadata)."""

    message_offset: int
    segment_base_offset: int
    relative_position_in_segment: int


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """A read's answer: where it started and the whole batches to send."""

    fetch_offset_metadata: LogOffsetMetadata
    records: FileSlice
    # The first batch did not fit in max_bytes and min_one_message was off (KIP-74).
    first_entry_incomplete: bool = False


class BatchSpan(NamedTuple):
    """An appended batch as the segment sees it: what the indexes and the roll decision need."""

    last_offset: int
    max_timestamp: int
    size: int


class TimestampAndOffset(NamedTuple):
    """ListOffsets' answer for a timestamp: the first record at or after it."""

    timestamp: int
    offset: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class SegmentRecovery:
    """What recovering one segment found: the valid prefix, and why the rest was cut."""

    valid_bytes: int
    truncated_bytes: int
    reason: str | None


class LogSegment:
    """A segment's files and what the log needs from them: append, read, roll, truncate, recover."""

    def __init__(self, dir: Path, base_offset: int, config: LogConfig, now_ms: int, *, create: bool,
                 file_suffix: str = "") -> None:
        """`file_suffix` names a segment the log cleaner is writing (`.cleaned`, files.py)."""
        self.base_offset = base_offset
        self.config = config
        prefix = dir / filename_prefix_from_offset(base_offset)
        paths = [prefix.with_suffix(s + file_suffix)
                 for s in (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX)]
        if create:
            for path in paths:
                if path.exists():
                    logger.warning("Newly rolled segment file %s already exists; deleting it first", path)
                    path.unlink()
        self.log_file = SharedFile(paths[0], os.O_RDWR | os.O_CREAT)
        if create and config.preallocate:
            os.posix_fallocate(self.log_file.fd, 0, config.segment_bytes)
        # Bytes of batches in the file: less than the file's size while it is preallocated.
        self.size = 0 if create else self.log_file.size()
        # A new segment is the active one: its indexes are mapped at once. A loaded one maps them when used.
        max_index_size = config.max_index_size
        self.lazy_offset_index = LazyIndex(paths[1], lambda path: OffsetIndex(path, base_offset, max_index_size),
                                           load=create)
        self.lazy_time_index = LazyIndex(paths[2], lambda path: TimeIndex(path, base_offset, max_index_size),
                                         load=create)
        self.txn_index = TransactionIndex(prefix.with_suffix(TXN_INDEX_FILE_SUFFIX + file_suffix), base_offset)
        if create:
            self.txn_index.reset()
        self.created_ms = now_ms
        self._bytes_since_last_index_entry = 0
        # Where the last append began, as (offset, position): every batch before `position` ends below `offset`.
        # A caught-up follower's next fetch starts there, so translate_offset scans from it, not from the index's
        # entry (up to log.index.interval.bytes of headers, one pread each, for every partition of every fetch
        # when a producer spreads small batches over many partitions, issue 27). None when not known.
        self._last_append_start: tuple[int, int] | None = None
        # One past the last batch's last offset, while known (not for a loaded segment until its first append).
        self._end_offset: int | None = base_offset if create else None
        # Both loaded lazily from the file, as Kafka does, to keep opening a log cheap.
        self._rolling_based_timestamp: int | None = None
        self._max_timestamp_and_offset: TimestampOffset | None = None

    def __repr__(self) -> str:
        return f"LogSegment(baseOffset={self.base_offset}, size={self.size})"

    @property
    def path(self) -> Path:
        return self.log_file.path

    @property
    def offset_index(self) -> OffsetIndex:
        return self.lazy_offset_index.get()

    @property
    def time_index(self) -> TimeIndex:
        return self.lazy_time_index.get()

    # ------------------------------------------------------------------ batch headers on disk

    def _header_at(self, position: int) -> BatchHeader:
        """The header of the batch at `position`, checked only enough to walk to the next one."""
        return self._checked_header(os.pread(self.log_file.fd, HEADER_SIZE, position), 0, position)

    def _checked_header(self, data: bytes | mmap.mmap, start: int, position: int) -> BatchHeader:
        """The header at `start` in `data`, which holds the file's bytes from `position - start` on."""
        if len(data) - start < HEADER_SIZE or position + HEADER_SIZE > self.size:
            raise CorruptMessageError(
                f"Found a truncated batch header in log segment {self.path} at byte offset {position}"
            )
        header = parse_header(data, start)  # type: ignore[arg-type]  # an mmap is a buffer too
        if header.magic != MAGIC or header.batch_length < MIN_BATCH_LENGTH or position + header.size > self.size:
            raise CorruptMessageError(
                f"Found a malformed batch header in log segment {self.path} at byte offset {position}:"
                f" magic {header.magic}, batchLength {header.batch_length}, segment size {self.size}"
            )
        return header

    def batches_from(self, position: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from `position` (a batch start) to the end of the segment."""
        while position < self.size:
            header = self._header_at(position)
            yield position, header
            position += header.size

    def headers(self) -> Iterator[BatchHeader]:
        """Every batch's header, from one read-only mapping of the file: for whole-segment scans (the
        producer-state replay after a restart), where a pread per batch costs more than parsing it."""
        if not self.size:
            return
        with mmap.mmap(self.log_file.fd, self.size, access=mmap.ACCESS_READ) as mapped:
            position = 0
            while position < self.size:
                header = self._checked_header(mapped, position, position)
                yield header
                position += header.size

    def producer_batches(self) -> Iterator[tuple[BatchHeader, EndTxnMarker | None]]:
        """Each batch with a producer id and, for a transaction marker, what it says: the producer state's
        replay. Only a control batch is read past its header."""
        if not self.size:
            return
        with mmap.mmap(self.log_file.fd, self.size, access=mmap.ACCESS_READ) as mapped:
            position = 0
            while position < self.size:
                header = self._checked_header(mapped, position, position)
                if header.producer_id >= 0:
                    marker = (read_end_txn_marker(mapped[position:position + header.size], 0, header)
                              if header.is_control else None)
                    yield header, marker
                position += header.size

    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, BatchHeader] | None:
        """The batch holding `offset`, or the first one after it; None past the end of the segment."""
        hint = self._last_append_start
        if hint is not None and offset >= hint[0]:
            start = max(hint[1], starting_position)
        else:
            start = max(self.offset_index.lookup(offset).position, starting_position)
        for position, header in self.batches_from(start):
            if header.last_offset >= offset:
                return position, header
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch (a scan from the last index entry)."""
        next_offset = self.base_offset
        with self.lazy_offset_index.peek() as offset_index:
            start = offset_index.last_entry.position
        for _, header in self.batches_from(start):
            next_offset = header.next_offset
        return next_offset

    # ------------------------------------------------------------------ append

    def should_roll(self, messages_size: int, max_timestamp_in_messages: int, max_offset_in_messages: int,
                    now_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll: no room, too old, an index full, or an offset that would not fit."""
        return (
            self.size > self.config.segment_bytes - messages_size
            or self.offset_index.is_full
            or self.time_index.is_full
            or not self.offset_index.can_append_offset(max_offset_in_messages)
            or (self.size > 0
                and self.time_waited_for_roll(now_ms, max_timestamp_in_messages) > self.config.segment_ms)
        )

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Age of the segment: by record timestamps when the first batch has one, else by wall clock."""
        first = self._first_batch_timestamp()
        return message_timestamp - first if first >= 0 else now_ms - self.created_ms

    def _first_batch_timestamp(self) -> int:
        if self._rolling_based_timestamp is None and self.size > 0:
            self._rolling_based_timestamp = self._header_at(0).max_timestamp
        return NO_TIMESTAMP if self._rolling_based_timestamp is None else self._rolling_based_timestamp

    def append(self, data: memoryview, batches: Sequence[BatchSpan]) -> None:
        """Write `data` (exactly `batches`, back to back) at the end in one write, then index it."""
        position = self.size
        if position == 0:
            self._rolling_based_timestamp = batches[0].max_timestamp
        max_so_far = self.max_timestamp_and_offset
        self._write_fully(data, position)
        if self._end_offset is not None:
            self._last_append_start = (self._end_offset, position)
        self._end_offset = batches[-1].last_offset + 1
        interval = self.config.index_interval_bytes
        since = self._bytes_since_last_index_entry
        for last_offset, max_timestamp, size in batches:
            if max_timestamp > max_so_far.timestamp:
                max_so_far = TimestampOffset(max_timestamp, last_offset)
            if since > interval:
                self._add_index_entries(last_offset, position, max_so_far)
                since = 0
            position += size
            since += size
        self.size = position
        self._bytes_since_last_index_entry = since
        self._max_timestamp_and_offset = max_so_far

    def _add_index_entries(self, last_offset: int, position: int, max_so_far: TimestampOffset) -> None:
        # One append may span several index intervals; should_roll only guarantees room
        # for the first entry, and skipping later ones leaves a sparser, still correct index.
        if not self.offset_index.is_full:
            self.offset_index.append(last_offset, position)
        if not self.time_index.is_full:
            self.time_index.maybe_append(max_so_far.timestamp, max_so_far.offset)

    def _write_fully(self, data: memoryview, position: int) -> None:
        fd = self.log_file.fd
        try:
            written = os.pwrite(fd, data, position)
            while written < len(data):  # short writes are rare on regular files, but allowed
                written += os.pwrite(fd, data[written:], position + written)
        except OSError as exc:
            # Take back a partial write so the file still ends on a batch boundary.
            try:
                os.ftruncate(fd, position)
            except OSError:
                pass
            raise KafkaStorageError(f"Error while appending records to {self.path}: {exc}") from exc

    # ------------------------------------------------------------------ timestamps

    @property
    def max_timestamp_and_offset(self) -> TimestampOffset:
        """Largest batch timestamp in the segment and the last offset of its batch."""
        if self._max_timestamp_and_offset is None:
            # Computed once: retention asks every segment, and must not map the indexes of each for good.
            with self.lazy_time_index.peek() as time_index:
                best = time_index.last_entry
            with self.lazy_offset_index.peek() as offset_index:
                start = offset_index.lookup(best.offset).position
            for _, header in self.batches_from(start):
                if header.max_timestamp > best.timestamp:
                    best = TimestampOffset(header.max_timestamp, header.last_offset)
            self._max_timestamp_and_offset = best
        return self._max_timestamp_and_offset

    @property
    def largest_timestamp(self) -> int:
        """What time retention measures the segment by (Kafka: the file's mtime if no batch has a timestamp)."""
        timestamp = self.max_timestamp_and_offset.timestamp
        return timestamp if timestamp >= 0 else os.stat(self.path).st_mtime_ns // 1_000_000

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> TimestampAndOffset | None:
        """The first record at or after `starting_offset` whose timestamp is >= `timestamp`."""
        indexed = self.time_index.lookup(timestamp)
        start = self.offset_index.lookup(max(indexed.offset, starting_offset)).position
        for position, header in self.batches_from(start):
            if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
                # Only this batch is decoded: the per-record walk Kafka's searchForTimestamp does.
                data = os.pread(self.log_file.fd, header.size, position)
                for record in decode_records(data, header):
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        return TimestampAndOffset(record.timestamp, record.offset, header.partition_leader_epoch)
        return None

    # ------------------------------------------------------------------ read

    def read(self, start_offset: int, max_size: int, max_position: int, min_one_message: bool) -> FetchDataInfo | None:
        """Whole batches from the one holding `start_offset`, ending at or before `max_position`.

        At most `max_size` bytes, except that with `min_one_message` the first
        batch comes whole even when larger (KIP-74). None when `start_offset` is
        past the last batch of this segment.
        """
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, first = found
        metadata = LogOffsetMetadata(start_offset, self.base_offset, position)
        available = min(max_position, self.size) - position
        if available <= 0:
            return FetchDataInfo(metadata, FileSlice(self.log_file, position, 0))
        if available <= max_size:
            size = available
        else:
            size = self._whole_batches_end(position, position + max_size) - position
            if size == 0 and min_one_message and first.size <= available:
                size = first.size
        return FetchDataInfo(metadata, FileSlice(self.log_file, position, size), first_entry_incomplete=size == 0)

    def _whole_batches_end(self, start: int, bound: int) -> int:
        """End of the last batch that starts at or after `start` and ends at or before `bound`."""
        position = max(self.offset_index.lookup_by_position(bound).position, start)
        while position < self.size:
            end = position + self._header_at(position).size
            if end > bound:
                break
            position = end
        return position

    # ------------------------------------------------------------------ recovery

    def sanity_check(self) -> int:
        """Check the indexes against the log; return the segment's next offset.

        Raises CorruptIndexError when an index is missing, inconsistent with itself
        or with the log, or the `.txnindex` unreadable: the caller then rebuilds them with `recover`.
        """
        if self.txn_index.corruption is not None:
            raise CorruptIndexError(self.txn_index.corruption)
        # Peeked, not loaded: a segment recovery trusts may never be read again.
        with self.lazy_offset_index.peek() as offset_index, self.lazy_time_index.peek() as time_index:
            for index in (offset_index, time_index):
                if index.newly_created:
                    raise CorruptIndexError(f"index file {index.path} does not exist")
            offset_index.sanity_check(self.size)
            last = offset_index.last_entry
            try:
                if offset_index.entries:
                    header = self._header_at(last.position)
                    if header.last_offset != last.offset:
                        raise CorruptIndexError(
                            f"index file {offset_index.path} maps offset {last.offset} to position"
                            f" {last.position}, which holds offsets {header.base_offset} to {header.last_offset}"
                        )
                next_offset = self.read_next_offset()
            except CorruptMessageError as exc:
                raise CorruptIndexError(str(exc)) from exc
            time_index.sanity_check(next_offset)
        return next_offset

    def recover(self, leader_epoch_cache: LeaderEpochCache | None = None) -> SegmentRecovery:
        """Re-validate every batch (structure, CRC, offsets contiguous, or increasing in a compacted log)
        and rebuild both indexes. The `.txnindex` is emptied: its entries come from the markers, which the loader
        replays from this segment on (rebuild_producer_state).

        The file is cut at the first bad byte; the result says where and why.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        valid = 0
        last_index_entry = 0
        max_so_far = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        expected_offset = self.base_offset
        # A compacted log's offsets increase with holes where the cleaner removed records; elsewhere
        # a hole can only be damage, and the segment is cut there.
        gaps = self.config.compact
        reason = None
        mapped = mmap.mmap(self.log_file.fd, self.size, access=mmap.ACCESS_READ) if self.size else None
        data = memoryview(mapped) if mapped is not None else memoryview(b"")
        try:
            while valid < self.size:
                header = validate_batch(data, valid, gaps)
                if header.base_offset != expected_offset and not (gaps and header.base_offset > expected_offset):
                    raise CorruptMessageError(
                        f"batch at position {valid} has baseOffset {header.base_offset}, expected {expected_offset}"
                    )
                if not self.offset_index.can_append_offset(header.last_offset):
                    raise CorruptMessageError(
                        f"batch at position {valid} has last offset {header.last_offset}, beyond what segment"
                        f" {self.base_offset} can index"
                    )
                if header.max_timestamp > max_so_far.timestamp:
                    max_so_far = TimestampOffset(header.max_timestamp, header.last_offset)
                if valid - last_index_entry > self.config.index_interval_bytes:
                    self._add_index_entries(header.last_offset, valid, max_so_far)
                    last_index_entry = valid
                epoch = header.partition_leader_epoch
                # Only epochs newer than the cache's latest: recovery replays history the
                # cache may already hold, and re-assigning an old epoch would rewrite it.
                if leader_epoch_cache is not None and epoch >= 0 and epoch > leader_epoch_cache.latest_epoch:
                    leader_epoch_cache.assign(epoch, header.base_offset)
                valid += header.size
                expected_offset = header.next_offset
        except KafkaError as exc:
            reason = str(exc)
        finally:
            data.release()
            if mapped is not None:
                mapped.close()
        truncated = self.size - valid
        self._last_append_start = self._end_offset = None
        if truncated:
            os.ftruncate(self.log_file.fd, valid)
            self.size = valid
        self.time_index.maybe_append(max_so_far.timestamp, max_so_far.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._bytes_since_last_index_entry = valid - last_index_entry
        self._max_timestamp_and_offset = max_so_far
        self._rolling_based_timestamp = None
        return SegmentRecovery(valid, truncated, reason)

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Drop every batch holding an offset >= `offset` (a batch straddling it goes whole); return bytes cut."""
        found = self.translate_offset(offset)
        end_offset = found[1].base_offset if found is not None else offset
        self.offset_index.truncate_to(end_offset)
        self.time_index.truncate_to(end_offset)
        self.txn_index.truncate_to(end_offset)
        # The segment is (again) the active one: give its indexes room to grow.
        self.resize_indexes(self.config.max_index_size)
        self._bytes_since_last_index_entry = 0
        self._max_timestamp_and_offset = None
        if found is None:
            return 0
        # What is left ends below the cut batch's base offset; the last append's start may be gone.
        self._last_append_start, self._end_offset = None, end_offset
        position = found[0]
        truncated = self.size - position
        os.ftruncate(self.log_file.fd, position)
        self.size = position
        if position == 0:
            self.created_ms = now_ms
            self._rolling_based_timestamp = None
        return truncated

    # ------------------------------------------------------------------ lifecycle

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def on_become_inactive(self) -> None:
        """Seal a segment that stops taking appends: final time-index entry, files trimmed to their content."""
        newest = self.max_timestamp_and_offset
        self.time_index.maybe_append(newest.timestamp, newest.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._trim_log()

    def _trim_log(self) -> None:
        if self.config.preallocate:
            os.ftruncate(self.log_file.fd, self.size)

    def flush(self) -> None:
        self.log_file.fsync()
        self.lazy_offset_index.flush()
        self.lazy_time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        # As Kafka: the final time-index entry only if the max timestamp is already known,
        # so closing never scans the log; and only into a loaded index (an unloaded one was sealed with it).
        known = self._max_timestamp_and_offset
        if known is not None and self.lazy_time_index.is_loaded:
            self.time_index.maybe_append(known.timestamp, known.offset, skip_full_check=True)
        self.lazy_offset_index.close()
        self.lazy_time_index.close()
        self._trim_log()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the files (Kafka's LogSegment.changeFileSuffixes): the indexes first, the `.log`
        last, because the `.log` name is what the log cleaner's swap protocol commits on."""
        for target in (self.lazy_offset_index, self.lazy_time_index, self.txn_index, self.log_file):
            path = target.path
            name = path.name[: -len(old_suffix)] if old_suffix else path.name
            target.rename(path.with_name(name + new_suffix))

    def delete(self) -> None:
        """Remove the segment's files: renamed to `.deleted` first, so a crash midway leaves only
        files the next open discards. Open slices keep reading the unlinked file. The indexes are unmapped
        before their files go (Kafka's AbstractIndex.deleteIfExists)."""
        self.lazy_offset_index.close_handler()
        self.lazy_time_index.close_handler()
        files = (self.log_file, self.lazy_offset_index, self.lazy_time_index, self.txn_index)
        for target in files:
            path = target.path
            target.rename(path.with_name(path.name + DELETED_FILE_SUFFIX))
        for target in files:
            target.path.unlink(missing_ok=True)

"""The log cleaner's algorithm over one log (Kafka's LogCleaner.Cleaner): keep the newest record per key.

One cleaning, for a log whose dirty section starts at `first_dirty_offset`:

1. Build the key -> last offset map (offset_map.py) over the dirty section,
   from `first_dirty_offset` up to `first_uncleanable_offset` (never the active
   segment, never past the high watermark or min.compaction.lag.ms), stopping
   early when the map is full; the map's end is where the next cleaning starts.
2. Recopy every segment below that end, in groups that fit one segment
   (Kafka's groupSegmentsBySize), keeping a record when no later offset of its
   key is in the map. Tombstones (null values) are kept until their batch's
   delete horizon (KIP-534: `delete.retention.ms` after the cleaning that first
   kept them) has passed. The last batch of every live idempotent producer keeps
   its last record even when superseded, so the producer's sequence state (base
   sequence + lastOffsetDelta) survives in the log; Kafka keeps an empty batch
   there instead, which strict readers of RecordBatch v2 refuse. Aborted
   transactions' batches go, and markers once nothing of their transaction is
   left and their delete horizon has passed (transactions.py); the cleaned
   segment's `.txnindex` keeps the aborted transactions whose marker stays.
3. A batch that loses nothing is copied byte for byte; one that loses records
   is rewritten as a RecordBatch v2 with its base offset, producer fields and
   leader epoch, its records at their original offsets (so lastOffsetDelta
   may exceed count - 1), and a fresh CRC-32C.
4. Each group goes to `<base>.log.cleaned` with new indexes, fsynced, then is
   swapped in by Log.replace_segments (`.cleaned` -> `.swap` -> final names).

Test-only: `MINIBROKER_TEST_CLEANER_CRASH_AT=recopy|swap` SIGKILLs the process
in the middle of the recopy (a `.cleaned` segment half written) or between the
`.swap` commit and the rename (tests/integration/compaction/test_compaction.py
stages crashes with it); never set it in production.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from broker.log.batch_scan import scan_batches
from broker.log.cleaner.offset_map import SkimpyOffsetMap
from broker.log.cleaner.transactions import CleanedTransactionMetadata
from broker.log.files import CLEANED_FILE_SUFFIX
from broker.log.log import Log
from broker.log.segment import BatchSpan, LogSegment
from common.config import INT_MAX
from common.record import (
    BatchHeader,
    TimestampType,
    assemble_batch,
    decode_record_tuples,
    encode_record,
    read_end_txn_marker,
)

__all__ = ["CRASH_AT_ENV", "Cleaner", "CleanerStats", "LogToClean", "Throttler"]

logger = logging.getLogger(__name__)

CRASH_AT_ENV = "MINIBROKER_TEST_CLEANER_CRASH_AT"
# Output is written to the cleaned segment in writes of about this size (Kafka's log.cleaner.io.buffer.size).
_WRITE_BUFFER_BYTES = 512 * 1024


class CleanerAbortedError(Exception):
    """The log changed under the cleaner (truncated, deleted): this cleaning is dropped, nothing was swapped."""


class Throttler:
    """log.cleaner.io.max.bytes.per.second over read plus written bytes (Kafka's Throttler)."""

    def __init__(self, bytes_per_second: float, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._rate = bytes_per_second
        self._monotonic = monotonic
        self._sleep = sleep
        self._start = monotonic()
        self._observed = 0

    def maybe_throttle(self, observed: int) -> None:
        self._observed += observed
        now = self._monotonic()
        elapsed = now - self._start
        if elapsed <= 0 or self._observed / elapsed <= self._rate:
            return
        self._sleep(self._observed / self._rate - elapsed)
        self._start = self._monotonic()
        self._observed = 0


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A log the manager chose, and the offsets that bound its dirty section (Kafka's LogToClean)."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int


@dataclass(slots=True)
class CleanerStats:
    """What one cleaning did (Kafka's CleanerStats); the log line and the metrics come from it."""

    start: float = field(default_factory=time.monotonic)
    map_complete: float = 0.0
    end: float = 0.0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0

    @property
    def elapsed_secs(self) -> float:
        return self.end - self.start

    def report(self, cleaner_id: int, log_name: str, first_dirty: int, end_offset: int) -> str:
        """Kafka's LogCleaner.recordStats text."""
        mb = 1024 * 1024
        elapsed = max(self.elapsed_secs, 1e-9)
        map_secs = max(self.map_complete - self.start, 1e-9)
        copy_secs = max(self.end - self.map_complete, 1e-9)
        return (
            f"\n\tLog cleaner thread {cleaner_id} cleaned log {log_name} (dirty section = [{first_dirty},"
            f" {end_offset}])\n"
            f"\t{self.bytes_read / mb:.1f} MB of log processed in {elapsed:.1f} seconds"
            f" ({self.bytes_read / mb / elapsed:.1f} MB/sec).\n"
            f"\tIndexed {self.map_bytes_read / mb:.1f} MB in {map_secs:.1f} seconds"
            f" ({self.map_bytes_read / mb / map_secs:.1f} Mb/sec, {100 * map_secs / elapsed:.1f}% of total time)\n"
            f"\tBuffer utilization: {100 * self.buffer_utilization:.1f}%\n"
            f"\tCleaned {self.bytes_read / mb:.1f} MB in {copy_secs:.1f} seconds"
            f" ({self.bytes_read / mb / copy_secs:.1f} Mb/sec, {100 * copy_secs / elapsed:.1f}% of total time)\n"
            f"\tStart size: {self.bytes_read / mb:.1f} MB ({self.messages_read} messages)\n"
            f"\tEnd size: {self.bytes_written / mb:.1f} MB ({self.messages_written} messages)\n"
            f"\t{100 * (1 - self.bytes_written / max(self.bytes_read, 1)):.1f}% size reduction"
            f" ({100 * (1 - self.messages_written / max(self.messages_read, 1)):.1f}% fewer messages)\n"
        )


def _crash_point(step: str) -> None:
    if os.environ.get(CRASH_AT_ENV) == step:
        logger.warning("%s=%s: killing this process (test-only crash point)", CRASH_AT_ENV, step)
        os.kill(os.getpid(), signal.SIGKILL)


def _scan(segment: LogSegment) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of a (sealed) segment with its bytes."""
    fd = segment.log_file.fd
    for batch in scan_batches(lambda position, size: os.pread(fd, size, position), segment.size):
        if batch.problem is not None or batch.data is None:
            raise CleanerAbortedError(f"segment {segment.path} stops being batches: {batch.problem}")
        yield batch.header, batch.data


@dataclass(frozen=True, slots=True)
class _Retention:
    """What decides, during one cleaning, whether a record that is the newest of its key stays."""

    now: int
    delete_retention_ms: int
    # Kafka's lastRecordsOfActiveProducers: the last offset of each live producer's last batch.
    live_producer_last_offsets: set[int]


class Cleaner:
    """One cleaner thread's worker: the map, the throttler, and `clean`."""

    def __init__(self, cleaner_id: int, offset_map: SkimpyOffsetMap, throttler: Throttler,
                 time_ms: Callable[[], int]) -> None:
        self.id = cleaner_id
        self.offset_map = offset_map
        self.throttler = throttler
        self._time_ms = time_ms

    def clean(self, to_clean: LogToClean) -> tuple[int, CleanerStats]:
        """Clean the log; return the offset the next cleaning's dirty section starts at, and the stats."""
        log = to_clean.log
        stats = CleanerStats()
        logger.info("Cleaner %d: Beginning cleaning of log %s.", self.id, log.topic_partition)
        logger.info("Cleaner %d: Building offset map for %s...", self.id, log.topic_partition)
        every_segment = log.segments
        segments = every_segment[:-1]  # never the active segment
        end_offset = self._build_offset_map(log, segments, to_clean.first_dirty_offset,
                                            to_clean.first_uncleanable_offset, stats)
        stats.map_complete = time.monotonic()
        logger.info("Cleaner %d: Offset map for log %s complete.", self.id, log.topic_partition)
        stats.buffer_utilization = self.offset_map.utilization
        now = self._time_ms()
        logger.info("Cleaner %d: Cleaning log %s (cleaning prior to %d, discarding tombstones whose delete"
                    " horizon has passed)...", self.id, log.topic_partition, end_offset)
        live_producer_last_offsets = {
            entry.last_data_offset for entry in log.producer_state.active_producers.values()
        }
        retention = _Retention(now, log.config.delete_retention_ms, live_producer_last_offsets)
        transactions = CleanedTransactionMetadata()
        groups = _group_segments_by_size([s for s in segments if s.base_offset < end_offset],
                                         log.config.segment_bytes)
        for i, group in enumerate(groups):
            # Kafka's upper bound: the next group's base, else the active segment's.
            upper = groups[i + 1][0].base_offset if i + 1 < len(groups) else every_segment[-1].base_offset
            transactions.add_aborted_transactions(log.collect_aborted_transactions(group[0].base_offset, upper))
            self._clean_segments(log, group, retention, transactions, stats)
        stats.end = time.monotonic()
        return end_offset, stats

    # ------------------------------------------------------------------ the map

    def _build_offset_map(self, log: Log, segments: tuple[LogSegment, ...], start: int, end: int,
                          stats: CleanerStats) -> int:
        """Put each key of [start, end) in the map, until it is full, except an aborted transaction's (Kafka's
        buildOffsetMap); return the offset the map ends at."""
        offset_map = self.offset_map
        offset_map.clear()
        transactions = CleanedTransactionMetadata()
        transactions.add_aborted_transactions(log.collect_aborted_transactions(start, end))
        reached = start
        for segment in segments:
            if segment.base_offset >= end:
                break
            for header, data in _scan(segment):
                if header.last_offset < start:
                    continue
                if header.last_offset >= end:
                    return reached
                if len(offset_map) + header.record_count > offset_map.capacity:
                    if reached == start:
                        raise CleanerAbortedError(
                            f"the offset map (log.cleaner.dedupe.buffer.size) cannot hold the {header.record_count}"
                            f" records of the batch at offset {header.base_offset}")
                    return reached
                stats.map_messages_read += header.record_count
                stats.map_bytes_read += header.size
                if header.is_control:
                    transactions.on_control_batch_read(header, read_end_txn_marker(data, 0, header))
                elif not transactions.on_batch_read(header):
                    for record in decode_record_tuples(bytes(data), 0, header):
                        key = record[5]
                        if key is not None and record[2] >= start:
                            offset_map.put(key, record[2])
                reached = header.next_offset
                self.throttler.maybe_throttle(header.size)
        return reached

    # ------------------------------------------------------------------ the recopy

    def _clean_segments(self, log: Log, group: list[LogSegment], retention: _Retention,
                        transactions: CleanedTransactionMetadata, stats: CleanerStats) -> None:
        """Recopy `group` into one `.cleaned` segment and swap it in."""
        cleaned = LogSegment(log.dir, group[0].base_offset, log.config, retention.now, create=True,
                             file_suffix=CLEANED_FILE_SUFFIX)
        transactions.cleaned_index = cleaned.txn_index
        buffer = bytearray()
        spans: list[BatchSpan] = []
        try:
            for segment in group:
                for header, data in _scan(segment):
                    stats.bytes_read += header.size
                    stats.messages_read += header.record_count
                    out = self._filter_batch(header, data, retention, transactions, stats)
                    if out is None:
                        continue
                    out_header, out_bytes = out
                    buffer += out_bytes
                    spans.append(BatchSpan(out_header.last_offset, out_header.max_timestamp, len(out_bytes)))
                    stats.messages_written += out_header.record_count
                    if len(buffer) >= _WRITE_BUFFER_BYTES:
                        self._write(cleaned, buffer, spans, stats)
                        _crash_point("recopy")
                    self.throttler.maybe_throttle(header.size)
            if buffer:
                self._write(cleaned, buffer, spans, stats)
            _crash_point("recopy")
            cleaned.on_become_inactive()
            cleaned.flush()
        except BaseException:
            cleaned.close()
            for target in (cleaned.log_file, cleaned.offset_index, cleaned.time_index, cleaned.txn_index):
                target.path.unlink(missing_ok=True)
            raise
        # The cleaned segment keeps the group's age for time-based rolling and retention decisions.
        if not log.replace_segments(cleaned, group, _crash_point):
            raise CleanerAbortedError(f"log {log.topic_partition} changed while segments were cleaned")

    def _write(self, cleaned: LogSegment, buffer: bytearray, spans: list[BatchSpan], stats: CleanerStats) -> None:
        cleaned.append(memoryview(buffer), spans)
        stats.bytes_written += len(buffer)
        self.throttler.maybe_throttle(len(buffer))
        buffer.clear()
        spans.clear()

    def _filter_batch(self, header: BatchHeader, data: memoryview, retention: _Retention,
                      transactions: CleanedTransactionMetadata,
                      stats: CleanerStats) -> tuple[BatchHeader, bytes | memoryview] | None:
        """The batch as the cleaned log keeps it: unchanged, rewritten without some records, or None."""
        if header.is_control:
            if not transactions.on_control_batch_read(header, read_end_txn_marker(data, 0, header)):
                return header, data
            horizon = header.delete_horizon_ms
            if horizon is None:
                # KIP-534: the marker may go, but only after delete.retention.ms from now.
                marker_records = decode_record_tuples(bytes(data), 0, header)
                rebuilt = _rebuild(header, marker_records, retention.now + retention.delete_retention_ms)
                return header, rebuilt
            return None if retention.now >= horizon else (header, data)
        aborted = transactions.on_batch_read(header)
        raw = bytes(data)
        records = decode_record_tuples(raw, 0, header)
        offset_map = self.offset_map
        horizon = header.delete_horizon_ms
        kept = []
        for record in records:
            key = record[5]
            if key is None:
                stats.invalid_messages += 1
                continue
            if aborted or record[2] < offset_map.get(key):
                continue
            if record[6] is None and horizon is not None and retention.now >= horizon:
                continue
            kept.append(record)
        if header.producer_id >= 0 and header.last_offset in retention.live_producer_last_offsets and (
                not kept or kept[-1][2] != header.last_offset):
            kept.append(records[-1])
        if not kept:
            return None
        keeps_tombstones = any(record[6] is None for record in kept)
        if len(kept) == len(records) and (horizon is not None or not keeps_tombstones):
            return header, data
        if keeps_tombstones and horizon is None:
            horizon = retention.now + retention.delete_retention_ms
        rebuilt = _rebuild(header, kept, horizon if keeps_tombstones else None)
        # The kept records' max timestamp, as the rebuilt batch says: the cleaned segment's time index is built
        # from it (Kafka's filterTo returns the retained maxTimestamp), not from a record the cleaner dropped.
        return header._replace(record_count=len(kept), last_offset_delta=kept[-1][2] - header.base_offset,
                               max_timestamp=_max_timestamp(header, kept)), rebuilt


def _rebuild(header: BatchHeader, kept: list[tuple], delete_horizon: int | None) -> bytes:
    """A RecordBatch v2 of the kept records at their original offsets, with the original batch's fields."""
    base_timestamp = delete_horizon if delete_horizon is not None else kept[0][3]
    body = bytearray()
    for record in kept:
        encode_record(body, record[2] - header.base_offset, record[3] - base_timestamp, record[5], record[6],
                      record[7])
    return assemble_batch(
        body, len(kept), base_timestamp, _max_timestamp(header, kept), base_offset=header.base_offset,
        compression=header.compression, producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence, partition_leader_epoch=header.partition_leader_epoch,
        timestamp_type=header.timestamp_type, is_transactional=header.is_transactional, is_control=header.is_control,
        last_offset_delta=kept[-1][2] - header.base_offset, has_delete_horizon=delete_horizon is not None,
    )


def _max_timestamp(header: BatchHeader, kept: list[tuple]) -> int:
    """A rebuilt batch's max timestamp: LogAppendTime keeps the batch's, CreateTime is the kept records' largest."""
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
        return header.max_timestamp
    return max(record[3] for record in kept)


def _group_segments_by_size(segments: list[LogSegment], max_size: int) -> list[list[LogSegment]]:
    """Consecutive segments whose total size fits one segment and whose offsets fit its index
    (Kafka's groupSegmentsBySize); the next segment's base bounds a group's offsets."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size
        i += 1
        while i < len(segments):
            candidate = segments[i]
            # The candidate's offsets end before the following segment's base (or the log end).
            following_base = segments[i + 1].base_offset if i + 1 < len(segments) else candidate.base_offset
            if size + candidate.size > max_size or following_base - group[0].base_offset > INT_MAX:
                break
            group.append(candidate)
            size += candidate.size
            i += 1
        groups.append(group)
    return groups

"""Log: one partition's directory `<topic>-<partition>` of segments (Kafka 3's UnifiedLog, Kafka 2.x's Log).

Carved as Kafka 3 carved its Log: opening and recovering the directory is the LogLoader's (log_loader.py),
the checks of incoming batches and the offsets a leader stamps are the LogValidator's (log_validator.py);
this module holds the log itself.

Appends go to the active (last) segment, which rolls when full or old. Reads
find the segment by base offset, the batch by the sparse index and a short
scan, and hand out a FileSlice of whole batches. Retention deletes whole
segments from the head; follower truncation cuts the tail.

Invariants, kept by every method and checked again by recovery:
- batches hold contiguous offsets, and each segment starts exactly where the
  previous one ends, unless cleanup.policy includes `compact`: there offsets
  only increase, with holes where the log cleaner removed records (within a
  batch, between batches and between segments); elsewhere a gap is damage;
- the log end offset (LEO) is the offset after the last batch on disk;
- `recovery_point` <= LEO: everything below it has been fsynced, so after an
  unclean stop only segments holding offsets at or past it are re-validated.

Thread-safe: one lock guards the segment list and every file change; fsync runs
outside it. Readers may keep their slices after the lock is released.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from broker.config.log_config import LogConfig
from broker.log.checkpoint import fsync_file
from broker.log.file_slice import FileSlice
from broker.log.files import CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX, SWAP_FILE_SUFFIX, fsync_dir
from broker.log.log_dir_failure import LogDirFailedError, LogDirFailureChannel
from broker.log.log_loader import LogLoader, RecoveryAction, rebuild_producer_state
from broker.log.log_validator import (
    AppendOrigin,
    analyze_and_validate_records,
    assign_offsets,
    recompress_to_topic_codec,
    validate_leader_append,
)
from broker.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ActiveProducer,
    ProducerBatch,
    ProducerStateManager,
)
from broker.log.segment import (
    BatchSpan,
    FetchDataInfo,
    LeaderEpochCache,
    LogOffsetMetadata,
    LogSegment,
    TimestampAndOffset,
)
from broker.log.transaction_index import AbortedTxn
from common.config import INT_MAX
from common.record import NO_TIMESTAMP, BatchHeader, iter_headers, parse_header, read_end_txn_marker
from proto.errors import ErrorCode, KafkaError, KafkaStorageError, OffsetOutOfRangeError
from proto.types import TopicPartition

__all__ = [
    "AbortedTxn",
    "AppendOrigin",
    "FetchDataInfo",
    "LeaderEpochCache",
    "Log",
    "LogAppendInfo",
    "LogOffsetMetadata",
    "TimestampAndOffset",
    "UnexpectedAppendOffsetError",
]

logger = logging.getLogger(__name__)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _nothing() -> None:
    """A log nobody asked to hear of its offsets' moves from (a test's, a tool's)."""


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append that does not start at the log end offset or skips offsets.

    Kafka's UnexpectedAppendOffsetException / OffsetsOutOfOrderException: not a
    wire error but a fetcher-side failure, so it carries UNKNOWN_SERVER_ERROR
    (what Kafka sends for exceptions without a code). A dedicated class rather
    than CORRUPT_MESSAGE because the bytes are fine: the fetcher fetched from the
    wrong place, and it needs `first_offset` to fix that (Kafka truncates fully to
    the batch's base when the leader's log start lies inside a batch).
    Unlike Kafka, a gap is refused too in a non-compacted log: without compaction, offsets never skip.
    """

    code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


@dataclass(slots=True)
class LogAppendInfo:
    """What an append wrote (Kafka's LogAppendInfo); -1 fields when nothing was appended."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    num_messages: int
    valid_bytes: int
    # The appended bytes until `batches` is first read, then their headers.
    _appended: memoryview | tuple[BatchHeader, ...] = field(default=(), repr=False, compare=False)
    # An idempotent producer's retry of a batch already in the log: nothing was written,
    # and the offsets are those of the original append (Kafka answers the retry with them).
    duplicate: bool = False

    @property
    def batches(self) -> tuple[BatchHeader, ...]:
        """Each batch's header as appended (offsets, leader epoch, producer id/epoch/sequence).

        Decoded on first use: most appends come from producers that are not
        idempotent, and nobody looks.
        """
        if isinstance(self._appended, memoryview):
            self._appended = tuple(header for _, header in iter_headers(self._appended, validate=False))
        return self._appended


def _append_info(first_offset: int, spans: list[BatchSpan], log_append_time: int,
                 appended: memoryview | tuple[BatchHeader, ...]) -> LogAppendInfo:
    max_timestamp = NO_TIMESTAMP
    offset_of_max_timestamp = -1
    for span in spans:
        if span.max_timestamp > max_timestamp:
            max_timestamp = span.max_timestamp
            offset_of_max_timestamp = span.last_offset
    last_offset = spans[-1].last_offset
    if log_append_time != NO_TIMESTAMP:
        # Kafka (v2, LogAppendTime): every batch has the same time; it names the last offset.
        offset_of_max_timestamp = last_offset
    return LogAppendInfo(first_offset, last_offset, max_timestamp, offset_of_max_timestamp, log_append_time,
                         last_offset - first_offset + 1, sum(span.size for span in spans), appended)


def _nothing_appended() -> LogAppendInfo:
    return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, NO_TIMESTAMP, 0, 0)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _reports_io_errors(
    action: str,
) -> Callable[[Callable[Concatenate[Log, _P], _R]], Callable[Concatenate[Log, _P], _R]]:
    """Kafka's Log.maybeHandleIOException: an OSError (or a storage error from a segment or checkpoint below) takes
    the log's dir offline through the failure channel and fails the call with KAFKA_STORAGE_ERROR; a log already
    taken offline fails at once. Without a channel (tools, unit tests) the error passes unchanged."""

    def decorate(method: Callable[Concatenate[Log, _P], _R]) -> Callable[Concatenate[Log, _P], _R]:
        @functools.wraps(method)
        def wrapper(self: Log, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            if self.offline:
                raise KafkaStorageError(
                    f"The log of {self.topic_partition} is in the offline log dir {self.dir.parent}")
            try:
                return method(self, *args, **kwargs)
            except LogDirFailedError:
                raise
            except (OSError, KafkaStorageError) as e:
                if self._failure_channel is None:
                    raise
                message = f"Error while {action} {self.topic_partition} in dir {self.dir.parent}"
                raise self._failure_channel.storage_error(self.dir.parent, message, e) from e

        return wrapper

    return decorate


class Log:
    """A partition's log. Build it with `Log.open`."""

    def __init__(self, dir: Path, config: LogConfig, time: Callable[[], int],
                 leader_epoch_cache: LeaderEpochCache | None, producer_id_expiration_ms: int,
                 log_dir_failure_channel: LogDirFailureChannel | None = None,
                 scheduler: Executor | None = None, offsets_moved: Callable[[], None] | None = None) -> None:
        self.dir = dir
        # Told (under the log's lock) each time the recovery point or the log start offset moves: the LogManager
        # writes a dir's checkpoints of them only when one did.
        self._offsets_moved = offsets_moved or _nothing
        # Where a rolled segment is flushed (Kafka's "flush-log" task); None: by the thread that rolled it.
        self._scheduler = scheduler
        self._failure_channel = log_dir_failure_channel
        # Set once the log's dir went offline: every operation fails with KAFKA_STORAGE_ERROR from then on.
        self.offline = False
        self.topic_partition = TopicPartition.parse(dir.name)
        self.config = config
        self.leader_epoch_cache = leader_epoch_cache
        # The idempotent producers' last batches: checked on leader appends, rebuilt from
        # the log on load and after truncation, snapshotted at each roll and on close.
        self.producer_state = ProducerStateManager(self.topic_partition, dir, producer_id_expiration_ms)
        self.recovery_report: list[RecoveryAction] = []
        self._time = time
        self._lock = threading.Lock()
        self._ident = f"[Log partition={self.topic_partition}, dir={dir.parent}] "
        self._segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self._log_start_offset = 0
        self._recovery_point = 0
        self._next_offset_metadata = LogOffsetMetadata(0, 0, 0)
        self._last_flush_time = time()
        # Set by a roll: the old segment (and the snapshot taken at the roll) to flush (Kafka schedules it).
        self._flush_after_roll: int | None = None
        self._rolled_snapshot: str | None = None
        # Held by a flush-log task and by close: a log closed (or deleted) is never flushed behind its back.
        self._roll_flush_lock = threading.Lock()
        # Bumped by truncation, so a flush that raced with one does not move the recovery point.
        self._truncations = 0

    @classmethod
    def open(cls, dir: Path, config: LogConfig, *, recovery_point: int = 0, log_start_offset: int = 0,
             clean_shutdown: bool = False, time: Callable[[], int] = _wall_clock_ms,
             leader_epoch_cache: LeaderEpochCache | None = None,
             producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
             log_dir_failure_channel: LogDirFailureChannel | None = None, scheduler: Executor | None = None,
             created: bool = False, offsets_moved: Callable[[], None] | None = None) -> Log:
        """Open (or create) the log in `dir`, recovering it if the last stop was not clean.

        `recovery_point` and `log_start_offset` come from the log directory's
        checkpoints; `time` is the millisecond clock (injected for tests).
        What recovery changed is in `recovery_report`. I/O errors on the log from then on are reported to
        `log_dir_failure_channel`. A rolled segment is flushed on `scheduler` when given. `created`: the caller
        has just made `dir`, empty (a new replica's), so there is nothing in it to load. `offsets_moved` is
        called each time the recovery point or the log start offset moves after the load.
        """
        log = cls(dir, config, time, leader_epoch_cache, producer_id_expiration_ms, log_dir_failure_channel, scheduler,
                  offsets_moved)
        loaded = LogLoader(dir, config, time, clean_shutdown=clean_shutdown,
                           log_start_offset_checkpoint=log_start_offset, recovery_point_checkpoint=recovery_point,
                           leader_epoch_cache=leader_epoch_cache, producer_state=log.producer_state,
                           log_ident=log._ident, created=created).load()
        log._segments = loaded.segments
        log._base_offsets = [segment.base_offset for segment in loaded.segments]
        log._log_start_offset = loaded.log_start_offset
        log._recovery_point = loaded.recovery_point
        log._next_offset_metadata = loaded.next_offset_metadata
        log.recovery_report = loaded.recovery_report
        return log

    def __repr__(self) -> str:
        return (f"Log(dir={self.dir}, log_start_offset={self._log_start_offset},"
                f" log_end_offset={self.log_end_offset}, segments={len(self._segments)})")

    def update_config(self, config: LogConfig) -> None:
        """A topic config changed live (Kafka's Log.updateConfig): the next roll, retention pass, flush and
        append read the new values."""
        with self._lock:
            self.config = config
            for segment in self._segments:
                segment.config = config

    # ------------------------------------------------------------------ properties

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset_metadata.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._next_offset_metadata

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def last_flush_time(self) -> int:
        return self._last_flush_time

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(segment.size for segment in self._segments)

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        with self._lock:
            return tuple(self._segments)

    @property
    def truncation_count(self) -> int:
        """How many times the tail was cut: the log cleaner's checkpoint is void past a change of it."""
        return self._truncations

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    # ------------------------------------------------------------------ producer state

    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        """Forget producers idle longer than producer.id.expiration.ms."""
        with self._lock:
            self.producer_state.remove_expired_producers(self._time() if now_ms is None else now_ms)

    def last_stable_offset(self, high_watermark: int) -> int:
        """Kafka's Log.lastStableOffset: the first offset of the oldest transaction still open (or closed by a
        marker not yet below `high_watermark`), capped by `high_watermark`, and never below the log start (Kafka's
        updateFirstUnstableOffset: DeleteRecords may have removed the transaction's first records). READ_COMMITTED
        reads stop there."""
        with self._lock:
            return max(self.producer_state.last_stable_offset(high_watermark),
                       min(self._log_start_offset, high_watermark))

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        with self._lock:
            self.producer_state.on_high_watermark_updated(high_watermark)

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer this log's producer state holds (Kafka's Log.activeProducers, for DescribeProducers)."""
        with self._lock:
            return [entry.describe() for entry in self.producer_state.active_producers.values()]

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest unstable transaction, None without one: the log cleaner stops there."""
        with self._lock:
            return self.producer_state.first_unstable_offset()

    @_reports_io_errors("reading from")
    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int | None = None
                                     ) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset), from the `.txnindex` of the
        segment holding `start_offset` on, stopping at the first entry whose LSO passes the bound (Kafka's
        Log.collectAbortedTransactions). The bound defaults to Kafka's for a fetch: the base of the segment
        after the one holding `start_offset`, else the log end; a wider range only lists more transactions,
        which a consumer matches to the batches it got by producer id and offsets."""
        with self._lock:
            first = max(bisect.bisect_right(self._base_offsets, start_offset) - 1, 0)
            if upper_bound_offset is None:
                upper_bound_offset = (self._base_offsets[first + 1] if first + 1 < len(self._segments)
                                      else self.log_end_offset)
            found: list[AbortedTxn] = []
            for segment in self._segments[first:]:
                if segment.txn_index.last_offset is None:
                    continue  # no abort in this segment (most): nothing to collect, nothing that ends the search
                entries, complete = segment.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
                found += entries
                if complete:
                    break
            return found

    # ------------------------------------------------------------------ append

    @_reports_io_errors("appending records to")
    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int,
                         origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
        """Validate a produce request's batches, assign offsets and the leader epoch, append them.

        `origin` COORDINATOR is the transaction coordinator writing markers (control batches), which a
        client may not, or the group coordinator writing a TxnOffsetCommit's transactional batch.

        Offsets and epoch are patched into each batch header (outside the CRC), so
        records are never re-encoded. A writable buffer is patched in place (as
        Kafka does with the request's ByteBuffer) and must not be reused while the
        returned info is; read-only bytes are copied once. Nothing is written
        unless every batch is valid.
        """
        view = _byte_view(records)
        batches = analyze_and_validate_records(view, self.config.max_message_bytes, self.topic_partition)
        if not batches:
            return _nothing_appended()
        # Kafka's LogValidator: the topic's compression.type wins over the producer's codec; but markers (the
        # transaction coordinator's batches) stay uncompressed ("Do not compress control records").
        if not any(header.is_control for header in batches):
            view, batches = recompress_to_topic_codec(view, batches, self.config.compression_codec,
                                                      self.config.max_message_bytes, self.topic_partition)
        idempotent = validate_leader_append(view, batches, segment_bytes=self.config.segment_bytes,
                                            compacted=self.config.compact, tp=self.topic_partition, origin=origin)
        if view.readonly:
            view = memoryview(bytearray(view))
        log_append_time = self.config.log_append_time
        with self._lock:
            if origin is AppendOrigin.COORDINATOR:
                for header, marker in _producer_batches(view, batches):
                    if marker is not None:
                        self.producer_state.validate_marker(header, marker)
                    else:
                        self.producer_state.validate_coordinator_batch(header)
            elif idempotent:
                duplicate = self.producer_state.validate_append(batches)
                if duplicate is not None:
                    return LogAppendInfo(duplicate.first_offset, duplicate.last_offset, NO_TIMESTAMP, -1, NO_TIMESTAMP,
                                         0, 0, duplicate=True)
            now = self._time()
            stamp = now if log_append_time else NO_TIMESTAMP
            first_offset = self.log_end_offset
            spans, producer_batch_positions = assign_offsets(view, batches, first_offset, leader_epoch, stamp)
            self._append(view, first_offset, spans, now,
                         [_producer_batch(view, position, parse_header(view, position))
                          for position in producer_batch_positions])
            if self.leader_epoch_cache is not None and leader_epoch >= 0:
                self.leader_epoch_cache.assign(leader_epoch, first_offset)
            flush_to = self._flush_target(now)
        if flush_to is not None:
            self.flush(flush_to)
        return _append_info(first_offset, spans, stamp, view)

    @_reports_io_errors("appending records to")
    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches fetched from the leader, keeping its offsets, epochs and timestamps.

        The batches must start exactly at the log end offset and be contiguous;
        in a compacted log they must only start at or past it and increase.
        """
        view = _byte_view(records)
        gaps = self.config.compact
        batches = analyze_and_validate_records(view, self.config.max_message_bytes, self.topic_partition, gaps)
        if not batches:
            return _nothing_appended()
        for previous, header in itertools.pairwise(batches):
            if header.base_offset != previous.next_offset and not (gaps and header.base_offset > previous.last_offset):
                raise UnexpectedAppendOffsetError(
                    f"Out of order offsets found in append to {self.topic_partition}: batch with base offset"
                    f" {header.base_offset} follows a batch ending at offset {previous.last_offset}",
                    batches[0].base_offset, batches[-1].last_offset,
                )
        spans = [BatchSpan(header.last_offset, header.max_timestamp, header.size) for header in batches]
        first_offset = batches[0].base_offset
        with self._lock:
            if first_offset < self.log_end_offset or (first_offset > self.log_end_offset and not gaps):
                problem = "is less than" if first_offset < self.log_end_offset else "skips past"
                raise UnexpectedAppendOffsetError(
                    f"Unexpected offset in append to {self.topic_partition}. First offset {first_offset} {problem}"
                    f" the next offset {self.log_end_offset}. Last offset in append: {batches[-1].last_offset}."
                    f" Log start offset = {self._log_start_offset}",
                    first_offset, batches[-1].last_offset,
                )
            now = self._time()
            self._append(view, first_offset, spans, now, _producer_batches(view, batches))
            if self.leader_epoch_cache is not None:
                last_epoch = None
                for header in batches:
                    epoch = header.partition_leader_epoch
                    if epoch >= 0 and epoch != last_epoch:
                        self.leader_epoch_cache.assign(epoch, header.base_offset)
                        last_epoch = epoch
            flush_to = self._flush_target(now)
        if flush_to is not None:
            self.flush(flush_to)
        return _append_info(first_offset, spans, NO_TIMESTAMP, tuple(batches))

    def _append(self, data: memoryview, first_offset: int, spans: list[BatchSpan], now: int,
                producer_batches: list[ProducerBatch]) -> None:
        """Write batches that already carry their final offsets at the log end (lock held), and apply the
        producer batches among them (final offsets too) to the producer state; a marker that aborts a
        transaction adds it to its segment's `.txnindex` (Kafka's Log.append, updateTxnIndex).

        A leader's append is always one run (larger requests are refused). A
        follower's fetch may carry more than a segment's worth, which Kafka would
        refuse, leaving the follower stuck on a leader whose segment.bytes shrank:
        here it is split into runs that each fit in one segment (bytes and int32
        relative offsets), each written with one write. Rolls fall only between
        batches, and each run's producer batches are applied before the next
        roll snapshots the producer state at its base offset.
        """
        segment_bytes = self.config.segment_bytes
        start = 0
        run_first_offset = first_offset
        pending = iter(producer_batches)
        next_producer_batch = next(pending, None)
        i = 0
        while i < len(spans):
            j = i
            size = 0
            max_timestamp = NO_TIMESTAMP
            while j < len(spans):
                span = spans[j]
                if j > i and (size + span.size > segment_bytes or span.last_offset - run_first_offset > INT_MAX):
                    break
                size += span.size
                max_timestamp = max(max_timestamp, span.max_timestamp)
                j += 1
            last_offset = spans[j - 1].last_offset
            segment = self._maybe_roll(size, max_timestamp, last_offset, now)
            segment.append(data[start:start + size], spans[i:j])
            while next_producer_batch is not None and next_producer_batch.header.last_offset <= last_offset:
                aborted = self.producer_state.update(*next_producer_batch)
                if aborted is not None:
                    segment.txn_index.append(aborted)
                next_producer_batch = next(pending, None)
            start += size
            run_first_offset = last_offset + 1
            i = j
            self._next_offset_metadata = LogOffsetMetadata(run_first_offset, segment.base_offset, segment.size)

    # ------------------------------------------------------------------ roll

    def _maybe_roll(self, messages_size: int, max_timestamp_in_messages: int, max_offset_in_messages: int,
                    now: int) -> LogSegment:
        segment = self.active_segment
        if segment.should_roll(messages_size, max_timestamp_in_messages, max_offset_in_messages, now):
            logger.debug(
                "%sRolling new log segment (log_size = %d/%d, offset_index_size = %d/%d, time_index_size = %d/%d,"
                " inactive_time_ms = %d/%d).", self._ident, segment.size, self.config.segment_bytes,
                segment.offset_index.entries, segment.offset_index.max_entries, segment.time_index.entries,
                segment.time_index.max_entries, segment.time_waited_for_roll(now, max_timestamp_in_messages),
                self.config.segment_ms,
            )
            segment = self._roll(now)
        return segment

    @_reports_io_errors("rolling log segment for")
    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op when the active one is empty)."""
        with self._lock:
            now = self._time()
            segment = self._roll(now)
            flush_to = self._flush_target(now)
        if flush_to is not None:
            self.flush(flush_to)
        return segment

    def _roll(self, now: int) -> LogSegment:
        active = self.active_segment
        if active.size == 0:
            return active
        new_offset = self.log_end_offset
        # Kafka snapshots producer state at every roll, so a restart replays at most the active segment; with a
        # scheduler the file is fsynced by the flush-log task, not under the lock.
        self._rolled_snapshot = self.producer_state.take_snapshot(new_offset, sync=self._scheduler is None)
        active.on_become_inactive()
        segment = self._add_segment(new_offset, now)
        self._next_offset_metadata = LogOffsetMetadata(new_offset, new_offset, 0)
        self._flush_after_roll = new_offset
        logger.info("%sRolled new log segment at offset %d", self._ident, new_offset)
        return segment

    def _add_segment(self, base_offset: int, now: int) -> LogSegment:
        segment = LogSegment(self.dir, base_offset, self.config, now, create=True)
        self._segments.append(segment)
        self._base_offsets.append(base_offset)
        return segment

    # ------------------------------------------------------------------ flush

    def _flush_target(self, now: int) -> int | None:
        """After an append or roll (lock held): the offset to flush up to once the lock is released.

        Everything when flush.messages or flush.ms say so, else the segment a roll
        just sealed (Kafka schedules that flush right after rolling: with a scheduler it is
        handed to it here, so no append waits for it).
        """
        rolled_to = self._flush_after_roll
        self._flush_after_roll = None
        if rolled_to is not None and self._scheduler is not None:
            self._scheduler.submit(self._flush_rolled, rolled_to, self._rolled_snapshot)
            rolled_to = None
        if (self.unflushed_messages >= self.config.flush_interval_messages
                or now - self._last_flush_time >= self.config.flush_interval_ms):
            return self.log_end_offset
        return rolled_to

    def _flush_rolled(self, rolled_to: int, snapshot: str | None) -> None:
        """Kafka's flush-log task: the producer snapshot taken at the roll, then the segments below it."""
        with self._roll_flush_lock:
            if not self._segments:
                return  # closed (deleted, or the broker stopping) since the roll: close flushed what it kept
            try:
                if snapshot is not None:
                    self._flush_snapshot(snapshot)
                self.flush(rolled_to)
            except Exception:
                # An I/O error was reported to the failure channel on its way here; nothing waits for this task.
                logger.exception("%sFailed to flush the log rolled at offset %d", self._ident, rolled_to)

    @_reports_io_errors("flushing the producer snapshot of")
    def _flush_snapshot(self, snapshot: str) -> None:
        with contextlib.suppress(FileNotFoundError):  # a newer roll or a truncation removed it meanwhile
            fsync_file(snapshot)

    def maybe_flush(self) -> None:
        """For a periodic scheduler (Kafka's LogManager.flushDirtyLogs): flush if flush.ms has passed."""
        if self._time() - self._last_flush_time >= self.config.flush_interval_ms:
            self.flush()

    @_reports_io_errors("flushing log for")
    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, `up_to_offset`) and advance the recovery point."""
        # First the leader-epoch history a new leader wrote without fsync, so the recovery point never passes a
        # record whose epoch is not on disk.
        if self.leader_epoch_cache is not None:
            self.leader_epoch_cache.sync()
        with self._lock:
            target = self.log_end_offset if up_to_offset is None else min(up_to_offset, self.log_end_offset)
            if target <= self._recovery_point:
                return
            first = max(bisect.bisect_right(self._base_offsets, self._recovery_point) - 1, 0)
            last = bisect.bisect_left(self._base_offsets, target)
            segments = self._segments[first:last]
            truncations = self._truncations
        for segment in segments:
            segment.flush()
        fsync_dir(self.dir)
        with self._lock:
            if truncations == self._truncations and target > self._recovery_point:
                self._recovery_point = target
                self._last_flush_time = self._time()
                self._offsets_moved()

    # ------------------------------------------------------------------ read

    @_reports_io_errors("reading from")
    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True) -> FetchDataInfo:
        """Whole batches from the one holding `start_offset`, below `max_offset` (e.g. the high watermark).

        At most `max_bytes`, except that with `min_one_message` the first batch
        comes whole whatever its size (KIP-74). Reading at the log end (or at
        `max_offset`) gives an empty slice; below the log start or past the log
        end raises OFFSET_OUT_OF_RANGE.
        """
        with self._lock:
            end = self._next_offset_metadata
            if start_offset == end.message_offset:
                return FetchDataInfo(end, FileSlice(self.active_segment.log_file, end.relative_position_in_segment, 0))
            if start_offset > end.message_offset or start_offset < self._log_start_offset:
                raise OffsetOutOfRangeError(
                    f"Received request for offset {start_offset} for partition {self.topic_partition}, but we only"
                    f" have log segments in the range {self._log_start_offset} to {end.message_offset}."
                )
            bound_segment, bound_position = self._position_bound(max_offset)
            first = bisect.bisect_right(self._base_offsets, start_offset) - 1
            for i in range(first, len(self._segments)):
                segment = self._segments[i]
                max_position = segment.size if i < bound_segment else bound_position if i == bound_segment else 0
                info = segment.read(start_offset, max_bytes, max_position, min_one_message)
                if info is not None:
                    return info
            return FetchDataInfo(end, FileSlice(self.active_segment.log_file, end.relative_position_in_segment, 0))

    def _position_bound(self, max_offset: int | None) -> tuple[int, int]:
        """(segment index, position) where batches at or past `max_offset` begin."""
        last = len(self._segments) - 1
        if max_offset is None or max_offset >= self.log_end_offset:
            return last, self.active_segment.size
        i = bisect.bisect_right(self._base_offsets, max_offset) - 1
        if i < 0:
            return 0, 0
        found = self._segments[i].translate_offset(max_offset)
        return (i, found[0]) if found is not None else (i, self._segments[i].size)

    @_reports_io_errors("reading from")
    def fetch_offset_by_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """The first record with timestamp >= `target_timestamp` (ListOffsets); None if every record is older."""
        with self._lock:
            for segment in self._segments:
                if segment.largest_timestamp >= target_timestamp:
                    found = segment.find_offset_by_timestamp(target_timestamp, self._log_start_offset)
                    # None from a segment the cleaner emptied (its age is its file's): look further.
                    if found is not None:
                        return found
            return None

    def fetch_offset_of_max_timestamp(self) -> TimestampAndOffset | None:
        """ListOffsets' MAX_TIMESTAMP (KIP-734): the first record holding the log's largest timestamp, with its
        batch's leader epoch (the record's own offset, as Kafka answers since KAFKA-16310, not its batch's last);
        None when no batch has a timestamp. Only the one batch holding it is decoded."""
        with self._lock:
            segment = max(self._segments, key=lambda s: s.max_timestamp_and_offset.timestamp)
            largest = segment.max_timestamp_and_offset.timestamp
            if largest == NO_TIMESTAMP:
                return None
            return segment.find_offset_by_timestamp(largest, self._log_start_offset)

    # ------------------------------------------------------------------ truncation

    @_reports_io_errors("truncating log for")
    def truncate_to(self, target_offset: int) -> bool:
        """Drop every batch holding an offset >= `target_offset` (follower truncation).

        A batch straddling the target goes whole, so the new log end offset is
        the base of that batch, not the target (Kafka sets the LEO to the target
        and lets it point inside a missing batch; here it always matches the file).
        Returns False when there was nothing to drop.
        """
        if target_offset < 0:
            raise ValueError(f"Cannot truncate partition {self.topic_partition} to a negative offset ({target_offset})")
        with self._lock:
            if target_offset >= self.log_end_offset:
                logger.info("%sTruncating to %d has no effect as the largest offset in the log is %d", self._ident,
                            target_offset, self.log_end_offset - 1)
                # KAFKA-10706: the cache may hold an entry at the log end (a leader that assigned its epoch and
                # wrote nothing before losing leadership); left there, the follower asks about that epoch for ever.
                if self.leader_epoch_cache is not None:
                    self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
                return False
            logger.info("%sTruncating to offset %d", self._ident, target_offset)
            if self._segments[0].base_offset > target_offset:
                self._truncate_fully_and_start_at(target_offset)
                return True
            keep = bisect.bisect_right(self._base_offsets, target_offset)
            # From the tail backwards: a kill between two deletions must leave a prefix of the log, not a hole.
            for segment in reversed(self._segments[keep:]):
                segment.delete()
            del self._segments[keep:]
            del self._base_offsets[keep:]
            active = self.active_segment
            active.truncate_to(target_offset, self._time())
            end = active.read_next_offset()
            self._next_offset_metadata = LogOffsetMetadata(end, active.base_offset, active.size)
            if end < self._recovery_point or end < self._log_start_offset:
                self._recovery_point = min(self._recovery_point, end)
                self._log_start_offset = min(self._log_start_offset, end)
                self._offsets_moved()
            self._truncations += 1
            if self.leader_epoch_cache is not None:
                self.leader_epoch_cache.truncate_from_end(end)
            rebuild_producer_state(self.producer_state, self._segments, self._base_offsets, self._log_start_offset,
                                   end, self._time())
            return True

    @_reports_io_errors("truncating the entire log for")
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start empty at `new_offset` (a follower far behind the leader's log start)."""
        with self._lock:
            self._truncate_fully_and_start_at(new_offset)

    def _truncate_fully_and_start_at(self, new_offset: int) -> None:
        logger.info("%sTruncate and start at offset %d", self._ident, new_offset)
        for segment in reversed(self._segments):
            segment.delete()
        self._segments.clear()
        self._base_offsets.clear()
        self._add_segment(new_offset, self._time())
        self._next_offset_metadata = LogOffsetMetadata(new_offset, new_offset, 0)
        if self.leader_epoch_cache is not None:
            self.leader_epoch_cache.clear_and_flush()
        self._log_start_offset = new_offset
        self._recovery_point = new_offset
        self._offsets_moved()
        self._truncations += 1
        self.producer_state.truncate_fully_and_start_at(new_offset)

    # ------------------------------------------------------------------ retention

    @_reports_io_errors("deleting segments for")
    def delete_old_segments(self, now_ms: int | None = None, high_watermark: int | None = None) -> int:
        """Retention (Kafka's deleteOldSegments): drop whole segments from the head; return how many.

        In order: segments whose newest record is older than retention.ms, then
        the oldest while the log exceeds retention.bytes, then those entirely
        below the log start offset. Never the active segment, and, when
        `high_watermark` is given, only segments entirely below it. A log whose
        cleanup.policy lacks `delete` (compact only) keeps every segment the log
        start offset does not cut: the cleaner, not time or size, bounds it.
        """
        now = self._time() if now_ms is None else now_ms
        with self._lock:
            deleted = 0
            if self.config.delete and self.config.retention_ms >= 0:
                deleted += self._delete_head_segments(
                    lambda segment, _: now - segment.largest_timestamp > self.config.retention_ms,
                    high_watermark, f"retention time {self.config.retention_ms}ms breach",
                )
            if self.config.delete and self.config.retention_bytes >= 0:
                excess = sum(segment.size for segment in self._segments) - self.config.retention_bytes

                def over_size(segment: LogSegment, _: LogSegment) -> bool:
                    nonlocal excess
                    if excess - segment.size < 0:
                        return False
                    excess -= segment.size
                    return True

                deleted += self._delete_head_segments(
                    over_size, high_watermark, f"retention size in bytes {self.config.retention_bytes} breach"
                )
            deleted += self._delete_log_start_offset_breached_segments(high_watermark)
            return deleted

    @_reports_io_errors("deleting segments for")
    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> None:
        """Move the log start offset up (DeleteRecords), dropping segments entirely below it.

        The caller checks it against the high watermark, which the log does not know.
        """
        with self._lock:
            if new_log_start_offset > self.log_end_offset:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {new_log_start_offset} of partition"
                    f" {self.topic_partition} since it is larger than the log end offset {self.log_end_offset}"
                )
            if new_log_start_offset <= self._log_start_offset:
                return
            logger.info("%sIncrementing log start offset to %d", self._ident, new_log_start_offset)
            self._log_start_offset = new_log_start_offset
            self._offsets_moved()
            if self.leader_epoch_cache is not None:
                self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
            self.producer_state.truncate_head(new_log_start_offset)
            self._delete_log_start_offset_breached_segments(None)

    def _delete_log_start_offset_breached_segments(self, high_watermark: int | None) -> int:
        start = self._log_start_offset
        return self._delete_head_segments(lambda _, following: following.base_offset <= start, high_watermark,
                                          f"log start offset {start} breach")

    def _delete_head_segments(self, predicate: Callable[[LogSegment, LogSegment], bool],
                              high_watermark: int | None, reason: str) -> int:
        """Delete the longest run of segments from the head for which `predicate(segment, next)` holds (lock held)."""
        count = 0
        while count < len(self._segments) - 1:
            segment, following = self._segments[count], self._segments[count + 1]
            if high_watermark is not None and following.base_offset > high_watermark:
                break
            if not predicate(segment, following):
                break
            count += 1
        if not count:
            return 0
        deletable = self._segments[:count]
        logger.info("%sFound deletable segments with base offsets [%s] due to %s", self._ident,
                    ",".join(str(s.base_offset) for s in deletable), reason)
        for segment in deletable:
            segment.delete()
        del self._segments[:count]
        del self._base_offsets[:count]
        if self._segments[0].base_offset > self._log_start_offset:
            self._log_start_offset = self._segments[0].base_offset
            self._offsets_moved()
            if self.leader_epoch_cache is not None:
                self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
            self.producer_state.truncate_head(self._log_start_offset)
        return count

    # ------------------------------------------------------------------ log cleaner

    @_reports_io_errors("replacing segments for")
    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment],
                         crash_point: Callable[[str], None] = lambda step: None) -> bool:
        """Swap the cleaner's `.cleaned` segment in for the group `old` it was copied from (Kafka's
        Log.replaceSegments); False, with the cleaned files removed, when `old` is no longer in the log
        (truncated or deleted meanwhile: the cleaning is abandoned, as Kafka aborts it).

        The cleaned files are already fsynced. Renaming them to `.swap`, the `.log` last, is the commit
        point: a crash before it leaves `.cleaned` files that loading discards, a crash after it a
        `.log.swap` that loading completes (`_complete_swaps`). Readers keep the old files they hold.
        """
        with self._lock:
            start = next((i for i, s in enumerate(self._segments) if s is old[0]), -1)
            end = start + len(old)
            if start < 0 or self._segments[start:end] != old or end >= len(self._segments):
                logger.info("%sAbandoning the cleaned segment %s: its segments changed while it was written",
                            self._ident, cleaned.path)
                cleaned.close()
                cleaned.change_file_suffixes(CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX)
                for target in (cleaned.log_file, cleaned.offset_index, cleaned.time_index, cleaned.txn_index):
                    target.path.unlink(missing_ok=True)
                return False
            cleaned.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
            fsync_dir(self.dir)
            crash_point("swap")
            for segment in old:
                segment.delete()
            cleaned.change_file_suffixes(SWAP_FILE_SUFFIX, "")
            fsync_dir(self.dir)
            self._segments[start:end] = [cleaned]
            self._base_offsets[start:end] = [cleaned.base_offset]
            return True

    # ------------------------------------------------------------------ close

    def mark_offline(self) -> None:
        """Its dir went offline (Kafka's closeHandlers): nothing more is read or written here. The files' handles
        and index mappings go with the last reference to the log."""
        with self._lock:
            self.offline = True

    @_reports_io_errors("closing log for")
    def close(self) -> None:
        """Flush, then seal every segment (indexes trimmed to their entries). The log is unusable after."""
        with self._roll_flush_lock:
            self.flush()
            with self._lock:
                # A snapshot at the log end: the next start after a clean stop replays nothing.
                self.producer_state.take_snapshot(self.log_end_offset)
                for segment in self._segments:
                    segment.close()
                self._segments.clear()
                self._base_offsets.clear()


def _producer_batch(view: memoryview, position: int, header: BatchHeader) -> ProducerBatch:
    return ProducerBatch(header, read_end_txn_marker(view, position, header) if header.is_control else None)


def _producer_batches(view: memoryview, batches: list[BatchHeader]) -> list[ProducerBatch]:
    """The batches with a producer id, a marker read from each control batch (one record, never per record)."""
    found = []
    position = 0
    for header in batches:
        if header.producer_id >= 0:
            found.append(_producer_batch(view, position, header))
        position += header.size
    return found


def _byte_view(records: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(records)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")

"""LogLoader: opening a partition's directory after a start, clean or not (Kafka 3's kafka.log.LogLoader).

In order, as Kafka loads a log:
1. leftovers go: `.cleaned` files of an interrupted cleaning, `.deleted` files of an interrupted deletion,
   indexes without their `.log`; a cleaner swap committed before a crash (`.log.swap`) is completed;
2. each `<base>.log` becomes a LogSegment; the indexes of segments below the recovery point are
   sanity-checked (and rebuilt if damaged), and every segment holding offsets at or past it is
   re-validated batch by batch (after a clean shutdown, none): the first invalid byte cuts the log there,
   deleting every later segment;
3. a non-compacted log is cut at the first segment that does not start where the one before it ends;
4. the log start offset is at least the first segment's base, the recovery point is the log end, the
   leader epoch cache is trimmed to [log start, log end), and the producers' state is rebuilt
   (`rebuild_producer_state`, which truncation calls too); the `.txnindex` of every re-validated segment is
   rebuilt on the way, from a producer state replayed from a snapshot at or below that segment's base.

Every change on disk is logged as Kafka logs it and returned as a RecoveryAction. Loading runs before the
log serves anything, so it needs no lock.
"""

from __future__ import annotations

import bisect
import enum
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker.config.log_config import LogConfig
from broker.log.batch_scan import scan_batches
from broker.log.files import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    fsync_dir,
)
from broker.log.index import CorruptIndexError
from broker.log.producer_state import ProducerBatch, ProducerStateManager
from broker.log.segment import LeaderEpochCache, LogOffsetMetadata, LogSegment

__all__ = ["LoadedLog", "LogLoader", "RecoveryAction", "RecoveryActionKind", "rebuild_producer_state"]

logger = logging.getLogger(__name__)


class RecoveryActionKind(enum.Enum):
    TRUNCATED_SEGMENT = "truncated segment"
    DELETED_SEGMENT = "deleted segment"
    REBUILT_INDEX = "rebuilt index"
    DELETED_FILE = "deleted file"


@dataclass(frozen=True, slots=True)
class RecoveryAction:
    """One thing opening the log changed on disk, and why."""

    kind: RecoveryActionKind
    file: Path
    position: int  # byte position the change starts at (0 for whole files)
    bytes: int  # bytes of log data removed (0 for an index rebuild)
    reason: str


@dataclass(slots=True)
class _Recovery:
    """Collects RecoveryActions while logging each as Kafka would."""

    ident: str
    actions: list[RecoveryAction] = field(default_factory=list)

    def record(self, kind: RecoveryActionKind, file: Path, position: int, size: int, reason: str) -> None:
        self.actions.append(RecoveryAction(kind, file, position, size, reason))
        if kind is RecoveryActionKind.TRUNCATED_SEGMENT:
            logger.warning("%sFound invalid messages in log segment %s at byte offset %d: %s. Truncated %d invalid"
                           " bytes at the end of the segment", self.ident, file, position, reason, size)
        elif kind is RecoveryActionKind.REBUILT_INDEX:
            logger.warning("%sFound a corrupted index file %s due to %s, recovering segment and rebuilding index"
                           " files...", self.ident, file, reason)
        else:
            logger.warning("%sDeleting %s (%d bytes): %s", self.ident, file, size, reason)


@dataclass(frozen=True, slots=True)
class LoadedLog:
    """What loading found (Kafka's LoadedLogOffsets, with the segments Kafka fills into its LogSegments)."""

    segments: list[LogSegment]  # at least one; the last is the active segment
    log_start_offset: int
    recovery_point: int
    next_offset_metadata: LogOffsetMetadata
    recovery_report: list[RecoveryAction]


def rebuild_producer_state(producer_state: ProducerStateManager, segments: list[LogSegment], base_offsets: list[int],
                           log_start_offset: int, log_end_offset: int, now: int,
                           replay_from: int | None = None) -> None:
    """Bring the producer state to the log end: latest usable snapshot, then replay the batches after it
    (Kafka's Log.rebuildProducerState). `base_offsets` are the segments' base offsets, in order.

    `replay_from` (recovery) starts from a snapshot at or below it, so every marker from there on is replayed;
    an aborted transaction missing from its segment's `.txnindex` is appended to it (entries go in marker
    order, so only a suffix can be missing)."""
    start = producer_state.truncate_and_reload(log_start_offset, log_end_offset, now, replay_from)
    if start >= log_end_offset:
        return
    first = max(bisect.bisect_right(base_offsets, start) - 1, 0)
    aborted_txns = producer_state.replay(
        ProducerBatch(header, marker) for segment in segments[first:] for header, marker in segment.producer_batches()
        if header.last_offset >= start
    )
    for aborted in aborted_txns:
        txn_index = segments[bisect.bisect_right(base_offsets, aborted.last_offset) - 1].txn_index
        if txn_index.last_offset is None or txn_index.last_offset < aborted.last_offset:
            txn_index.append(aborted)


class LogLoader:
    """Loads one log directory; `load` once, then hand the result to the Log."""

    def __init__(self, dir: Path, config: LogConfig, time: Callable[[], int], *, clean_shutdown: bool,
                 log_start_offset_checkpoint: int, recovery_point_checkpoint: int,
                 leader_epoch_cache: LeaderEpochCache | None, producer_state: ProducerStateManager,
                 log_ident: str, created: bool = False) -> None:
        """`created`: the caller has just made `dir` (a new replica's log), so it holds no file to clean up or
        recover."""
        self.dir = dir
        self._created = created
        self.config = config
        self._time = time
        self._clean_shutdown = clean_shutdown
        self._log_start_offset_checkpoint = log_start_offset_checkpoint
        self._recovery_point_checkpoint = recovery_point_checkpoint
        self._leader_epoch_cache = leader_epoch_cache
        self._producer_state = producer_state
        # The log's own prefix, so recovery's lines read as the log's (Kafka prints "[LogLoader ...]").
        self._ident = log_ident
        self._segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        # The first segment `segment.recover` rebuilt (an index failed its check, or it was not flushed).
        self._first_recovered = sys.maxsize

    def load(self) -> LoadedLog:
        recovery = _Recovery(self._ident)
        if self._created:
            # Nothing to list: three directory scans and a second mkdir were a tenth of a new replica's cost.
            base_offsets: list[int] = []
        else:
            self.dir.mkdir(parents=True, exist_ok=True)
            base_offsets = self._remove_temp_and_orphan_files(recovery)
        now = self._time()
        self._segments = [LogSegment(self.dir, base, self.config, now, create=False) for base in base_offsets]
        self._base_offsets = list(base_offsets)
        if self._clean_shutdown:
            first_unflushed = len(self._segments)
        else:
            # Segments holding any offset >= the recovery point: Kafka's logSegments(recoveryPoint, Long.MaxValue).
            first_unflushed = max(bisect.bisect_right(self._base_offsets, self._recovery_point_checkpoint) - 1, 0)
        self._check_indexes(first_unflushed, recovery)
        self._recover_segments(first_unflushed, recovery)
        self._cut_at_first_gap(recovery)
        log_start_offset = self._log_start_offset_checkpoint
        # Segments this load creates hold nothing to make durable (a new log's first, above all).
        existing = len(self._segments)
        if not self._segments:
            self._add_segment(log_start_offset, now)
        log_end_offset = self._segments[-1].read_next_offset()
        if log_end_offset < log_start_offset:
            # Kafka: "This could happen if segment files were deleted from the file system."
            self._delete_segments_from(0, recovery, f"log end offset {log_end_offset} is smaller than log start"
                                                    f" offset {log_start_offset}")
            existing = 0
            self._add_segment(log_start_offset, now)
            log_end_offset = log_start_offset
        active = self._segments[-1]
        active.resize_indexes(self.config.max_index_size)
        next_offset_metadata = LogOffsetMetadata(log_end_offset, active.base_offset, active.size)
        log_start_offset = max(log_start_offset, self._segments[0].base_offset)
        if self._leader_epoch_cache is not None:
            self._leader_epoch_cache.truncate_from_end(log_end_offset)
            self._leader_epoch_cache.truncate_from_start(log_start_offset)
        # Every recovered segment's `.txnindex` was emptied: the markers from the first of them on are replayed.
        first_recovered = min(self._first_recovered, first_unflushed)
        rebuild_producer_state(self._producer_state, self._segments, self._base_offsets, log_start_offset,
                               log_end_offset, now,
                               self._base_offsets[first_recovered] if first_recovered < len(self._segments) else None)
        # What recovery validated and rebuilt is made durable before the recovery point moves past it.
        for segment in self._segments[first_recovered:existing]:
            segment.flush()
        logger.info("%sCompleted load of log with %d segments, log start offset %d and log end offset %d",
                    self._ident, len(self._segments), log_start_offset, log_end_offset)
        return LoadedLog(self._segments, log_start_offset, log_end_offset, next_offset_metadata, recovery.actions)

    def _add_segment(self, base_offset: int, now: int) -> None:
        self._segments.append(LogSegment(self.dir, base_offset, self.config, now, create=True))
        self._base_offsets.append(base_offset)

    def _complete_swaps(self, recovery: _Recovery) -> None:
        """Finish a log cleaner swap a crash interrupted after its commit point (Kafka's LogLoader).

        A `<base>.log.swap` replaces every segment whose base offset lies in [base, its next offset);
        it is renamed into place and its indexes rebuilt. Index `.swap` files without their `.log.swap`
        belong to a swap that never committed and are dropped; the old segments hold everything.
        """
        swaps = sorted(self.dir.glob(f"*{LOG_FILE_SUFFIX}{SWAP_FILE_SUFFIX}"))
        for path in swaps:
            base = int(path.name.split(".")[0])
            next_offset = base
            with path.open("rb") as f:
                for batch in scan_batches(lambda pos, size: os.pread(f.fileno(), size, pos),
                                          path.stat().st_size):
                    if batch.problem is not None:
                        break
                    next_offset = batch.header.next_offset
            for old_log in self.dir.glob(f"*{LOG_FILE_SUFFIX}"):
                if _is_segment_file(old_log.name, LOG_FILE_SUFFIX) and base <= int(old_log.stem) < max(
                        next_offset, base + 1):
                    for old_file in (old_log, old_log.with_suffix(INDEX_FILE_SUFFIX),
                                     old_log.with_suffix(TIME_INDEX_FILE_SUFFIX),
                                     old_log.with_suffix(TXN_INDEX_FILE_SUFFIX)):
                        if old_file.exists():
                            recovery.record(RecoveryActionKind.DELETED_FILE, old_file, 0, old_file.stat().st_size,
                                            f"replaced by the committed cleaned segment {path.name}")
                            old_file.unlink()
            logger.info("%sCompleting the swap of the cleaned segment %s", self._ident, path)
            os.replace(path, path.with_name(path.name[: -len(SWAP_FILE_SUFFIX)]))
            # Its aborted transactions cannot be rebuilt from the log alone (their first offsets may lie in
            # earlier segments): the cleaner fsynced its .txnindex before the commit point, so it goes in too.
            txn_index = path.with_name(path.name.split(".")[0] + TXN_INDEX_FILE_SUFFIX)
            txn_swap = txn_index.with_name(txn_index.name + SWAP_FILE_SUFFIX)
            if txn_swap.exists():
                os.replace(txn_swap, txn_index)
        for path in self.dir.glob(f"*{SWAP_FILE_SUFFIX}"):
            # Index swaps: rebuilt from the log rather than trusted.
            recovery.record(RecoveryActionKind.DELETED_FILE, path, 0, path.stat().st_size,
                            "index of an interrupted log cleaner swap (rebuilt from the log)")
            path.unlink()
        if swaps:
            fsync_dir(self.dir)

    def _remove_temp_and_orphan_files(self, recovery: _Recovery) -> list[int]:
        """Delete `.deleted`/`.cleaned` leftovers and indexes without a log, complete committed cleaner swaps;
        return the segments' base offsets."""
        base_offsets: list[int] = []
        index_files: list[Path] = []
        for path in sorted(self.dir.glob(f"*{CLEANED_FILE_SUFFIX}")):
            recovery.record(RecoveryActionKind.DELETED_FILE, path, 0, path.stat().st_size,
                            "left by an interrupted log cleaning")
            path.unlink()
        self._complete_swaps(recovery)
        for path in sorted(self.dir.iterdir()):
            name = path.name
            if name.endswith(DELETED_FILE_SUFFIX):
                recovery.record(RecoveryActionKind.DELETED_FILE, path, 0, path.stat().st_size,
                                "left by an interrupted segment deletion")
                path.unlink()
            elif _is_segment_file(name, LOG_FILE_SUFFIX):
                base_offsets.append(int(path.stem))
            elif any(_is_segment_file(name, suffix)
                     for suffix in (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)):
                index_files.append(path)
        known = set(base_offsets)
        for path in index_files:
            if int(path.stem) not in known:
                recovery.record(RecoveryActionKind.DELETED_FILE, path, 0, path.stat().st_size,
                                "orphaned index file with no corresponding log file")
                path.unlink()
        return sorted(base_offsets)

    def _check_indexes(self, first_unflushed: int, recovery: _Recovery) -> None:
        """Sanity-check the indexes of the trusted segments, rebuilding any that fail.

        Segments from `first_unflushed` on are rebuilt by recovery anyway.
        """
        for i in range(first_unflushed):
            segment = self._segments[i]
            try:
                segment.sanity_check()
            except CorruptIndexError as exc:
                txn_index = [segment.txn_index.path] if segment.txn_index.path.exists() else []
                for path in (segment.lazy_offset_index.path, segment.lazy_time_index.path, *txn_index):
                    recovery.record(RecoveryActionKind.REBUILT_INDEX, path, 0, 0, str(exc))
                if self._recover_segment(i, recovery):
                    return

    def _recover_segments(self, first_unflushed: int, recovery: _Recovery) -> None:
        for i in range(first_unflushed, len(self._segments)):
            if self._recover_segment(i, recovery, self._leader_epoch_cache):
                return

    def _recover_segment(self, i: int, recovery: _Recovery, cache: LeaderEpochCache | None = None) -> bool:
        """Recover segment `i`; if it was cut, delete every later segment. True if it was cut."""
        segment = self._segments[i]
        result = segment.recover(cache)
        self._first_recovered = min(self._first_recovered, i)
        if not result.truncated_bytes:
            return False
        recovery.record(RecoveryActionKind.TRUNCATED_SEGMENT, segment.path, result.valid_bytes,
                        result.truncated_bytes, result.reason or "invalid bytes")
        self._delete_segments_from(i + 1, recovery,
                                   f"it follows segment {segment.base_offset}, truncated at byte offset"
                                   f" {result.valid_bytes}")
        return True

    def _cut_at_first_gap(self, recovery: _Recovery) -> None:
        """Delete every segment from the first that does not start where the one before it ends.

        Only a crash between two segment deletions leaves such a gap (truncation deletes from the tail
        now, but a log written before may still hold one); served, it would make a follower fetching at
        the gap fail and consumers skip offsets silently. A compacted log's segments legitimately skip
        offsets (the cleaner drops records and may empty whole segments), so it is never cut here.
        """
        if self.config.compact:
            return
        for i in range(1, len(self._segments)):
            previous_end = self._segments[i - 1].read_next_offset()
            base = self._segments[i].base_offset
            if base != previous_end:
                self._delete_segments_from(i, recovery, f"segment {base} starts at offset {base} but the segment"
                                                        f" before it ends at offset {previous_end}")
                return

    def _delete_segments_from(self, start: int, recovery: _Recovery, reason: str) -> None:
        # From the tail backwards: a crash midway leaves a shorter log, never one with a hole.
        for segment in reversed(self._segments[start:]):
            recovery.record(RecoveryActionKind.DELETED_SEGMENT, segment.path, 0, segment.size, reason)
            segment.delete()
        del self._segments[start:]
        del self._base_offsets[start:]


def _is_segment_file(name: str, suffix: str) -> bool:
    stem = name[: -len(suffix)] if name.endswith(suffix) else ""
    return len(stem) == 20 and stem.isdigit()

"""LogCleanerManager: which compacted log to clean next, and where each one's dirty section starts.

Kafka's LogCleanerManager, for this broker's logs:
- `cleaner-offset-checkpoint` in each log dir (Kafka's offset checkpoint format)
  holds, per compacted partition, the first offset not yet covered by a
  cleaning: its dirty section starts there (or at the log start offset).
- The dirty ratio of a log is the bytes of its cleanable dirty section over the
  bytes of its clean section plus that; the cleanable section ends at the
  first uncleanable offset: the active segment's base, the high watermark (a
  follower may still truncate above it), and the first segment younger than
  min.compaction.lag.ms.
- The filthiest log at or above its min.cleanable.dirty.ratio is cleaned next,
  or any log whose dirty section is older than max.compaction.lag.ms; a log is
  cleaned by one thread at a time, and one that failed is set aside as
  uncleanable (uncleanable-partitions-count) until the broker restarts.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from broker.config.log_config import LONG_MAX
from broker.log.checkpoint import OffsetCheckpointFile
from broker.log.cleaner.algorithm import LogToClean
from broker.log.files import CLEANER_OFFSET_CHECKPOINT
from broker.log.log import Log
from broker.log.log_dir_failure import LogDirFailureChannel
from proto.types import TopicPartition

__all__ = ["LogCleanerManager", "LogCleaningStats"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LogCleaningStats:
    """A log's clean and cleanable bytes, as the manager measured them to choose."""

    to_clean: LogToClean
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool  # max.compaction.lag.ms passed

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


class LogCleanerManager:
    def __init__(self, log_dirs: Iterable[Path], logs: Callable[[], dict[TopicPartition, Log]],
                 time_ms: Callable[[], int], log_dir_failure_channel: LogDirFailureChannel | None = None) -> None:
        self._failure_channel = log_dir_failure_channel or LogDirFailureChannel()
        self._checkpoints = {Path(d): OffsetCheckpointFile(Path(d) / CLEANER_OFFSET_CHECKPOINT) for d in log_dirs}
        self._logs = logs
        self._time_ms = time_ms
        self._lock = threading.Lock()
        self._in_progress: set[TopicPartition] = set()
        self.uncleanable: set[TopicPartition] = set()
        # Per partition: (checkpointed offset, the log's truncation count when it was written).
        self._offsets: dict[TopicPartition, tuple[int, int]] = {}
        for checkpoint in self._checkpoints.values():
            for tp, offset in checkpoint.read().items():
                self._offsets[tp] = (offset, -1)
        # max-dirty-percent: the dirtiest ratio seen at the last choice.
        self.max_dirty_percent = 0

    def first_dirty_offset(self, tp: TopicPartition, log: Log) -> int:
        """Where the log's dirty section starts: its checkpoint, unless a truncation or the log start moved past it."""
        offset, truncations = self._offsets.get(tp, (log.log_start_offset, log.truncation_count))
        if truncations == -1:  # read from the checkpoint file: it speaks for the log as loaded
            truncations = log.truncation_count
            self._offsets[tp] = (offset, truncations)
        if truncations not in (-1, log.truncation_count) or not log.log_start_offset <= offset <= log.log_end_offset:
            # The log was cut below what the checkpoint covers (or the checkpoint is out of range): clean it all.
            offset = log.log_start_offset
        return offset

    def measure(self, tp: TopicPartition, log: Log, now: int, high_watermark: int | None) -> LogCleaningStats:
        """The log's dirty section and its ratio (Kafka's cleanableOffsets and LogToClean)."""
        config = log.config
        first_dirty = self.first_dirty_offset(tp, log)
        segments = log.segments
        first_uncleanable = segments[-1].base_offset
        if high_watermark is not None:
            first_uncleanable = min(first_uncleanable, high_watermark)
        first_unstable = log.first_unstable_offset()
        if first_unstable is not None:
            # Never past an open transaction (or one whose marker is not replicated yet): its outcome decides
            # whether its records stay.
            first_uncleanable = min(first_uncleanable, first_unstable)
        if config.min_compaction_lag_ms > 0:
            lag = config.min_compaction_lag_ms
            for segment in segments:
                if segment.base_offset >= first_dirty and now - segment.largest_timestamp < lag:
                    first_uncleanable = min(first_uncleanable, segment.base_offset)
                    break
        first_uncleanable = max(first_uncleanable, first_dirty)
        clean_bytes = cleanable_bytes = 0
        needs_now = False
        for segment, following in itertools.pairwise(segments):
            if following.base_offset <= first_dirty:
                clean_bytes += segment.size
            elif segment.base_offset < first_uncleanable:
                cleanable_bytes += segment.size
                if (config.max_compaction_lag_ms < LONG_MAX and segment.size
                        and segment.time_waited_for_roll(now, now) > config.max_compaction_lag_ms):
                    needs_now = True
        return LogCleaningStats(LogToClean(log, first_dirty, first_uncleanable), clean_bytes, cleanable_bytes,
                                needs_now)

    def grab_filthiest_compacted_log(self, high_watermark: Callable[[TopicPartition], int | None]) -> LogToClean | None:
        """Choose the next log to clean and mark it in progress; None when no log needs it."""
        now = self._time_ms()
        with self._lock:
            candidates = []
            for tp, log in self._logs().items():
                if not log.config.compact or tp in self._in_progress or tp in self.uncleanable:
                    continue
                stats = self.measure(tp, log, now, high_watermark(tp))
                if stats.cleanable_bytes > 0:
                    candidates.append((tp, stats))
            self.max_dirty_percent = int(100 * max((s.cleanable_ratio for _, s in candidates), default=0.0))
            eligible = [(tp, s) for tp, s in candidates if s.needs_compaction_now
                        or s.cleanable_ratio >= s.to_clean.log.config.min_cleanable_dirty_ratio]
            if not eligible:
                return None
            tp, chosen = max(eligible, key=lambda item: (item[1].needs_compaction_now, item[1].cleanable_ratio))
            self._in_progress.add(tp)
            return chosen.to_clean

    def done_cleaning(self, to_clean: LogToClean, end_offset: int) -> None:
        """Record where the next cleaning starts and write the log dir's checkpoint."""
        log = to_clean.log
        tp = log.topic_partition
        with self._lock:
            self._in_progress.discard(tp)
            self._offsets[tp] = (end_offset, log.truncation_count)
            self._write_checkpoint(log.dir.parent)

    def is_gone(self, to_clean: LogToClean) -> bool:
        """The log is no longer this broker's (deleted while it was cleaned)."""
        return self._logs().get(to_clean.log.topic_partition) is not to_clean.log

    def abort(self, to_clean: LogToClean, uncleanable: bool) -> None:
        with self._lock:
            tp = to_clean.log.topic_partition
            self._in_progress.discard(tp)
            if uncleanable:
                self.uncleanable.add(tp)

    def _write_checkpoint(self, log_dir: Path) -> None:
        checkpoint = self._checkpoints.get(log_dir)
        if checkpoint is None or self._failure_channel.has_offline_log_dir(log_dir):
            return
        logs = self._logs()
        with self._failure_channel.reporting(log_dir, "writing the cleaner offset checkpoint"):
            checkpoint.write({tp: offset for tp, (offset, _) in self._offsets.items()
                              if tp in logs and logs[tp].dir.parent == log_dir})

    def uncleanable_partitions_count(self) -> int:
        with self._lock:
            return len(self.uncleanable)

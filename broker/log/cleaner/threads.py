"""LogCleaner: `log.cleaner.threads` threads that compact the broker's cleanup.policy=compact logs.

Kafka's LogCleaner: each CleanerThread asks the LogCleanerManager for the
filthiest log, cleans it (algorithm.py), records the new cleaner checkpoint and
logs Kafka's stats lines; with nothing to clean it sleeps
`log.cleaner.backoff.ms`. The offset maps share `log.cleaner.dedupe.buffer.size`
equally, and the I/O limit `log.cleaner.io.max.bytes.per.second` is shared by all.

A cleaning that fails on I/O (EIO, ENOSPC) reports the log's dir to the
LogDirFailureChannel, as every other writer of the dir does: the dir goes
offline, not just the partition out of the cleaner's rotation. Any other
failure marks the partition uncleanable (Kafka's uncleanable-partitions-count).

The metrics Kafka exposes under kafka.log:type=LogCleaner / LogCleanerManager
are read from here: max-dirty-percent, cleaner-recopy-percent,
max-clean-time-secs, uncleanable-partitions-count.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from broker.log.cleaner.algorithm import Cleaner, CleanerAbortedError, CleanerStats, Throttler
from broker.log.cleaner.manager import LogCleanerManager
from broker.log.cleaner.offset_map import SkimpyOffsetMap
from broker.log.log import Log
from broker.log.log_dir_failure import LogDirFailureChannel, is_storage_error
from proto.types import TopicPartition

__all__ = ["CleanerConfig", "LogCleaner"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's log.cleaner.* settings the threads use (Kafka's CleanerConfig)."""

    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    max_io_bytes_per_second: float = float("inf")
    backoff_ms: int = 15000
    enable_cleaner: bool = True


class LogCleaner:
    def __init__(self, config: CleanerConfig, log_dirs: Iterable[Path],
                 logs: Callable[[], dict[TopicPartition, Log]], time_ms: Callable[[], int],
                 high_watermark: Callable[[TopicPartition], int | None],
                 log_dir_failure_channel: LogDirFailureChannel | None = None) -> None:
        self.config = config
        self._failure_channel = log_dir_failure_channel or LogDirFailureChannel()
        self.manager = LogCleanerManager(log_dirs, logs, time_ms, self._failure_channel)
        self._high_watermark = high_watermark
        self._time_ms = time_ms
        self._throttler = Throttler(config.max_io_bytes_per_second)
        self._throttle_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._last_stats: dict[int, CleanerStats] = {}

    # ------------------------------------------------------------------ lifecycle

    def startup(self) -> None:
        if not self.config.enable_cleaner:
            return
        memory = self.config.dedupe_buffer_size // max(self.config.num_threads, 1)
        for i in range(self.config.num_threads):
            cleaner = Cleaner(i, SkimpyOffsetMap(memory), _SharedThrottler(self._throttler, self._throttle_lock),
                              self._time_ms)
            thread = threading.Thread(target=self._run, args=(cleaner,), name=f"kafka-log-cleaner-thread-{i}",
                                      daemon=True)
            self._threads.append(thread)
            thread.start()

    def shutdown(self) -> None:
        logger.info("Shutting down the log cleaner.")
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    # ------------------------------------------------------------------ the threads

    def _run(self, cleaner: Cleaner) -> None:
        logger.info("Cleaner %d: Starting", cleaner.id)
        while not self._stop.is_set():
            if not self.clean_once(cleaner):
                self._stop.wait(self.config.backoff_ms / 1000)
        logger.info("Cleaner %d: Stopped", cleaner.id)

    def clean_once(self, cleaner: Cleaner) -> bool:
        """One pass of a cleaner thread (Kafka's CleanerThread.tryCleanFilthiestLog); False if nothing was dirty."""
        to_clean = self.manager.grab_filthiest_compacted_log(self._high_watermark)
        if to_clean is None:
            return False
        log = to_clean.log
        try:
            end_offset, stats = cleaner.clean(to_clean)
        except CleanerAbortedError as e:
            logger.info("Cleaner %d: Aborted cleaning of log %s: %s", cleaner.id, log.topic_partition, e)
            self.manager.abort(to_clean, uncleanable=False)
            return True
        except Exception as e:
            if self.manager.is_gone(to_clean):
                # Deleted (StopReplica) while it was cleaned: nothing is wrong with the partition.
                logger.info("Cleaner %d: Log %s was deleted while it was cleaned", cleaner.id, log.topic_partition)
                self.manager.abort(to_clean, uncleanable=False)
                return True
            if is_storage_error(e):
                # The dir is failing (or already offline, reported by the log): its partitions go offline with
                # it, and a restart on a repaired disk cleans them again.
                self._failure_channel.report(log.dir.parent, f"cleaning up log for {log.topic_partition}", e)
                self.manager.abort(to_clean, uncleanable=False)
                return True
            logger.exception("Cleaner %d: Unexpected exception thrown when cleaning log %s. Marking its partition"
                             " (%s) as uncleanable", cleaner.id, log, log.topic_partition)
            self.manager.abort(to_clean, uncleanable=True)
            return True
        self.manager.done_cleaning(to_clean, end_offset)
        self._last_stats[cleaner.id] = stats
        logger.info("%s", stats.report(cleaner.id, str(log.topic_partition), to_clean.first_dirty_offset, end_offset))
        return True

    # ------------------------------------------------------------------ metrics (Kafka's names)

    def max_dirty_percent(self) -> int:
        return self.manager.max_dirty_percent

    def cleaner_recopy_percent(self) -> int:
        """Bytes written over bytes read by the last cleaning of each thread, in percent."""
        stats = list(self._last_stats.values())
        read = sum(s.bytes_read for s in stats)
        return int(100 * sum(s.bytes_written for s in stats) / read) if read else 0

    def max_clean_time_secs(self) -> int:
        return int(max((s.elapsed_secs for s in self._last_stats.values()), default=0.0))

    def uncleanable_partitions_count(self) -> int:
        return self.manager.uncleanable_partitions_count()


class _SharedThrottler(Throttler):
    """The one throttler of all cleaner threads, behind a lock."""

    def __init__(self, shared: Throttler, lock: threading.Lock) -> None:
        self._shared = shared
        self._lock = lock

    def maybe_throttle(self, observed: int) -> None:
        with self._lock:
            self._shared.maybe_throttle(observed)

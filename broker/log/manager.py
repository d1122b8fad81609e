"""LogManager: the broker's `log.dirs`, one Log per partition (Kafka 2.x's kafka.log.LogManager).

Each log directory holds the partition directories plus its own bookkeeping:

    meta.properties                    version=0, broker.id=N: which broker owns the dir
    .kafka_cleanshutdown               present only between a clean shutdown and the next start
    recovery-point-offset-checkpoint   per partition: everything below it has been fsynced
    log-start-offset-checkpoint        per partition: the first offset still readable
    replication-offset-checkpoint      high watermarks (written by the ReplicaManager)

At start-up every log is opened in parallel (`num.recovery.threads.per.data.dir`
threads per dir); a log in a dir without the clean-shutdown marker re-validates
its segments past the recovery point. The marker is removed once loading is
done, so a crash at any later moment means recovery next time.

A dir where an I/O error happens (a full disk) is reported to the
LogDirFailureChannel; `handle_log_dir_failure` then takes it out of service
(Kafka's handleLogDirFailure): its logs are dropped, no checkpoint, new log or
clean-shutdown marker goes there again, and when no dir is left the broker
halts. The dir is back only after a restart, which recovers its logs.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from broker.config.log_config import LogConfig
from broker.log.checkpoint import OffsetCheckpointFile, atomic_write
from broker.log.files import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_DIR_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    delete_dir_name,
)
from broker.log.leader_epoch import LeaderEpochFileCache
from broker.log.log import Log
from broker.log.log_dir_failure import LogDirFailedError, LogDirFailureChannel
from broker.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition

logger = logging.getLogger(__name__)



def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogDirOwnedError(KafkaError):
    """A log dir's meta.properties names another broker: starting would steal its data."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


def read_meta_properties(log_dir: Path) -> dict[str, str]:
    path = log_dir / META_PROPERTIES
    return parse_meta_properties(path.read_text(encoding="utf-8")) if path.exists() else {}


def parse_meta_properties(text: str) -> dict[str, str]:
    """`key=value` lines of a meta.properties file; comments and blank lines skipped."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def _check_or_write_meta_properties(log_dir: Path, broker_id: int) -> None:
    props = read_meta_properties(log_dir)
    owner = props.get("broker.id")
    if owner is not None and owner != str(broker_id):
        raise LogDirOwnedError(
            f"log dir {log_dir} belongs to broker.id {owner} (its {META_PROPERTIES}), not to broker.id {broker_id}:"
            " point log.dirs elsewhere or fix broker.id"
        )
    if owner is None:
        atomic_write(log_dir / META_PROPERTIES, f"#\n#{time.ctime()}\nversion=0\nbroker.id={broker_id}\n".encode())


class LogManager:
    def __init__(self, log_dirs: Sequence[Path], default_config: LogConfig, *, broker_id: int,
                 time_ms: Callable[[], int] = _wall_clock_ms, recovery_threads: int = 1,
                 log_dir_failure_channel: LogDirFailureChannel | None = None,
                 halt: Callable[[int], None] = os._exit,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        # The dirs in service; one leaves it for good (until a restart) when its failure is handled.
        self._live_log_dirs = list(self.log_dirs)
        self.failure_channel = log_dir_failure_channel or LogDirFailureChannel()
        # Kafka's Exit.halt: no shutdown hooks, nothing more written anywhere.
        self._halt = halt
        self.default_config = default_config
        self.broker_id = broker_id
        self._time_ms = time_ms
        self._recovery_threads = max(1, recovery_threads)
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()
        # The dirs and high watermarks this process last wrote replication-offset-checkpoints of.
        self._written_high_watermarks: tuple[list[Path], dict[TopicPartition, int]] | None = None
        # The dirs whose recovery point and log start offset checkpoints may not hold what their logs say: a log
        # created, deleted or loaded there, or one of its recovery point or log start offset moved (each Log
        # tells). Only these are written; every dir is, once, after the start.
        self._stale_offset_checkpoints: set[Path] = set(self.log_dirs)
        self._logs: dict[TopicPartition, Log] = {}
        # Kafka's flush-log task: a rolled segment is fsynced here, never on the thread that appended.
        self._flush_scheduler = ThreadPoolExecutor(1, thread_name_prefix="flush-log")

    # ------------------------------------------------------------------ start-up and shutdown

    def startup(self, topic_configs: Callable[[str], LogConfig] | None = None) -> None:
        """Check ownership of every dir, then load and (if needed) recover every log.

        `topic_configs` gives a topic's LogConfig (its `/config/topics` overrides);
        without it every log uses the broker default.
        """
        for log_dir in self.log_dirs:
            with self._failing_at_startup(log_dir, "Failed to create or validate data directory"):
                log_dir.mkdir(parents=True, exist_ok=True)
                _check_or_write_meta_properties(log_dir, self.broker_id)
        for log_dir in self.live_log_dirs:
            with self._failing_at_startup(log_dir, "Error while loading log dir"):
                self._load_dir(log_dir, topic_configs or (lambda _topic: self.default_config))
        if not self._live_log_dirs:
            raise LogDirFailedError(f"None of the specified log dirs from {', '.join(map(str, self.log_dirs))}"
                                    " can be created or validated")

    @contextlib.contextmanager
    def _failing_at_startup(self, log_dir: Path, message: str) -> Iterator[None]:
        """Kafka's start-up: a dir with an I/O error is offline from the start (reported, so the controller hears of
        it once the broker runs) and the others load; one owned by another broker still stops the start."""
        try:
            yield
        except LogDirOwnedError:
            raise
        except (OSError, KafkaError) as e:
            if isinstance(e, KafkaError) and e.code is not ErrorCode.KAFKA_STORAGE_ERROR:
                raise
            self.failure_channel.maybe_add_offline_log_dir(log_dir, f"{message} {log_dir}", e)
            with self._lock:
                self._live_log_dirs.remove(log_dir)

    def _load_dir(self, log_dir: Path, topic_configs: Callable[[str], LogConfig]) -> None:
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT).read()
        start_offsets = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read()
        partition_dirs: list[tuple[TopicPartition, Path]] = []
        for child in sorted(log_dir.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_DIR_SUFFIX):
                logger.info("Deleting %s left by an unfinished partition deletion", child)
                shutil.rmtree(child, ignore_errors=True)
                continue
            try:
                partition_dirs.append((TopicPartition.parse(child.name), child))
            except ValueError:
                logger.warning("Ignoring %s in log dir %s: not a <topic>-<partition> directory", child.name, log_dir)
        if not clean and partition_dirs:
            logger.info("Log dir %s was not shut down cleanly: recovering logs past their recovery points", log_dir)

        def load(item: tuple[TopicPartition, Path]) -> tuple[TopicPartition, Log]:
            tp, path = item
            return tp, Log.open(
                path, topic_configs(tp.topic),
                recovery_point=recovery_points.get(tp, 0), log_start_offset=start_offsets.get(tp, 0),
                clean_shutdown=clean, time=self._time_ms,
                leader_epoch_cache=LeaderEpochFileCache(path / LEADER_EPOCH_CHECKPOINT),
                log_dir_failure_channel=self.failure_channel, scheduler=self._flush_scheduler,
                producer_id_expiration_ms=self._producer_id_expiration_ms,
                offsets_moved=self._offsets_moved_in(log_dir),
            )

        with ThreadPoolExecutor(self._recovery_threads, thread_name_prefix="log-recovery") as pool:
            loaded = list(pool.map(load, partition_dirs))
        with self._lock:
            for tp, log in loaded:
                if tp in self._logs:
                    raise KafkaError(f"partition {tp} has logs in two dirs: {self._logs[tp].dir} and {log.dir}",
                                     ErrorCode.KAFKA_STORAGE_ERROR)
                self._logs[tp] = log
        # From here on a crash must mean recovery: the marker only speaks for the last stop.
        marker.unlink(missing_ok=True)
        logger.info("Loaded %d logs from %s (%s shutdown)", len(loaded), log_dir, "clean" if clean else "unclean")

    def shutdown(self) -> None:
        """Flush and close every log, checkpoint, and mark each dir still in service cleanly shut down: a dir that
        failed (before or during this) is recovered at the next start."""
        with self._lock:
            logs = list(self._logs.values())
        self._flush_scheduler.shutdown(wait=True)  # the flushes of rolled segments, before the logs close
        for log in logs:
            try:
                log.close()
            except LogDirFailedError:
                pass  # reported: its dir gets no clean-shutdown marker below
        self.checkpoint_log_offsets()
        for log_dir in self.live_log_dirs:
            if not self.failure_channel.has_offline_log_dir(log_dir):
                with self.failure_channel.reporting(log_dir, "writing the clean shutdown marker"):
                    atomic_write(log_dir / CLEAN_SHUTDOWN_FILE, b"")
        logger.info("Shut down %d logs cleanly", len(logs))

    # ------------------------------------------------------------------ log dir failure

    @property
    def live_log_dirs(self) -> list[Path]:
        with self._lock:
            return list(self._live_log_dirs)

    @property
    def offline_log_dir_count(self) -> int:
        """kafka.log:type=LogManager,name=OfflineLogDirectoryCount."""
        return len(self.log_dirs) - len(self.live_log_dirs)

    def handle_log_dir_failure(self, log_dir: Path) -> list[TopicPartition]:
        """Take the dir out of service (Kafka's LogManager.handleLogDirFailure); returns the partitions whose
        logs were there. The last dir to go halts the broker: with no dir it can serve nothing."""
        logger.warning("Stopping serving logs in dir %s", log_dir)
        with self._lock:
            if log_dir in self._live_log_dirs:
                self._live_log_dirs.remove(log_dir)
            if not self._live_log_dirs:
                logger.critical("Shutdown broker because all log dirs in %s have failed",
                                ", ".join(map(str, self.log_dirs)))
                self._halt(1)
            offline = sorted(tp for tp, log in self._logs.items() if log.dir.parent == log_dir)
            for tp in offline:
                self._logs.pop(tp).mark_offline()
        logger.warning("Logs for partitions %s are offline due to failure on log directory %s",
                       ",".join(map(str, offline)), log_dir)
        logger.info("Stopped serving logs in dir %s", log_dir)
        return offline

    # ------------------------------------------------------------------ partitions

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def all_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None, is_new: bool = False) -> Log:
        """The partition's log, created in a dir in service if there is none. A replica that is not new (the
        controller's is_new) and has no log while a dir is offline had it there: creating an empty one elsewhere
        would pass for its data (Kafka refuses the same way)."""
        with self._lock:
            log = self._logs.get(tp)
            offline = [d for d in self.log_dirs if d not in self._live_log_dirs]
            if log is None and offline and not is_new:
                raise LogDirFailedError(f"Can not create log for {tp} because log directories"
                                        f" {', '.join(map(str, offline))} are offline")
            if log is None:
                log_dir = self._next_log_dir(tp)
                try:
                    # The dir first: the epoch cache writes its (empty) checkpoint into it at once, as Kafka's.
                    created = _make_dir(log_dir / str(tp))
                    log = Log.open(log_dir / str(tp), config or self.default_config, time=self._time_ms,
                                   leader_epoch_cache=LeaderEpochFileCache(log_dir / str(tp) / LEADER_EPOCH_CHECKPOINT),
                                   log_dir_failure_channel=self.failure_channel, scheduler=self._flush_scheduler,
                                   producer_id_expiration_ms=self._producer_id_expiration_ms, created=created,
                                   offsets_moved=self._offsets_moved_in(log_dir))
                except (OSError, KafkaError) as e:
                    if isinstance(e, KafkaError) and e.code is not ErrorCode.KAFKA_STORAGE_ERROR:
                        raise
                    message = f"Error while creating log for {tp} in dir {log_dir}"
                    raise self.failure_channel.storage_error(log_dir, message, e) from e
                self._logs[tp] = log
                self._stale_offset_checkpoints.add(log_dir)
                logger.info("Created log for partition %s in %s", tp, log_dir)
            return log

    def _next_log_dir(self, tp: TopicPartition) -> Path:
        """The dir in service holding the fewest partitions (Kafka's nextLogDirs)."""
        if not self._live_log_dirs:
            raise LogDirFailedError(f"Can not create log for {tp} because all log directories"
                                    f" {', '.join(map(str, self.log_dirs))} are offline")
        if len(self._live_log_dirs) == 1:
            # As Kafka: nothing to choose, so no count over every log (per creation, it made creating N logs N²).
            return self._live_log_dirs[0]
        counts = {d: 0 for d in self._live_log_dirs}
        for log in self._logs.values():
            counts[log.dir.parent] = counts.get(log.dir.parent, 0) + 1
        return min(self._live_log_dirs, key=lambda d: counts[d])

    def log_dir_of(self, tp: TopicPartition) -> Path | None:
        log = self._logs.get(tp)
        return None if log is None else log.dir.parent

    def delete_log(self, tp: TopicPartition) -> None:
        self.delete_logs([tp])

    def delete_logs(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, OSError]:
        """Remove each partition's log and its dir, then drop their checkpoint entries in one write, so a restart
        does not resurrect stale offsets (Kafka 2.7's batched asyncDelete, KAFKA-10002: a StopReplica deleting N
        logs rewrote and fsynced both checkpoints of every log N times). Returns the logs that could not go."""
        failed: dict[TopicPartition, OSError] = {}
        deleted = 0
        for tp in tps:
            with self._lock:
                log = self._logs.pop(tp, None)
            if log is None:
                continue
            self._stale_offset_checkpoints.add(log.dir.parent)
            try:
                log.close()
                doomed = log.dir.with_name(delete_dir_name(tp))
                log.dir.rename(doomed)
                shutil.rmtree(doomed, ignore_errors=True)
            except OSError as e:
                failed[tp] = e
                continue
            deleted += 1
            logger.info("Deleted log for partition %s", tp)
        if deleted:
            self.checkpoint_log_offsets()
        return failed

    # ------------------------------------------------------------------ periodic work

    def _logs_by_dir(self, dirs: list[Path]) -> dict[Path, list[Log]]:
        """The logs of each of `dirs` (dirs in service). With one dir in service every log is in it, so none's
        dir is looked at: a Path made and hashed per log was most of a checkpoint's time at 3,000 logs."""
        with self._lock:
            logs = list(self._logs.values())
            live = list(self._live_log_dirs)
        if len(live) == 1:
            return {d: logs for d in dirs if d == live[0]}
        by_dir: dict[Path, list[Log]] = {d: [] for d in dirs}
        for log in logs:
            group = by_dir.get(log.dir.parent)
            if group is not None:
                group.append(log)
        return by_dir

    def checkpoint_log_offsets(self) -> None:
        """Write recovery points and log start offsets of every stale dir (log.flush.*.checkpoint.interval.ms,
        and at once after a DeleteRecords): one writer at a time, as they share the files' temporary names."""
        with self._checkpoint_lock:
            self._checkpoint_log_offsets()

    def _offsets_moved_in(self, log_dir: Path) -> Callable[[], None]:
        """What a log in `log_dir` calls when its recovery point or log start offset moves (a set's add, on
        whichever thread moved it)."""
        return functools.partial(self._stale_offset_checkpoints.add, log_dir)

    def _checkpoint_log_offsets(self) -> None:
        """Only the stale dirs are written. Kafka rewrites every dir's files at each interval: at 10,000 idle
        partitions a broker formatted and fsynced 20,000 unchanged lines every minute (issue 27)."""
        stale = [d for d in self.live_log_dirs if d in self._stale_offset_checkpoints]
        if not stale:
            return
        # Forgotten before the offsets are read: a move from here on makes the dir stale again.
        self._stale_offset_checkpoints.difference_update(stale)
        by_dir = self._logs_by_dir(stale)
        for log_dir in stale:
            logs = by_dir.get(log_dir)
            if logs is None:
                continue  # out of service since: nothing is written there again
            written = False
            try:
                with self.failure_channel.reporting(log_dir,
                                                    "writing recovery point and log start offset checkpoints"):
                    OffsetCheckpointFile(log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT).write(
                        {log.topic_partition: log.recovery_point for log in logs})
                    OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).write(
                        {log.topic_partition: log.log_start_offset for log in logs})
                    written = True
            finally:
                if not written:
                    # A failed write (reported, or raised) is never remembered as written: the next one tries.
                    self._stale_offset_checkpoints.add(log_dir)

    def write_high_watermarks(self, high_watermarks: Iterable[tuple[TopicPartition, int]]) -> None:
        """Write `replication-offset-checkpoint` in every dir, each with the partitions it holds; left alone
        when the dirs and every partition's high watermark are those this process wrote last. Kafka rewrites it
        every replica.high.watermark.checkpoint.interval.ms: at 10,000 idle partitions, 10,000 lines grouped
        by dir, formatted and fsynced every 5 s for the same bytes (issue 27)."""
        written = (self.live_log_dirs, dict(high_watermarks))
        if written == self._written_high_watermarks:
            return
        dirs, offsets = written
        per_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in dirs}
        for tp, hw in offsets.items():
            log_dir = self.log_dir_of(tp)
            if log_dir in per_dir:
                per_dir[log_dir][tp] = hw
        done = 0
        for log_dir, dir_offsets in per_dir.items():
            with self.failure_channel.reporting(log_dir, "writing the high watermark checkpoint"):
                OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).write(dir_offsets)
                done += 1
        # A failed write (its dir reported offline) is not remembered as written.
        self._written_high_watermarks = written if done == len(per_dir) else None

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        high_watermarks: dict[TopicPartition, int] = {}
        for log_dir in self.live_log_dirs:
            high_watermarks.update(OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).read())
        return high_watermarks

    def flush_dirty_logs(self) -> None:
        """Flush logs whose flush.ms has passed (a no-op with Kafka's default: the page cache decides)."""
        now = self._time_ms()
        for log in self.all_logs().values():
            if now - log.last_flush_time >= log.config.flush_interval_ms:
                try:
                    log.flush()
                except LogDirFailedError:
                    pass  # reported; the other dirs' logs are flushed all the same

    def remove_expired_producers(self) -> None:
        """Kafka's PeriodicProducerExpirationCheck (every producer.id.expiration.check.interval.ms): forget the
        producers of every log idle longer than producer.id.expiration.ms, so their state does not grow forever."""
        now = self._time_ms()
        for log in self.all_logs().values():
            log.remove_expired_producers(now)

    def cleanup_logs(self, high_watermark: Callable[[TopicPartition], int | None] | None = None,
                     log_start_offset_moved: Callable[[TopicPartition], None] | None = None) -> int:
        """Apply retention to every log; returns the number of segments deleted.

        `high_watermark` caps deletion below a partition's HW (Kafka never lets
        retention delete what consumers of a leader cannot read yet);
        `log_start_offset_moved` is told of each log whose start moved (its followers' fetch sessions).
        """
        now = self._time_ms()
        deleted = 0
        for tp, log in self.all_logs().items():
            try:
                deleted_here = log.delete_old_segments(now, None if high_watermark is None else high_watermark(tp))
            except LogDirFailedError:
                continue  # reported; retention goes on in the other dirs
            deleted += deleted_here
            if deleted_here and log_start_offset_moved is not None:
                log_start_offset_moved(tp)
        return deleted


def _make_dir(path: Path) -> bool:
    """Make `path`; False if it was there already (a replica's dir left by an earlier life: loaded, not new)."""
    try:
        path.mkdir(parents=True)
    except FileExistsError:
        return False
    return True

"""LogDirFailureChannel: where an I/O error on a log dir is reported (Kafka's server/LogDirFailureChannel.scala).

Whatever meets an OSError writing, flushing, rolling, truncating or reading a
log (a full disk: ENOSPC; a dying one: EIO) reports the dir here and fails
its caller with KAFKA_STORAGE_ERROR. The first report of a dir queues it; the
broker's log-dir-failure handler thread (broker/server/log_dir_failure_handler.py)
takes it from the queue, takes the dir's partitions offline and tells the
controller. A dir is reported once for the life of the process: it stays
offline until the broker restarts.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

from proto.errors import ErrorCode, KafkaError

logger = logging.getLogger(__name__)


class LogDirFailedError(KafkaError):
    """A storage error already reported to the channel: callers up the stack pass it on as it is."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


def is_storage_error(error: BaseException) -> bool:
    """An I/O error, or a KAFKA_STORAGE_ERROR that stands for one (Kafka's IOException / KafkaStorageException)."""
    return isinstance(error, OSError) or (isinstance(error, KafkaError) and error.code is ErrorCode.KAFKA_STORAGE_ERROR)


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: set[Path] = set()
        # None: the handler's stop sentinel.
        self._queue: queue.Queue[Path | None] = queue.Queue()

    def maybe_add_offline_log_dir(self, log_dir: Path, message: str, error: BaseException) -> None:
        """Log the error; queue the dir for the handler unless it is already offline."""
        logger.error("%s: %s", message, error)
        with self._lock:
            if log_dir in self._offline:
                return
            self._offline.add(log_dir)
        self._queue.put(log_dir)

    def has_offline_log_dir(self, log_dir: Path) -> bool:
        with self._lock:
            return log_dir in self._offline

    def take_next_offline_log_dir(self) -> Path | None:
        """Block until a dir goes offline; None once `close` was called."""
        return self._queue.get()

    def close(self) -> None:
        """Wake the handler with its stop sentinel."""
        self._queue.put(None)

    @contextlib.contextmanager
    def reporting(self, log_dir: Path, action: str) -> Iterator[None]:
        """An I/O error in the block takes the dir offline (reported) instead of failing the caller, which goes on
        with the other dirs (Kafka's checkpoint writers catch and report the same way)."""
        try:
            yield
        except (OSError, KafkaError) as e:
            if not is_storage_error(e):
                raise
            self.report(log_dir, action, e)

    def report(self, log_dir: Path, action: str, error: BaseException) -> None:
        """Report a storage error met while doing `action` in the dir (one a log reported already passes)."""
        if not isinstance(error, LogDirFailedError):
            self.maybe_add_offline_log_dir(log_dir, f"Error while {action} in dir {log_dir}", error)

    def storage_error(self, log_dir: Path, message: str, error: BaseException) -> LogDirFailedError:
        """Report the dir and return the error to raise (`raise channel.storage_error(...) from error`)."""
        self.maybe_add_offline_log_dir(log_dir, message, error)
        return LogDirFailedError(f"{message}: {error}")

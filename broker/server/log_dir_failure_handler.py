"""The log-dir-failure handler thread (Kafka's ReplicaManager.LogDirFailureHandler).

It takes each dir the LogDirFailureChannel reports, has the ReplicaManager take
its partitions offline (the LogManager halts the broker if it was the last dir),
then tells the controller with a /log_dir_event_notification/log_dir_event_<seq>
znode. The controller asks this broker about every replica it hosts (LeaderAndIsr);
the answers with KAFKA_STORAGE_ERROR make those replicas offline, so partitions
led here elect another leader from their ISR and this broker leaves the ISRs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from broker.log.log_dir_failure import LogDirFailureChannel
from proto.types import TopicPartition

logger = logging.getLogger(__name__)

# Between attempts to write the notification while ZooKeeper cannot be reached.
NOTIFICATION_RETRY_BACKOFF_S = 1.0


class LogDirFailureHandler:
    def __init__(self, channel: LogDirFailureChannel, handle: Callable[[Path], list[TopicPartition]],
                 propagate: Callable[[], object]) -> None:
        self._channel = channel
        self._handle = handle
        self._propagate = propagate
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="LogDirFailureHandler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def shutdown(self) -> None:
        self._stopped.set()
        self._channel.close()
        self._thread.join()

    def _run(self) -> None:
        while (log_dir := self._channel.take_next_offline_log_dir()) is not None:
            try:
                self._handle(log_dir)
            except Exception:
                logger.exception("Error while taking the partitions of the failed log dir %s offline", log_dir)
            self._notify_controller(log_dir)

    def _notify_controller(self, log_dir: Path) -> None:
        """Kafka's propagateLogDirEvent: a controller that never hears of it would keep electing this replica."""
        while not self._stopped.is_set():
            try:
                self._propagate()
                return
            except Exception as e:
                logger.warning("Cannot tell the controller that log dir %s failed yet: %r", log_dir, e)
                self._stopped.wait(NOTIFICATION_RETRY_BACKOFF_S)

"""Batched ISR-change notifications to the controller (Kafka 2.x's ReplicaManager.recordIsrChange /
maybePropagateIsrChanges).

Every successful ISR write is recorded here; a periodic task (every
`check_interval_ms`, 2.5 s in Kafka) writes one sequential
/isr_change_notification/isr_change_<seq> znode for all partitions recorded so
far when there is something to say and either no ISR changed for
`blackout_ms` (5 s: the burst is over) or nothing was propagated for
`max_delay_ms` (60 s: a never-ending burst still gets through). The controller
then re-reads those partitions' state and pushes UpdateMetadata, so clients see
the new ISR. Intervals are injectable so tests need not wait 5 s.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from proto.types import TopicPartition

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IsrChangePropagationConfig:
    check_interval_ms: int = 2_500
    blackout_ms: int = 5_000
    max_delay_ms: int = 60_000


# Kafka's ReplicaManager constants: IsrChangePropagationBlackOut, IsrChangePropagationInterval, checked every 2.5 s.
KAFKA_ISR_CHANGE_PROPAGATION = IsrChangePropagationConfig()


class IsrChangePropagator:
    def __init__(self, propagate: Callable[[Iterable[TopicPartition]], object], time_ms: Callable[[], int],
                 config: IsrChangePropagationConfig = KAFKA_ISR_CHANGE_PROPAGATION) -> None:
        self.config = config
        self._propagate = propagate
        self._time_ms = time_ms
        self._lock = threading.Lock()
        self._changes: set[TopicPartition] = set()
        now = time_ms()
        self._last_change_ms = now
        self._last_propagation_ms = now

    def record_isr_change(self, tp: TopicPartition) -> None:
        with self._lock:
            self._changes.add(tp)
            self._last_change_ms = self._time_ms()

    def maybe_propagate_isr_changes(self) -> bool:
        """Write the pending changes if the rule says so; True if it wrote them."""
        now = self._time_ms()
        with self._lock:
            if not self._changes or (now - self._last_change_ms <= self.config.blackout_ms
                                     and now - self._last_propagation_ms <= self.config.max_delay_ms):
                return False
            # A failed write keeps the changes for the next run.
            self._propagate(sorted(self._changes))
            logger.debug("Propagated ISR changes of %s", sorted(str(tp) for tp in self._changes))
            self._changes.clear()
            self._last_propagation_ms = now
            return True

"""Delayed operations and the purgatory that holds them (Kafka's DelayedOperation.scala).

A request that cannot be answered yet (an acks=all produce waiting for the
high watermark, a fetch waiting for min_bytes) becomes a DelayedOperation
watched under keys, one per partition it waits on. Whatever can satisfy it
(an append, a high watermark move, a leadership change) calls
`check_and_complete(key)`; the operation's timer answers it at its deadline
otherwise. Nothing polls.

Completion happens exactly once, whichever comes first: the check that finds
it satisfied, the timeout, or a forced completion. A completed operation
leaves every watch list at once, so idle keys do not collect dead entries
(Kafka purges them periodically instead).

Thread-safe: the event loop, timers and (later) fetcher threads may all call in.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from broker.purgatory.timer import Timer, TimerTask

logger = logging.getLogger(__name__)

Key = Hashable


class DelayedOperation(ABC):
    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self._completed = False
        self._completion_lock = threading.Lock()
        # Serialises try_complete: two events checking at once would do the work twice.
        self._check_lock = threading.Lock()
        self._timer_task: TimerTask | None = None
        self._on_done: Callable[[], None] | None = None

    @property
    def is_completed(self) -> bool:
        return self._completed

    @abstractmethod
    def try_complete(self) -> bool:
        """Check whether the operation can complete now; if so, force_complete() and return True."""

    @abstractmethod
    def on_complete(self) -> None:
        """Send the answer; runs exactly once."""

    def wake(self, key: Key | None) -> None:  # noqa: B027 - a hook most operations leave empty
        """Told, just before a check, what may have changed: a key it watches, or None for anything. An
        operation waiting on many keys can then check only what changed; most ignore it."""

    def force_complete(self) -> bool:
        """Complete now unless already done; True if this call completed it."""
        with self._completion_lock:
            if self._completed:
                return False
            self._completed = True
        if self._timer_task is not None:
            self._timer_task.cancel()
        if self._on_done is not None:
            self._on_done()
        self.on_complete()
        return True

    def maybe_try_complete(self) -> bool:
        with self._check_lock:
            return not self._completed and self.try_complete()

    def _expire(self) -> None:
        self.force_complete()


Op = TypeVar("Op", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[Op]):
    def __init__(self, name: str, timer: Timer) -> None:
        self.name = name
        self._timer = timer
        self._lock = threading.Lock()
        # Per key, the operations watching it, in arrival order (a dict as an ordered set).
        self._watchers: dict[Key, dict[Op, None]] = {}
        self._keys_of: dict[Op, tuple[Key, ...]] = {}

    def try_complete_else_watch(self, operation: Op, keys: Iterable[Key]) -> bool:
        """Complete `operation` now if it can; otherwise watch it under `keys` until an event or its timeout.

        Returns True if it completed during this call. It is checked again
        after being watched, so an event between the first check and the watch
        is not missed.
        """
        if operation.maybe_try_complete():
            return True
        keys = tuple(dict.fromkeys(keys))
        with self._lock:
            if operation.is_completed:
                return False
            operation._on_done = lambda: self._unwatch(operation)
            self._keys_of[operation] = keys
            for key in keys:
                self._watchers.setdefault(key, {})[operation] = None
        # An event between the first check and the watch found no watcher to wake: anything may have changed.
        operation.wake(None)
        if operation.maybe_try_complete():
            return True
        if not operation.is_completed:
            operation._timer_task = self._timer.schedule(operation.delay_ms, operation._expire)
            # Completed while the timer was being armed: the timer must not outlive it.
            if operation.is_completed:
                operation._timer_task.cancel()
        return False

    def check_and_complete(self, key: Key) -> int:
        """Try every operation watching `key`; returns how many completed."""
        with self._lock:
            watching = self._watchers.get(key)
            if not watching:
                return 0
            operations = list(watching)
        completed = 0
        for operation in operations:
            try:
                operation.wake(key)
                if operation.maybe_try_complete():
                    completed += 1
            except Exception:
                # One broken operation must not stop the others watching the key from completing.
                logger.exception("%s: checking delayed operation %r failed", self.name, operation)
                if operation.force_complete():
                    completed += 1
        return completed

    def _unwatch(self, operation: Op) -> None:
        with self._lock:
            for key in self._keys_of.pop(operation, ()):
                watching = self._watchers.get(key)
                if watching is not None:
                    watching.pop(operation, None)
                    if not watching:
                        del self._watchers[key]

    def watched(self) -> int:
        """Operations still waiting (Kafka's purgatory size metric)."""
        with self._lock:
            return len(self._keys_of)

    def watched_keys(self) -> int:
        with self._lock:
            return len(self._watchers)

    def complete_all(self) -> None:
        """At shutdown: answer everything still waiting, as its timeout would."""
        with self._lock:
            operations = list(self._keys_of)
        for operation in operations:
            operation._expire()

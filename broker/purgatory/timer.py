"""The timer delayed operations expire on (Kafka's SystemTimer, minus the timing wheel).

asyncio's loop already keeps a heap of timed callbacks, so a delayed request's
timeout is one `call_later`; tests use a hand-driven timer instead.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Protocol


class TimerTask(Protocol):
    def cancel(self) -> None: ...


class Timer(Protocol):
    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> TimerTask:
        """Run `callback` once, `delay_ms` from now, unless the returned task is cancelled first."""
        ...


class _ThreadsafeTask:
    """A timer task scheduled from off the loop thread: cancel() may race with the scheduling."""

    def __init__(self) -> None:
        self.handle: asyncio.TimerHandle | None = None
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        if self.handle is not None:
            self.handle.cancel()


class AsyncioTimer:
    """Timeouts on the broker's event loop; schedulable from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> TimerTask:
        delay = max(delay_ms, 0) / 1000
        if threading.get_ident() == self._loop_thread:
            return self._loop.call_later(delay, callback)
        task = _ThreadsafeTask()

        def arm() -> None:
            if not task.cancelled:
                task.handle = self._loop.call_later(delay, callback)

        self._loop.call_soon_threadsafe(arm)
        return task

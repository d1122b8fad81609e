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


class _LoopTask:
    """A timeout whose TimerHandle only the loop thread touches.

    TimerHandle.cancel is not thread-safe (it updates the loop's count of cancelled
    handles and may trigger a heap rebuild), and delayed operations are completed,
    and so their timeouts cancelled, from fetcher and scheduler threads too.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, loop_thread: int) -> None:
        self._loop = loop
        self._loop_thread = loop_thread
        self._handle: asyncio.TimerHandle | None = None
        self._cancelled = False  # read and written on the loop thread only

    def arm(self, delay: float, callback: Callable[[], None]) -> None:
        if not self._cancelled:
            self._handle = self._loop.call_later(delay, callback)

    def cancel(self) -> None:
        if threading.get_ident() == self._loop_thread:
            self._cancel_on_loop()
            return
        try:
            self._loop.call_soon_threadsafe(self._cancel_on_loop)
        except RuntimeError:
            pass  # the loop is closed: nothing of it will fire any more

    def _cancel_on_loop(self) -> None:
        self._cancelled = True
        if self._handle is not None:
            self._handle.cancel()


class AsyncioTimer:
    """Timeouts on the broker's event loop; schedulable and cancellable from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> TimerTask:
        delay = max(delay_ms, 0) / 1000
        task = _LoopTask(self._loop, self._loop_thread)
        if threading.get_ident() == self._loop_thread:
            task.arm(delay, callback)
        else:
            self._loop.call_soon_threadsafe(task.arm, delay, callback)
        return task

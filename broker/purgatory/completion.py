"""Completion: the answer of a delayed operation, delivered to the event loop that waits for it.

A delayed produce or fetch is completed by whichever thread satisfies it (a fetcher thread moving the high
watermark, the scheduler's ISR shrink, the loop itself); the request handler awaits a future on the loop.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Generic, TypeVar

T = TypeVar("T")


class Completion(Generic[T]):
    """A callback resolving a future on the event loop, callable from any thread, at most once useful."""

    def __init__(self, loop: asyncio.AbstractEventLoop, loop_thread: int) -> None:
        self.future: asyncio.Future[T] = loop.create_future()
        self._loop = loop
        self._loop_thread = loop_thread

    def __call__(self, value: T) -> None:
        if threading.get_ident() == self._loop_thread:
            self._set(value)
        else:
            self._loop.call_soon_threadsafe(self._set, value)

    def _set(self, value: T) -> None:
        # Done already when the client went away and the handler was cancelled.
        if not self.future.done():
            self.future.set_result(value)

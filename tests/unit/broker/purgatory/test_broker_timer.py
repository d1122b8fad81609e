"""AsyncioTimer: every touch of an asyncio TimerHandle happens on the loop's thread (TimerHandle.cancel is not
thread-safe: it updates the loop's bookkeeping). A recording loop stands in for asyncio's, so the test sees which
thread did what without timing anything."""

from __future__ import annotations

import threading
from collections.abc import Callable

from broker.purgatory.timer import AsyncioTimer


class RecordingHandle:
    def __init__(self, loop: RecordingLoop) -> None:
        self.loop = loop
        self.cancelled_from: int | None = None

    def cancel(self) -> None:
        self.cancelled_from = threading.get_ident()


class RecordingLoop:
    """call_later hands out RecordingHandles; call_soon_threadsafe queues what the loop thread runs later."""

    def __init__(self) -> None:
        self.handles: list[RecordingHandle] = []
        self.queued: list[Callable[[], None]] = []

    def call_later(self, delay: float, callback: Callable[[], None]) -> RecordingHandle:
        handle = RecordingHandle(self)
        self.handles.append(handle)
        return handle

    def call_soon_threadsafe(self, callback: Callable[..., None], *args: object) -> None:
        self.queued.append(lambda: callback(*args))

    def run_queued(self) -> None:
        queued, self.queued = self.queued, []
        for callback in queued:
            callback()


def off_the_loop(action: Callable[[], None]) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert not errors, errors


def test_a_timeout_armed_on_the_loop_is_cancelled_on_the_loop_when_another_thread_cancels_it() -> None:
    loop = RecordingLoop()
    timer = AsyncioTimer(loop)  # type: ignore[arg-type]
    task = timer.schedule(500, lambda: None)  # a produce purgatory entry, armed by the request's handler
    off_the_loop(task.cancel)  # the scheduler thread completes the operation
    (handle,) = loop.handles
    assert handle.cancelled_from is None
    loop.run_queued()
    assert handle.cancelled_from == threading.get_ident()


def test_a_timeout_armed_and_cancelled_from_other_threads_is_armed_and_cancelled_on_the_loop() -> None:
    loop = RecordingLoop()
    timer = AsyncioTimer(loop)  # type: ignore[arg-type]
    tasks = []
    off_the_loop(lambda: tasks.append(timer.schedule(500, lambda: None)))
    off_the_loop(tasks[0].cancel)
    assert loop.handles == []  # nothing touched off the loop
    loop.run_queued()
    assert [handle.cancelled_from for handle in loop.handles] == [threading.get_ident()]


def test_cancel_on_the_loop_thread_is_immediate() -> None:
    loop = RecordingLoop()
    timer = AsyncioTimer(loop)  # type: ignore[arg-type]
    timer.schedule(500, lambda: None).cancel()
    assert loop.handles[0].cancelled_from == threading.get_ident() and loop.queued == []

"""ControllerEventManager: one queue, one thread (Kafka's ControllerEventManager).

Every decision of the controller is made on this thread, so the controller's
state needs no locks and events are handled in the order ZooKeeper reported
them. Callers - ZooKeeper watch and session callbacks on kazoo's thread - only
enqueue, which never blocks.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from controller.events import ControllerEvent

log = logging.getLogger(__name__)

EVENT_THREAD_NAME = "controller-event-thread"


class ControllerEventManager:
    def __init__(self, process: Callable[[ControllerEvent], None]) -> None:
        self._process = process
        # None is the shutdown marker (Kafka's ShutdownEventThread).
        self._queue: queue.Queue[ControllerEvent | None] = queue.Queue()
        # Makes clear_and_put atomic with respect to put: nothing slips in between the clear and the put.
        self._put_lock = threading.Lock()
        # Coalesced events queued and not yet taken by the thread (put_coalesced).
        self._coalesced: set[ControllerEvent] = set()
        self._thread = threading.Thread(target=self._run, name=EVENT_THREAD_NAME, daemon=True)
        self._closed = False

    def start(self) -> None:
        self._thread.start()

    def put(self, event: ControllerEvent) -> None:
        with self._put_lock:
            if not self._closed:
                self._queue.put(event)

    def put_coalesced(self, event: ControllerEvent) -> None:
        """Queue the event unless an equal one is queued and not yet taken: for the events of ZooKeeper watches,
        which carry nothing and re-read ZooKeeper when processed, so the one queued covers every notification
        before it starts (Kafka's watches have that effect: re-armed only by the read the event makes, they fire
        once per read). Queued anew for each notification, 200 deletion requests written while the controller
        was busy became 200 events, each listing every topic still queued for deletion."""
        with self._put_lock:
            if self._closed or event in self._coalesced:
                return
            self._coalesced.add(event)
            self._queue.put(event)

    def clear_and_put(self, event: ControllerEvent) -> None:
        """Drop the pending events (preempted), then queue this one: what a session expiry does, since events
        queued before it describe a session that is gone."""
        with self._put_lock:
            if self._closed:
                return
            dropped = self._drain()
            self._queue.put(event)
        _preempt(dropped)

    def close(self, timeout: float = 30.0) -> None:
        """Finish the event being processed, preempt the rest, stop the thread."""
        with self._put_lock:
            self._closed = True
            dropped = self._drain()
            self._queue.put(None)
        _preempt(dropped)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _drain(self) -> list[ControllerEvent]:
        self._coalesced.clear()
        dropped: list[ControllerEvent] = []
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                return dropped
            if event is not None:
                dropped.append(event)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None or self._closed:
                return
            with self._put_lock:
                # Taken: a notification from now on may come after the event's read, so it queues another.
                self._coalesced.discard(event)
            try:
                self._process(event)
            except Exception:
                # The controller handles its own failures; this only keeps the thread alive through a bug.
                log.exception("Uncaught error processing event %s", event)


def _preempt(events: list[ControllerEvent]) -> None:
    for event in events:
        try:
            event.preempt()
        except Exception:
            log.exception("Error preempting event %s", event)

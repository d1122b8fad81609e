"""ControllerEventManager: one thread, in order; a session expiry drops what was pending."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import cast

from controller.event_manager import EVENT_THREAD_NAME, ControllerEventManager
from controller.events import (
    BrokerChange,
    ControlledShutdown,
    ControllerEvent,
    Expire,
    IsrChangeNotification,
    LogDirEventNotification,
    TopicChange,
    TopicDeletion,
)
from controller.zk_watches import ControllerZkWatches
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.fakes import FakeZk
from zk.client import KafkaZkClient


@dataclass(frozen=True)
class Numbered(ControllerEvent):
    n: int


class Recorder:
    def __init__(self) -> None:
        self.events: list[ControllerEvent] = []
        self.threads: set[str] = set()
        self.gate = threading.Event()
        self.gate.set()
        self.saw_expire = threading.Event()
        self.entered = threading.Event()

    def __call__(self, event: ControllerEvent) -> None:
        self.entered.set()
        self.gate.wait(10)
        self.threads.add(threading.current_thread().name)
        self.events.append(event)
        if event == Expire():
            self.saw_expire.set()
        if event == Numbered(-1):
            raise RuntimeError("a bug in a handler")


def test_events_are_processed_in_order_on_the_controller_event_thread() -> None:
    recorder = Recorder()
    manager = ControllerEventManager(recorder)
    manager.start()
    for n in [1, -1, 2, 3]:  # -1 raises: the thread survives it
        manager.put(Numbered(n))
    manager.put(Expire())
    assert recorder.saw_expire.wait(10)
    manager.close()
    assert recorder.events == [Numbered(1), Numbered(-1), Numbered(2), Numbered(3), Expire()]
    assert recorder.threads == {EVENT_THREAD_NAME}


def test_clear_and_put_drops_pending_events() -> None:
    recorder = Recorder()
    recorder.gate.clear()
    manager = ControllerEventManager(recorder)
    manager.start()
    manager.put(Numbered(1))
    assert recorder.entered.wait(10)  # the thread took it, and waits at the gate
    for n in range(2, 6):
        manager.put(Numbered(n))
    manager.clear_and_put(Expire())
    recorder.gate.set()
    assert recorder.saw_expire.wait(10)
    manager.close()
    assert recorder.events == [Numbered(1), Expire()]


def test_nothing_is_processed_after_close() -> None:
    recorder = Recorder()
    manager = ControllerEventManager(recorder)
    manager.start()
    manager.close()
    manager.put(Numbered(1))
    manager.clear_and_put(Expire())
    assert recorder.events == []


def test_a_dropped_controlled_shutdown_is_answered_not_controller() -> None:
    """Kafka's preempt: the broker waiting on it learns at once to ask the next controller."""
    recorder = Recorder()
    recorder.gate.clear()
    manager = ControllerEventManager(recorder)
    manager.start()
    manager.put(Numbered(1))
    assert recorder.entered.wait(10)
    answers: list[tuple[int, tuple[TopicPartition, ...]]] = []
    manager.put(ControlledShutdown(1, 5, lambda error, remaining: answers.append((error, remaining))))
    manager.clear_and_put(Expire())
    assert answers == [(ErrorCode.NOT_CONTROLLER, ())]
    manager.put(ControlledShutdown(2, 5, lambda error, remaining: answers.append((error, remaining))))
    manager.close(timeout=0)
    assert answers == [(ErrorCode.NOT_CONTROLLER, ()), (ErrorCode.NOT_CONTROLLER, ())]
    recorder.gate.set()


def test_a_coalesced_event_queued_and_not_yet_taken_covers_later_notifications() -> None:
    """A watch's event re-reads ZooKeeper when processed: notifications while it waits add nothing; once the
    thread took it, the next one may come after its read, so it is queued again."""
    recorder = Recorder()
    recorder.gate.clear()
    manager = ControllerEventManager(recorder)
    manager.start()
    manager.put(Numbered(1))
    assert recorder.entered.wait(10)  # busy: the notifications below wait behind it
    for _ in range(3):
        manager.put_coalesced(TopicDeletion())
    manager.put(Expire())
    recorder.gate.set()
    assert recorder.saw_expire.wait(10)
    assert recorder.events == [Numbered(1), TopicDeletion(), Expire()]

    recorder.saw_expire.clear()
    recorder.entered.clear()
    recorder.gate.clear()
    manager.put_coalesced(TopicDeletion())
    assert recorder.entered.wait(10)  # taken, and held at the gate
    manager.put_coalesced(TopicDeletion())
    manager.put(Expire())
    recorder.gate.set()
    assert recorder.saw_expire.wait(10)
    manager.close()
    assert recorder.events[3:] == [TopicDeletion(), TopicDeletion(), Expire()]


def test_the_controllers_child_watches_queue_coalesced_events() -> None:
    """/brokers/ids, /brokers/topics, the notifications and /admin/delete_topics: 200 deletion requests written
    while the controller was busy queued 200 TopicDeletion events, each listing every pending deletion."""
    zk = FakeZk()
    plain: list[ControllerEvent] = []
    coalesced: list[ControllerEvent] = []
    watches = ControllerZkWatches(cast(KafkaZkClient, zk), plain.append, plain.append, coalesced.append)
    watches.register_active_handlers()
    for name in ("brokers", "topics", "isr_change_notification", "log_dir_event_notification", "delete_topics"):
        zk.watches[name](set())
    assert coalesced == [BrokerChange(), TopicChange(), IsrChangeNotification(), LogDirEventNotification(),
                         TopicDeletion()]
    assert plain == []

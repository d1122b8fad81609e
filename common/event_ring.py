"""A bounded ring of this process's recent replication events, for `minibroker console`'s history.

A broker records leader epochs it starts (as leader or follower), ISR shrinks and
expands and truncations; the controller records its elections, broker failures and
start-ups and its own failover. Each event says why in plain words (the same facts
the log line beside it gives), so the console never reads a log file. The ring
is the process's, as a logger is: a broker serves it with DescribeReplicaState
and the controller with DescribeEvents (proto/minibroker.proto); nothing about it
is stored, and a restarted process starts empty.

Readers page with the sequence number: `since(n)` is every event after the n-th
still held, so a console polling twice a second sends each event once.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from proto import minibroker_pb2 as pb

# Enough for minutes of a busy cluster's changes; an event is a few hundred bytes.
DEFAULT_CAPACITY = 2000

# The kinds a console knows (anything else it shows as it comes).
LEADER_EPOCH = "LeaderEpoch"        # a broker starts a leader epoch, as leader or follower
ISR_SHRINK = "IsrShrink"            # a leader dropped followers that lagged past replica.lag.time.max.ms
ISR_EXPAND = "IsrExpand"            # a leader took back a follower that caught up
TRUNCATION = "Truncation"           # a follower truncated its log (epoch exchange or high watermark)
ELECTION = "Election"               # the controller elected a partition's leader
BROKER_FAILURE = "BrokerFailure"    # the controller saw brokers' registrations go
BROKER_STARTUP = "BrokerStartup"    # ... and come
CONTROLLER_FAILOVER = "ControllerFailover"  # a controller won /controller


@dataclass(frozen=True, slots=True)
class Event:
    sequence: int
    time_ms: int
    kind: str
    topic: str       # "" for an event of no one partition
    partition: int   # -1 likewise
    detail: str


class EventRing:
    def __init__(self, capacity: int = DEFAULT_CAPACITY,
                 time_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self._events: collections.deque[Event] = collections.deque(maxlen=capacity)
        self._time_ms = time_ms
        self._sequence = 0
        # Recorded from the request threads, the fetchers and the ISR task alike.
        self._lock = threading.Lock()

    def record(self, kind: str, detail: str, topic: str = "", partition: int = -1) -> None:
        with self._lock:
            self._sequence += 1
            self._events.append(Event(self._sequence, self._time_ms(), kind, topic, partition, detail))

    def since(self, sequence: int) -> list[Event]:
        """The events held that came after the `sequence`-th, oldest first."""
        with self._lock:
            if not self._events or self._events[-1].sequence <= sequence:
                return []
            return [e for e in self._events if e.sequence > sequence]


def event_messages(events: Iterable[Event]) -> list[pb.ReplicationEvent]:
    """The events as DescribeReplicaState and DescribeEvents carry them."""
    return [pb.ReplicationEvent(sequence=e.sequence, time_ms=e.time_ms, kind=e.kind, topic=e.topic,
                                partition=e.partition, detail=e.detail) for e in events]


# The process's ring.
EVENTS = EventRing()

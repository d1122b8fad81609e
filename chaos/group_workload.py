"""The group-consumer workload: members of one consumer group share the workload's topic, recording what they
got, every commit and every rebalance; at the end the group's committed offsets are read back.

Each member polls, writes what it got to the history, then commits the positions of those records (so nothing
below a commit can be unseen unless the cluster lost it), and commits again whenever a rebalance takes
partitions away. Members share a GroupProgress (who holds what, how far the group got) only to know when the
run's end offsets are covered and the group is settled: the checker judges the history alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from chaos.clients import ClientLibrary, GroupSettings
from chaos.history import ASSIGNED, Assignment, Commit, FinalCommitted, GroupPoll, HistoryWriter


class GroupProgress:
    """What the members know together: each partition's holders and the furthest offset any member got to."""

    def __init__(self, partitions: int) -> None:
        self._partitions = partitions
        self._lock = threading.Lock()
        self._holders: dict[int, set[str]] = {p: set() for p in range(partitions)}
        self._next: dict[int, int] = {}

    def rebalanced(self, change: Assignment) -> None:
        with self._lock:
            for p in change.partitions:
                holders = self._holders.setdefault(p, set())
                if change.event == ASSIGNED:
                    holders.add(change.process)
                else:
                    holders.discard(change.process)

    def got(self, records: list[tuple[int, int, bytes]]) -> None:
        with self._lock:
            for partition, offset, _ in records:
                self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def done(self, targets: Mapping[int, int]) -> bool:
        """Every partition held by exactly one member, and read up to its target end offset."""
        with self._lock:
            settled = all(len(h) == 1 for h in self._holders.values())
            return settled and all(self._next.get(p, 0) >= end for p, end in targets.items() if end > 0)


class GroupMember:
    """One member's thread: poll, record, commit, until finish() says the run's records are all read."""

    def __init__(self, client: ClientLibrary, bootstrap: str, settings: GroupSettings, progress: GroupProgress,
                 history: HistoryWriter) -> None:
        if client.group_member is None:
            raise ValueError(f"{client.name} has no group consumer adapter")
        self.name = settings.client_id  # the member's process name in the history
        self._settings = settings
        self._progress = progress
        self._history = history
        self._member = client.group_member(bootstrap, settings)
        self._targets: Mapping[int, int] | None = None
        self._deadline = float("inf")
        self._finish = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{self.name}", daemon=True)
        self.errors: list[str] = []
        self.error: BaseException | None = None
        self.finished = False

    def start(self) -> None:
        self._thread.start()

    def _record(self, events: list[Assignment | Commit]) -> None:
        for event in events:
            self._history.write(event)
            if isinstance(event, Assignment):
                self._progress.rebalanced(event)

    def _run(self) -> None:
        try:
            while True:
                if self._finish.is_set() and (self._progress.done(self._targets or {})
                                              or time.monotonic() >= self._deadline):
                    self.finished = self._progress.done(self._targets or {})
                    return
                polled = self._member.poll(0.2)
                self.errors.extend(polled.errors[:100 - len(self.errors)])
                # Rebalances first: a revocation's commit covers records recorded before it.
                self._record(polled.events)
                if polled.records:
                    self._history.write(GroupPoll(self.name, self._settings.group, time.time(),
                                                  tuple((p, o, v.decode()) for p, o, v in polled.records)))
                    self._progress.got(polled.records)
                committed = self._member.commit()
                if committed is not None:
                    self._history.write(committed)
        except BaseException as e:  # surfaced by the runner
            self.error = e

    def finish(self, targets: Mapping[int, int], timeout: float) -> None:
        """Read on until the group has read every partition up to `targets` and is settled (or `timeout`)."""
        self._targets = dict(targets)
        self._deadline = time.monotonic() + timeout
        self._finish.set()

    def join(self) -> None:
        self._thread.join()

    def close(self) -> None:
        self._member.close()


def read_final_committed(client: ClientLibrary, bootstrap: str, settings: GroupSettings, partitions: int,
                         history: HistoryWriter, timeout: float = 30.0) -> dict[int, int]:
    """The group's committed offsets, read back with the library's OffsetFetch, into the history."""
    if client.committed is None:
        raise ValueError(f"{client.name} cannot read a group's committed offsets")
    offsets = client.committed(bootstrap, settings.group, settings.topic, partitions, timeout)
    history.write(FinalCommitted(settings.group, time.time(), tuple(sorted(offsets.items()))))
    return offsets

"""The group workload's member loop on a scripted member (the real one is librdkafka's, in the chaos runs): what
it got goes to the history before the commit that covers it, rebalances move the shared progress, and it stops
once the group is settled and has read up to the end offsets."""

from __future__ import annotations

import time
from pathlib import Path

from chaos.clients import ClientLibrary, GroupPolled, GroupSettings
from chaos.group_workload import GroupMember, GroupProgress, read_final_committed
from chaos.history import ASSIGNED, OK, REVOKED, Assignment, Commit, HistoryWriter, load

SETTINGS = GroupSettings("g0", "grp", "t", 6000, 5000)


class ScriptedMember:
    """Hands out one scripted poll after another (then nothing); commits the positions of what it handed out."""

    def __init__(self, polls: list[GroupPolled]) -> None:
        self._polls = polls
        self._positions: dict[int, int] = {}
        self._committed: dict[int, int] = {}
        self.closed = False

    def poll(self, timeout: float) -> GroupPolled:
        if not self._polls:
            time.sleep(0.001)
            return GroupPolled([], [], [])
        polled = self._polls.pop(0)
        for partition, offset, _ in polled.records:
            self._positions[partition] = offset + 1
        return polled

    def commit(self) -> Commit | None:
        new = {p: o for p, o in self._positions.items() if self._committed.get(p) != o}
        if not new:
            return None
        self._committed.update(new)
        return Commit("g0", "grp", 1.0, 1.1, OK, tuple(sorted(new.items())))

    def close(self) -> None:
        self.closed = True


def library(member: ScriptedMember) -> ClientLibrary:
    def unused(*args: object) -> None:
        raise AssertionError("not used")

    return ClientLibrary("scripted", True, producer=unused, consumer=unused,  # type: ignore[arg-type]
                         group_member=lambda bootstrap, settings: member,
                         committed=lambda bootstrap, group, topic, partitions, timeout: {0: 2, 1: -1})


def test_a_member_records_then_commits_and_finishes_when_the_group_has_read_everything(tmp_path: Path) -> None:
    scripted = ScriptedMember([
        GroupPolled([], [], [Assignment("g0", "grp", 1.0, ASSIGNED, (0, 1))]),
        GroupPolled([], [], [Assignment("g0", "grp", 1.5, REVOKED, (0, 1)),
                             Assignment("g0", "grp", 1.6, ASSIGNED, (0, 1))]),
        GroupPolled([(0, 0, b"w0-0"), (0, 1, b"w0-1")], ["a poll error"], []),
    ])
    history = HistoryWriter(tmp_path / "h.jsonl")
    progress = GroupProgress(2)
    member = GroupMember(library(scripted), "b", SETTINGS, progress, history)
    member.start()
    member.finish({0: 2, 1: 0}, timeout=10)
    member.join()
    member.close()
    assert member.finished and member.error is None and scripted.closed
    assert member.errors == ["a poll error"]
    assert read_final_committed(library(scripted), "b", SETTINGS, 2, history) == {0: 2, 1: -1}
    history.close()
    recorded = load(tmp_path / "h.jsonl")
    assert [a.event for a in recorded.assignments] == [ASSIGNED, REVOKED, ASSIGNED]
    assert [p.records for p in recorded.group_polls] == [((0, 0, "w0-0"), (0, 1, "w0-1"))]
    assert [c.offsets for c in recorded.commits] == [((0, 2),)]
    assert [f.offsets for f in recorded.final_committed] == [((0, 2), (1, -1))]


def test_the_group_is_done_only_settled_and_read_to_the_end() -> None:
    progress = GroupProgress(2)
    progress.rebalanced(Assignment("g0", "grp", 1.0, ASSIGNED, (0, 1)))
    progress.got([(0, 4, b"")])
    assert progress.done({0: 5, 1: 0})
    assert not progress.done({0: 6, 1: 0})  # not read up to partition 0's end
    progress.rebalanced(Assignment("g1", "grp", 1.0, ASSIGNED, (1,)))
    assert not progress.done({0: 5, 1: 0})  # partition 1 held twice: a rebalance under way
    progress.rebalanced(Assignment("g0", "grp", 1.0, REVOKED, (0, 1)))
    assert not progress.done({0: 5, 1: 0})  # partition 0 held by nobody

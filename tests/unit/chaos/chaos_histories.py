"""Hand-written chaos histories for the checker and report tests: a clean one, and builders to spoil it."""

from __future__ import annotations

from chaos.history import (
    ASSIGNED,
    FAIL,
    INFO,
    OK,
    REVOKED,
    Assignment,
    Commit,
    FinalCommitted,
    FinalRead,
    GroupPoll,
    History,
    Poll,
    Send,
)

T0 = 1_000.0


def ok(process: str, seq: int, partition: int, offset: int, t: float, acks: str = "all") -> Send:
    return Send(process, f"{process}-{seq}", acks, partition, T0 + t, T0 + t + 0.01, OK, offset)


def clean() -> History:
    """Two writers on partition 0 and 1, one acks=1 writer, a reader that saw everything, a full final read."""
    sends = [
        ok("w0", 0, 0, 0, 0.0), ok("w0", 1, 1, 0, 0.1), ok("w0", 2, 0, 1, 0.2),
        ok("w1", 0, 0, 2, 0.3), ok("w1", 1, 1, 1, 0.4),
        ok("a1", 0, 1, 2, 0.5, acks="1"),
        Send("w1", "w1-2", "all", 0, T0 + 0.6, T0 + 5.0, INFO, error="REQUEST_TIMED_OUT"),
        Send("w0", "w0-3", "all", 1, T0 + 0.7, T0 + 5.0, FAIL, error="MESSAGE_TOO_LARGE"),
    ]
    polls = [
        Poll("c0", T0 + 1.0, ((0, 0, "w0-0"), (0, 1, "w0-2"), (1, 0, "w0-1"))),
        Poll("c0", T0 + 2.0, ((0, 2, "w1-0"), (1, 1, "w1-1"), (1, 2, "a1-0"))),
    ]
    final = [
        FinalRead(0, T0 + 9.0, ((0, "w0-0"), (1, "w0-2"), (2, "w1-0"))),
        FinalRead(1, T0 + 9.0, ((0, "w0-1"), (1, "w1-1"), (2, "a1-0"))),
    ]
    return History(meta={"topic": "t", "partitions": 2, "consumers": 1, "seed": 7, "start": T0, "end": T0 + 6.0},
                   sends=sends, polls=polls, final_reads=final)


def with_final(history: History, partition: int, records: tuple[tuple[int, str], ...]) -> History:
    history.final_reads = [r for r in history.final_reads if r.partition != partition]
    history.final_reads.append(FinalRead(partition, T0 + 9.0, records))
    return history


GROUP = "g"


def commit(process: str, t: float, offsets: tuple[tuple[int, int], ...], outcome: str = OK,
           took: float = 0.01) -> Commit:
    return Commit(process, GROUP, T0 + t, T0 + t + took, outcome, offsets, "" if outcome == OK else "timed out")


def grouped() -> History:
    """clean() with a consumer group of two members sharing its two partitions: g0 had both, then a rebalance
    gave partition 1 to g1, which resumed at g0's commit; the group's committed offsets read back at the end."""
    history = clean()
    history.meta.update(group=GROUP, group_members=2)
    history.assignments = [
        Assignment("g0", GROUP, T0 + 0.5, ASSIGNED, (0, 1)),
        Assignment("g0", GROUP, T0 + 2.5, REVOKED, (0, 1)),
        Assignment("g0", GROUP, T0 + 2.7, ASSIGNED, (0,)),
        Assignment("g1", GROUP, T0 + 2.7, ASSIGNED, (1,)),
    ]
    history.group_polls = [
        GroupPoll("g0", GROUP, T0 + 1.0, ((0, 0, "w0-0"), (0, 1, "w0-2"), (1, 0, "w0-1"))),
        GroupPoll("g0", GROUP, T0 + 3.0, ((0, 2, "w1-0"),)),
        GroupPoll("g1", GROUP, T0 + 3.0, ((1, 1, "w1-1"), (1, 2, "a1-0"))),
    ]
    history.commits = [
        commit("g0", 1.1, ((0, 2), (1, 1))),
        commit("g0", 2.5, ((0, 2), (1, 1))),  # on revoke
        commit("g0", 3.1, ((0, 3),)),
        commit("g1", 3.1, ((1, 3),)),
    ]
    history.final_committed = [FinalCommitted(GROUP, T0 + 9.5, ((0, 3), (1, 3)))]
    return history

"""The safety checker: what a chaos history says about the cluster, in the words of Jepsen's Kafka checker.

Pure: a History in, a CheckResult out. The final read (every partition read from the beginning
after the run, once every fault has healed) is the ground truth the other observations are held to:

    lost-write            an acks=all send was acknowledged, but its value is not in the final read
    duplicate             a value of an idempotent writer sits at more than one offset
    inconsistent-offsets  one partition offset held different values in different reads (or in an acks=all ack
                          that names its offset)
    nonmonotonic-send     one writer's values in a partition are not in the order it sent them
    nonmonotonic-poll     a consumer got an offset of a partition not greater than the one before it
    poll-skip             a consumer jumped over offsets the final read has
    unseen                an acknowledged value that no consumer ever got
    lost-read             a consumer got a value that the final read no longer has (it was committed: a
                          consumer reads only below the high watermark)

(A group member's records count as a consumer's for inconsistent-offsets and lost-read; the per-consumer order
checks are not theirs: a member starts where the group committed and its partitions change with rebalances.)

A consumer group's members (group-poll, commit and final-committed events) are held to at-least-once delivery:

    commit-backwards      a group's committed offset of a partition went down: a commit acknowledged with a lower
                          offset than one acknowledged before it was sent (real-time order: no overlap)
    lost-commit           the offset the group has committed after the run (read back with OffsetFetch) is below
                          one the coordinator acknowledged
    group-unseen          an offset of the final read below an acknowledged commit that no member of the group got
    group-unsettled       after the run, a partition no member of the group had been assigned (the last
                          rebalance did not complete), or one two members both held

The transactional workload's records (txn and txn-output events) are held to exactly-once: chaos/txn_checker.py.

Reported but never failing: `acks1-lost` and `acks1-duplicate` (acks=1 promises neither).
A value is "<process>-<seq>": each writer's sequence numbers rise in the order it sends.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from chaos.history import ASSIGNED, OK, Commit, GroupPoll, History, Poll, Send
from chaos.txn_checker import TXN_FAILING, check_transactions

FAILING = ("lost-write", "duplicate", "inconsistent-offsets", "nonmonotonic-send", "nonmonotonic-poll", "poll-skip",
           "unseen", "lost-read", "commit-backwards", "lost-commit", "group-unseen", "group-unsettled", *TXN_FAILING)
REPORTED = ("acks1-lost", "acks1-duplicate")
_EXAMPLES = 8


@dataclass
class CheckResult:
    # anomaly name -> how many, and the first few cases (JSON-ready dicts)
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    sends: dict[str, int] = field(default_factory=dict)  # outcome -> count, acks=all writers
    acks1_sends: dict[str, int] = field(default_factory=dict)
    final_records: int = 0
    polled_records: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return all(self.counts.get(name, 0) == 0 for name in FAILING)

    def add(self, anomaly: str, case: dict[str, Any]) -> None:
        self.counts[anomaly] = self.counts.get(anomaly, 0) + 1
        cases = self.examples.setdefault(anomaly, [])
        if len(cases) < _EXAMPLES:
            cases.append(case)

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "anomalies": {name: self.counts.get(name, 0) for name in FAILING + REPORTED},
                "examples": self.examples, "sends": self.sends, "acks1_sends": self.acks1_sends,
                "final_records": self.final_records, "polled_records": self.polled_records, "notes": self.notes}


def writer_seq(value: str) -> tuple[str, int] | None:
    """("w0", 12) for "w0-12"; None for a value no writer of ours produced."""
    process, sep, seq = value.rpartition("-")
    if not sep or not seq.isdigit():
        return None
    return process, int(seq)


def check(history: History) -> CheckResult:
    result = CheckResult()
    all_sends = [s for s in history.sends if s.acks == "all"]
    acks1 = [s for s in history.sends if s.acks != "all"]
    result.sends = _outcomes(all_sends)
    result.acks1_sends = _outcomes(acks1)
    if not history.final_reads:
        result.notes.append("no final read in the history: lost-write, duplicate and lost-read cannot be checked")
    final: dict[int, dict[int, str]] = {r.partition: dict(r.records) for r in history.final_reads}
    # value -> every (partition, offset) it was read at, in the final read or by a consumer
    positions: dict[str, set[tuple[int, int]]] = defaultdict(set)
    in_final: set[str] = set()
    for partition, records in final.items():
        result.final_records += len(records)
        for offset, value in records.items():
            positions[value].add((partition, offset))
            in_final.add(value)
    polled: set[str] = set()
    for poll in history.polls:
        result.polled_records += len(poll.records)
        for partition, offset, value in poll.records:
            positions[value].add((partition, offset))
            polled.add(value)

    if history.final_reads:
        _lost(result, all_sends, acks1, in_final)
        _lost_read(result, history, in_final)
    _duplicates(result, positions, {s.value for s in acks1})
    _inconsistent_offsets(result, history, final)
    _nonmonotonic_send(result, all_sends, positions)
    _polls(result, history, final)
    if history.polls or history.meta.get("consumers", 0):
        for send in all_sends:
            if send.outcome == OK and send.value not in polled:
                result.add("unseen", {"value": send.value, "partition": send.partition, "offset": send.offset})
    else:
        result.notes.append("no consumer read along: unseen cannot be checked")
    _groups(result, history, final)
    check_transactions(result, history)
    return result


def _outcomes(sends: list[Send]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for send in sends:
        counts[send.outcome] += 1
    return dict(counts)


def _lost(result: CheckResult, all_sends: list[Send], acks1: list[Send], in_final: set[str]) -> None:
    for sends, anomaly in ((all_sends, "lost-write"), (acks1, "acks1-lost")):
        for send in sends:
            if send.outcome == OK and send.value not in in_final:
                result.add(anomaly, {"value": send.value, "partition": send.partition, "offset": send.offset,
                                     "acked": send.complete})


def _reads(history: History) -> list[Poll | GroupPoll]:
    """What every consumer, a group's members included, got."""
    return [*history.polls, *history.group_polls]


def _lost_read(result: CheckResult, history: History, in_final: set[str]) -> None:
    reported: set[str] = set()
    for poll in _reads(history):
        for partition, offset, value in poll.records:
            if value not in in_final and value not in reported:
                reported.add(value)
                result.add("lost-read", {"value": value, "partition": partition, "offset": offset,
                                         "process": poll.process, "time": poll.time})


def _duplicates(result: CheckResult, positions: dict[str, set[tuple[int, int]]], acks1_values: set[str]) -> None:
    for value, where in positions.items():
        if len(where) > 1:
            anomaly = "acks1-duplicate" if value in acks1_values else "duplicate"
            result.add(anomaly, {"value": value, "at": sorted(where)})


def _inconsistent_offsets(result: CheckResult, history: History, final: dict[int, dict[int, str]]) -> None:
    seen: dict[tuple[int, int], dict[str, str]] = defaultdict(dict)  # (partition, offset) -> value -> first source
    for partition, records in final.items():
        for offset, value in records.items():
            seen[(partition, offset)].setdefault(value, "final-read")
    for poll in _reads(history):
        for partition, offset, value in poll.records:
            seen[(partition, offset)].setdefault(value, poll.process)
    # Not acks=1 acks: a leader acknowledges those before any follower has them, and a successor may give
    # the offset of a lost one to another record (acks1-lost reports the loss).
    # An ack without an offset (-1: librdkafka's implicit ack of a message its idempotent producer knows was
    # persisted, a later batch of the partition having been acknowledged) claims no position.
    for send in history.sends:
        if send.outcome == OK and send.acks == "all" and send.offset >= 0:
            seen[(send.partition, send.offset)].setdefault(send.value, f"ack to {send.process}")
    for (partition, offset), values in sorted(seen.items()):
        if len(values) > 1:
            result.add("inconsistent-offsets", {"partition": partition, "offset": offset, "values": values})


def _nonmonotonic_send(result: CheckResult, all_sends: list[Send],
                       positions: dict[str, set[tuple[int, int]]]) -> None:
    """Per writer and partition, the final offsets of its values must rise with its sequence numbers."""
    by_writer: dict[tuple[str, int], list[tuple[int, int, str]]] = defaultdict(list)
    for send in all_sends:
        parsed = writer_seq(send.value)
        where = [o for p, o in positions.get(send.value, ()) if p == send.partition]
        if parsed is not None and where:
            by_writer[(send.process, send.partition)].append((parsed[1], min(where), send.value))
    for (process, partition), entries in sorted(by_writer.items()):
        entries.sort()
        for (_, prev_offset, prev_value), (_, offset, value) in itertools.pairwise(entries):
            if offset <= prev_offset:
                result.add("nonmonotonic-send", {"process": process, "partition": partition,
                                                 "values": [prev_value, value], "offsets": [prev_offset, offset]})


def _polls(result: CheckResult, history: History, final: dict[int, dict[int, str]]) -> None:
    """Each consumer's view of each partition must move forward one offset at a time (offsets are contiguous:
    no compaction, no transaction markers), from the partition's first offset."""
    last: dict[tuple[str, int], int] = {}
    first_offset = {p: min(records) for p, records in final.items() if records}
    for poll in sorted(history.polls, key=lambda p: p.time):
        for partition, offset, value in poll.records:
            key = (poll.process, partition)
            prev = last.get(key)
            if prev is None:
                start = first_offset.get(partition)
                if start is not None and offset > start:
                    result.add("poll-skip", {"process": poll.process, "partition": partition, "from": None,
                                             "to": offset, "skipped": offset - start, "time": poll.time})
            elif offset <= prev:
                result.add("nonmonotonic-poll", {"process": poll.process, "partition": partition, "prev": prev,
                                                  "next": offset, "value": value, "time": poll.time})
            elif offset > prev + 1:
                missed = [o for o in range(prev + 1, offset) if o in final.get(partition, {})]
                if missed or partition not in final:
                    result.add("poll-skip", {"process": poll.process, "partition": partition, "from": prev,
                                             "to": offset, "skipped": len(missed) or offset - prev - 1,
                                             "time": poll.time})
            last[key] = offset


def _groups(result: CheckResult, history: History, final: dict[int, dict[int, str]]) -> None:
    acked: dict[tuple[str, int], list[tuple[Commit, int]]] = defaultdict(list)  # (group, partition) -> acks
    for commit in history.commits:
        if commit.outcome == OK:
            for partition, offset in commit.offsets:
                acked[(commit.group, partition)].append((commit, offset))
    for (group, partition), commits in sorted(acked.items()):
        _commit_backwards(result, group, partition, commits)
    highest = {key: max(offset for _, offset in commits) for key, commits in acked.items()}
    for read in history.final_committed:
        for partition, offset in read.offsets:
            best = highest.get((read.group, partition))
            if best is not None and offset < best:
                result.add("lost-commit", {"group": read.group, "partition": partition, "committed": offset,
                                           "acknowledged": best})
    groups = {c.group for c in history.commits} | {p.group for p in history.group_polls}
    if groups and not history.final_committed:
        result.notes.append("no final committed offsets in the history: lost-commit cannot be checked")
    seen: dict[tuple[str, int], set[int]] = defaultdict(set)
    for poll in history.group_polls:
        for partition, offset, _ in poll.records:
            seen[(poll.group, partition)].add(offset)
    for (group, partition), best in sorted(highest.items()):
        unseen = [o for o in final.get(partition, {}) if o < best and o not in seen[(group, partition)]]
        if unseen:
            result.add("group-unseen", {"group": group, "partition": partition, "committed": best,
                                        "unseen": len(unseen), "first": min(unseen)})
    _unsettled(result, history)


def _commit_backwards(result: CheckResult, group: str, partition: int, commits: list[tuple[Commit, int]]) -> None:
    """Each acknowledged commit against the highest one acknowledged before it was invoked."""
    by_completion = sorted(commits, key=lambda c: c[0].complete)
    by_invoke = sorted(commits, key=lambda c: c[0].invoke)
    done, best, best_commit = 0, -1, None
    for commit, offset in by_invoke:
        while done < len(by_completion) and by_completion[done][0].complete < commit.invoke:
            if by_completion[done][1] > best:
                best, best_commit = by_completion[done][1], by_completion[done][0]
            done += 1
        if offset < best and best_commit is not None:
            result.add("commit-backwards", {"group": group, "partition": partition, "offset": offset,
                                            "process": commit.process, "invoke": commit.invoke, "before": best,
                                            "before_process": best_commit.process,
                                            "before_acked": best_commit.complete})


def _unsettled(result: CheckResult, history: History) -> None:
    """The members' last assignments, once the run is over, must cover every partition once."""
    partitions = history.meta.get("partitions")
    held: dict[tuple[str, str], tuple[int, ...]] = {}  # (group, member) -> partitions held at the end
    for change in sorted(history.assignments, key=lambda a: a.time):
        key = (change.group, change.process)
        now = set(held.get(key, ()))
        now = now | set(change.partitions) if change.event == ASSIGNED else now - set(change.partitions)
        held[key] = tuple(sorted(now))
    for group in sorted({g for g, _ in held}):
        owners: dict[int, list[str]] = defaultdict(list)
        for (g, member), owned in held.items():
            if g == group:
                for partition in owned:
                    owners[partition].append(member)
        twice = {p: m for p, m in owners.items() if len(m) > 1}
        missing = [p for p in range(int(partitions or 0)) if p not in owners]
        if twice or missing:
            result.add("group-unsettled", {"group": group, "unassigned": missing,
                                           "held_twice": {str(p): m for p, m in sorted(twice.items())}})

"""A chaos run's history: what every client did and every fault the nemesis caused, as JSON lines.

One event per line, each a JSON object with a "type":

    {"type": "meta", "topic": "chaos", "partitions": 6, "seed": 7, "start": t, ...}
    {"type": "send", "process": "w0", "value": "w0-12", "acks": "all", "partition": 2,
     "invoke": t, "complete": t, "outcome": "ok", "offset": 41}
          outcome "ok" (acknowledged at `offset`; -1 when the client acknowledged it without one, as
          librdkafka does for messages a later acknowledged batch proves persisted),
          "fail" (the client says it was not written, `error`),
          or "info" (unknown: it may or may not have been written, `error` says why we cannot tell)
    {"type": "poll", "process": "c1", "time": t, "records": [[partition, offset, value], ...]}
    {"type": "final-read", "partition": 2, "time": t, "records": [[offset, value], ...]}
    {"type": "fault", "fault": "kill-leader", "target": "broker-2", "start": t, "end": t, "detail": "..."}
    {"type": "recovered", "time": t, "full_isr": true, "detail": "..."}

A group consumer's events (members of one consumer group sharing the topic's partitions):

    {"type": "group-poll", "process": "g0", "group": "chaos-group", "time": t, "records": [[partition, offset,
     value], ...]}
    {"type": "commit", "process": "g0", "group": "chaos-group", "invoke": t, "complete": t, "outcome": "ok",
     "offsets": [[partition, offset], ...]}
          an OffsetCommit of the member's positions (the next offset to read); outcome as a send's, "error"
          when not "ok"; only the partitions the coordinator acknowledged are in an "ok" commit's offsets
    {"type": "assignment", "process": "g0", "group": "chaos-group", "time": t, "event": "assigned",
     "partitions": [0, 3]}
          a rebalance handed the member these partitions ("assigned") or took them ("revoked")
    {"type": "final-committed", "group": "chaos-group", "time": t, "offsets": [[partition, offset], ...]}
          the group's committed offsets read back with OffsetFetch after the run (-1: none)

The transactional workload's events (chaos/txn_workload.py: processors copying the topic to `<topic>-out` in
transactions that commit the group's offsets too):

    {"type": "txn", "process": "t0", "txn": 12, "invoke": t, "complete": t, "outcome": "ok",
     "inputs": [[partition, offset], ...]}
          one transaction of a processor: the input records it copied; outcome "ok" (committed), "fail"
          (aborted) or "info" (a failed commit whose fate is open), "error" when not "ok"
    {"type": "txn-output", "isolation": "read_committed", "partition": 2, "time": t, "records": [[offset, value],
     ...]}
          the output topic's partition read from its start after the run, with that isolation level

Times are seconds since the epoch (time.time()), so a history read back later still lines up with the
cluster's own logs. A send is written when it completes; sends still pending when the run ends are
written as "info".
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

OK, FAIL, INFO = "ok", "fail", "info"


@dataclass(frozen=True)
class Send:
    process: str
    value: str
    acks: str  # "all" or "1"
    partition: int
    invoke: float
    complete: float
    outcome: str
    offset: int = -1
    error: str = ""


@dataclass(frozen=True)
class Poll:
    process: str
    time: float
    records: tuple[tuple[int, int, str], ...]  # (partition, offset, value)


@dataclass(frozen=True)
class FinalRead:
    partition: int
    time: float
    records: tuple[tuple[int, str], ...]  # (offset, value), in offset order


@dataclass(frozen=True)
class Fault:
    fault: str
    target: str
    start: float
    end: float
    detail: str = ""


@dataclass(frozen=True)
class Recovered:
    time: float
    full_isr: bool
    detail: str = ""


@dataclass(frozen=True)
class GroupPoll:
    process: str
    group: str
    time: float
    records: tuple[tuple[int, int, str], ...]  # (partition, offset, value)


@dataclass(frozen=True)
class Commit:
    process: str
    group: str
    invoke: float
    complete: float
    outcome: str
    offsets: tuple[tuple[int, int], ...]  # (partition, next offset to read)
    error: str = ""


ASSIGNED, REVOKED = "assigned", "revoked"


@dataclass(frozen=True)
class Assignment:
    process: str
    group: str
    time: float
    event: str  # ASSIGNED or REVOKED
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class FinalCommitted:
    group: str
    time: float
    offsets: tuple[tuple[int, int], ...]  # (partition, committed offset; -1 when none)


@dataclass(frozen=True)
class Txn:
    process: str
    txn: int  # the processor's transaction number, from 1
    invoke: float
    complete: float
    outcome: str
    inputs: tuple[tuple[int, int], ...]  # (input partition, input offset) of each record it copied
    error: str = ""


@dataclass(frozen=True)
class TxnOutput:
    isolation: str  # "read_committed" or "read_uncommitted"
    partition: int
    time: float
    records: tuple[tuple[int, str], ...]  # (offset, value), in offset order


Event = Send | Poll | FinalRead | Fault | Recovered | GroupPoll | Commit | Assignment | FinalCommitted | Txn | TxnOutput


@dataclass
class History:
    meta: dict[str, Any] = field(default_factory=dict)
    sends: list[Send] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    final_reads: list[FinalRead] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    recovered: Recovered | None = None
    group_polls: list[GroupPoll] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    assignments: list[Assignment] = field(default_factory=list)
    final_committed: list[FinalCommitted] = field(default_factory=list)
    txns: list[Txn] = field(default_factory=list)
    txn_outputs: list[TxnOutput] = field(default_factory=list)


class HistoryError(Exception):
    """A history file that is not one this module wrote; the message names the line."""


def encode(event: Event) -> dict[str, Any]:
    if isinstance(event, Send):
        out: dict[str, Any] = {"type": "send", "process": event.process, "value": event.value, "acks": event.acks,
                               "partition": event.partition, "invoke": event.invoke, "complete": event.complete,
                               "outcome": event.outcome}
        if event.outcome == OK:
            out["offset"] = event.offset
        else:
            out["error"] = event.error
        return out
    if isinstance(event, Poll):
        return {"type": "poll", "process": event.process, "time": event.time,
                "records": [list(r) for r in event.records]}
    if isinstance(event, FinalRead):
        return {"type": "final-read", "partition": event.partition, "time": event.time,
                "records": [list(r) for r in event.records]}
    if isinstance(event, Fault):
        return {"type": "fault", "fault": event.fault, "target": event.target, "start": event.start,
                "end": event.end, "detail": event.detail}
    if isinstance(event, Recovered):
        return {"type": "recovered", "time": event.time, "full_isr": event.full_isr, "detail": event.detail}
    if isinstance(event, Txn):
        txn: dict[str, Any] = {"type": "txn", "process": event.process, "txn": event.txn, "invoke": event.invoke,
                               "complete": event.complete, "outcome": event.outcome,
                               "inputs": [list(i) for i in event.inputs]}
        if event.outcome != OK:
            txn["error"] = event.error
        return txn
    if isinstance(event, TxnOutput):
        return {"type": "txn-output", "isolation": event.isolation, "partition": event.partition,
                "time": event.time, "records": [list(r) for r in event.records]}
    return _encode_group(event)


def _encode_group(event: GroupPoll | Commit | Assignment | FinalCommitted) -> dict[str, Any]:
    if isinstance(event, GroupPoll):
        return {"type": "group-poll", "process": event.process, "group": event.group, "time": event.time,
                "records": [list(r) for r in event.records]}
    if isinstance(event, Commit):
        out: dict[str, Any] = {"type": "commit", "process": event.process, "group": event.group,
                               "invoke": event.invoke, "complete": event.complete, "outcome": event.outcome,
                               "offsets": [list(o) for o in event.offsets]}
        if event.outcome != OK:
            out["error"] = event.error
        return out
    if isinstance(event, Assignment):
        return {"type": "assignment", "process": event.process, "group": event.group, "time": event.time,
                "event": event.event, "partitions": list(event.partitions)}
    return {"type": "final-committed", "group": event.group, "time": event.time,
            "offsets": [list(o) for o in event.offsets]}


def _pairs(data: list[list[int]]) -> tuple[tuple[int, int], ...]:
    return tuple((int(a), int(b)) for a, b in data)


def _decode(history: History, data: dict[str, Any]) -> None:
    kind = data["type"]
    if kind == "meta":
        history.meta.update({k: v for k, v in data.items() if k != "type"})
    elif kind == "send":
        history.sends.append(Send(data["process"], data["value"], data["acks"], int(data["partition"]),
                                  float(data["invoke"]), float(data["complete"]), data["outcome"],
                                  int(data.get("offset", -1)), data.get("error", "")))
    elif kind == "poll":
        history.polls.append(Poll(data["process"], float(data["time"]),
                                  tuple((int(p), int(o), str(v)) for p, o, v in data["records"])))
    elif kind == "final-read":
        history.final_reads.append(FinalRead(int(data["partition"]), float(data["time"]),
                                             tuple((int(o), str(v)) for o, v in data["records"])))
    elif kind == "fault":
        history.faults.append(Fault(data["fault"], data["target"], float(data["start"]), float(data["end"]),
                                    data.get("detail", "")))
    elif kind == "recovered":
        history.recovered = Recovered(float(data["time"]), bool(data["full_isr"]), data.get("detail", ""))
    elif kind == "group-poll":
        history.group_polls.append(GroupPoll(data["process"], data["group"], float(data["time"]),
                                             tuple((int(p), int(o), str(v)) for p, o, v in data["records"])))
    elif kind == "commit":
        history.commits.append(Commit(data["process"], data["group"], float(data["invoke"]), float(data["complete"]),
                                      data["outcome"], _pairs(data["offsets"]), data.get("error", "")))
    elif kind == "assignment":
        if data["event"] not in (ASSIGNED, REVOKED):
            raise KeyError(f"unknown assignment event {data['event']!r}")
        history.assignments.append(Assignment(data["process"], data["group"], float(data["time"]), data["event"],
                                              tuple(int(p) for p in data["partitions"])))
    elif kind == "txn":
        history.txns.append(Txn(data["process"], int(data["txn"]), float(data["invoke"]), float(data["complete"]),
                                data["outcome"], _pairs(data["inputs"]), data.get("error", "")))
    elif kind == "txn-output":
        history.txn_outputs.append(TxnOutput(data["isolation"], int(data["partition"]), float(data["time"]),
                                             tuple((int(o), str(v)) for o, v in data["records"])))
    elif kind == "final-committed":
        history.final_committed.append(FinalCommitted(data["group"], float(data["time"]), _pairs(data["offsets"])))
    else:
        raise KeyError(f"unknown event type {kind!r}")


def parse(lines: Iterable[str], source: str = "history") -> History:
    history = History()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            _decode(history, json.loads(line))
        except (ValueError, KeyError, TypeError) as e:
            raise HistoryError(f"{source}:{number}: not a chaos history event: {e}") from None
    return history


def load(path: Path) -> History:
    try:
        with path.open() as f:
            return parse(f, str(path))
    except OSError as e:
        raise HistoryError(f"cannot read history {path}: {e}") from None


class HistoryWriter:
    """Appends events as JSON lines, from any thread; each line is flushed so a killed run leaves a readable file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file: IO[str] = path.open("w")

    def meta(self, **fields: Any) -> None:
        self._write({"type": "meta", **fields})

    def write(self, event: Event) -> None:
        self._write(encode(event))

    def _write(self, data: dict[str, Any]) -> None:
        line = json.dumps(data, separators=(",", ":")) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

"""The exactly-once checker: what the transactional workload's history says (chaos/txn_workload.py).

Pure: a History in, anomalies into the run's CheckResult. The ground truth is the input topic's final read (every
record below the run's end offsets) and the output topic read from its start after the run:

    txn-lost              an input record of the final read that is not in the read_committed output
    txn-duplicate         an input record copied into the read_committed output more than once
    txn-aborted-read      a read_committed output record written by a transaction the processor saw aborted
    txn-partial           a transaction some of whose records are in the read_committed output and some not
    txn-mismatch          an output record whose value is not the value at the input position it names
    txn-offsets           the processors' group committed, after the run, other offsets than the run's end
                          offsets: the offsets did not move with the output

The read_uncommitted output is held to nothing but its being a superset of the read_committed one (checked as
txn-lost-uncommitted); how many aborted records it shows is reported.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, NamedTuple

from chaos.history import FAIL, OK, History

if TYPE_CHECKING:
    from chaos.checker import CheckResult

TXN_FAILING = ("txn-lost", "txn-duplicate", "txn-aborted-read", "txn-partial", "txn-mismatch", "txn-offsets",
               "txn-lost-uncommitted")
READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"


class OutputRecord(NamedTuple):
    value: str  # the input value
    partition: int  # where the input was
    offset: int
    process: str  # which processor's transaction wrote it
    txn: int


def parse_output(value: str) -> OutputRecord | None:
    """"w0-12@3:41#t0:7" -> OutputRecord("w0-12", 3, 41, "t0", 7); None for a value the workload never wrote."""
    head, at, tail = value.rpartition("@")
    position, hash_, writer = tail.partition("#")
    partition, colon, offset = position.partition(":")
    process, colon2, txn = writer.rpartition(":")
    if not (at and hash_ and colon and colon2) or not (partition.isdigit() and offset.isdigit() and txn.isdigit()):
        return None
    return OutputRecord(head, int(partition), int(offset), process, int(txn))


def check_transactions(result: CheckResult, history: History) -> None:
    """Add the transactional workload's anomalies and figures to `result` (nothing when the run had none)."""
    if not history.txns and not history.txn_outputs:
        return
    inputs = {(read.partition, offset): value for read in history.final_reads for offset, value in read.records}
    outputs: dict[str, list[OutputRecord]] = defaultdict(list)
    for read in history.txn_outputs:
        for offset, value in read.records:
            parsed = parse_output(value)
            if parsed is None:
                result.add("txn-mismatch", {"output_partition": read.partition, "offset": offset, "value": value})
            else:
                outputs[read.isolation].append(parsed)
    committed = outputs[READ_COMMITTED]
    outcomes = {(t.process, t.txn): t for t in history.txns}
    copies = Counter((r.partition, r.offset) for r in committed)
    for (partition, offset), value in sorted(inputs.items()):
        if copies[(partition, offset)] == 0:
            result.add("txn-lost", {"partition": partition, "offset": offset, "value": value})
        elif copies[(partition, offset)] > 1:
            result.add("txn-duplicate", {"partition": partition, "offset": offset, "value": value,
                                         "copies": copies[(partition, offset)]})
    for record in committed:
        if inputs.get((record.partition, record.offset), record.value) != record.value:
            result.add("txn-mismatch", {"partition": record.partition, "offset": record.offset,
                                        "output": record.value, "input": inputs[(record.partition, record.offset)]})
        txn = outcomes.get((record.process, record.txn))
        if txn is not None and txn.outcome == FAIL:
            result.add("txn-aborted-read", {"process": record.process, "txn": record.txn,
                                            "partition": record.partition, "offset": record.offset,
                                            "error": txn.error})
    _partial(result, history, committed)
    _offsets(result, history)
    uncommitted = {(r.process, r.txn, r.partition, r.offset) for r in outputs[READ_UNCOMMITTED]}
    if history.txn_outputs and any(o.isolation == READ_UNCOMMITTED for o in history.txn_outputs):
        for record in committed:
            if (record.process, record.txn, record.partition, record.offset) not in uncommitted:
                result.add("txn-lost-uncommitted", {"process": record.process, "txn": record.txn,
                                                    "partition": record.partition, "offset": record.offset})
    counts = Counter(t.outcome for t in history.txns)
    aborted = sum(1 for r in outputs[READ_UNCOMMITTED]
                  if (t := outcomes.get((r.process, r.txn))) is not None and t.outcome == FAIL)
    result.notes.append(f"transactions: {counts.get(OK, 0)} committed, {counts.get(FAIL, 0)} aborted,"
                        f" {sum(counts.values()) - counts.get(OK, 0) - counts.get(FAIL, 0)} of unknown outcome;"
                        f" {len(committed)} records read_committed, {len(outputs[READ_UNCOMMITTED])} read_uncommitted"
                        f" ({aborted} of them from aborted transactions)")


def _partial(result: CheckResult, history: History, committed: list[OutputRecord]) -> None:
    """A transaction is all or nothing: each one seen in the committed output holds every input it copied."""
    seen: dict[tuple[str, int], set[tuple[int, int]]] = defaultdict(set)
    for record in committed:
        seen[(record.process, record.txn)].add((record.partition, record.offset))
    for txn in history.txns:
        got = seen.get((txn.process, txn.txn))
        if got is None:
            if txn.outcome == OK and txn.inputs:
                result.add("txn-partial", {"process": txn.process, "txn": txn.txn, "missing": len(txn.inputs),
                                           "of": len(txn.inputs), "outcome": txn.outcome})
            continue
        missing = set(txn.inputs) - got
        if missing:
            result.add("txn-partial", {"process": txn.process, "txn": txn.txn, "missing": len(missing),
                                       "of": len(txn.inputs), "outcome": txn.outcome})


def _offsets(result: CheckResult, history: History) -> None:
    """The group's committed offsets after the run are the end offsets of the input: they moved with the output."""
    ends = {read.partition: (read.records[-1][0] + 1 if read.records else 0) for read in history.final_reads}
    for final in history.final_committed:
        if final.group != history.meta.get("txn_group"):
            continue
        for partition, offset in final.offsets:
            end = ends.get(partition, 0)
            if max(offset, 0) != end:
                result.add("txn-offsets", {"group": final.group, "partition": partition, "committed": offset,
                                           "end": end})

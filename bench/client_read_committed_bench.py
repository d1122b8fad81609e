"""The project's consumer: READ_COMMITTED's cost on a fetch answer against READ_UNCOMMITTED, in one run.

One fetch answer of 1,000 batches (10 records of 100 bytes each) is parsed as the consumer's Fetcher does
(`scan_records`: the per-batch walk, then `decode`): READ_UNCOMMITTED; READ_COMMITTED with no aborted transaction
in the answer; READ_COMMITTED where every tenth batch is a transactional batch of a producer whose transaction is
aborted (its ABORT marker follows, and the answer names the transaction), whose records are dropped, not decoded.
Prints microseconds per answer (best of --repeat) and the ratio to READ_UNCOMMITTED.

    .venv/bin/python bench/client_read_committed_bench.py [--batches 1000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from client.fetcher import scan_records
from common.record import ControlRecordType, ProducerRecord, build_batch, build_end_txn_marker
from proto.types import TopicPartition

TP = TopicPartition("t", 0)
RECORDS_PER_BATCH = 10


def answer(batches: int, with_aborts: bool) -> tuple[bytes, list[tuple[int, int]]]:
    """The answer's bytes and the aborted transactions it names ((producer id, first offset) each)."""
    records = [ProducerRecord(b"x" * 100, b"k")] * RECORDS_PER_BATCH
    parts: list[bytes] = []
    aborted: list[tuple[int, int]] = []
    offset = 0
    for i in range(batches):
        if with_aborts and i % 10 == 0:
            producer_id = 1000 + i
            parts.append(build_batch(records, base_offset=offset, producer_id=producer_id, producer_epoch=0,
                                     base_sequence=0, is_transactional=True))
            aborted.append((producer_id, offset))
            offset += RECORDS_PER_BATCH
            parts.append(build_end_txn_marker(producer_id, 0, ControlRecordType.ABORT, 0, 1_000, base_offset=offset))
            offset += 1
        else:
            parts.append(build_batch(records, base_offset=offset))
            offset += RECORDS_PER_BATCH
    return b"".join(parts), aborted


def best_us(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20, help="runs per case; the best is kept")
    args = parser.parse_args()
    plain, _ = answer(args.batches, with_aborts=False)
    mixed, aborted = answer(args.batches, with_aborts=True)
    cases: list[tuple[str, bytes, list[tuple[int, int]] | None]] = [
        ("read_uncommitted", plain, None),
        ("read_committed, no aborted txn", plain, []),
        ("read_uncommitted, 1 in 10 aborted", mixed, None),
        ("read_committed, 1 in 10 aborted", mixed, aborted),
    ]
    print(f"{args.batches} batches of {RECORDS_PER_BATCH} records per answer; microseconds per answer"
          f" (best of {args.repeat})")
    print(f"{'':36}{'scan':>10}{'scan+decode':>14}{'records':>9}")
    baseline: dict[bytes, tuple[float, float]] = {}
    for name, data, txns in cases:
        def scan_only(d: bytes = data, t: list[tuple[int, int]] | None = txns) -> object:
            return scan_records(TP, d, 0, aborted_transactions=t)

        def scan_and_decode(d: bytes = data, t: list[tuple[int, int]] | None = txns) -> object:
            return scan_records(TP, d, 0, aborted_transactions=t).decode()

        scan = best_us(scan_only, args.repeat)
        full = best_us(scan_and_decode, args.repeat)
        count = len(scan_records(TP, data, 0, aborted_transactions=txns).decode())
        base = baseline.setdefault(data, (scan, full))
        print(f"{name:36}{scan:>10,.0f}{full:>14,.0f}{count:>9}   ({scan / base[0]:.2f}x, {full / base[1]:.2f}x)")


if __name__ == "__main__":
    main()

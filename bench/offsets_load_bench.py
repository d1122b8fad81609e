"""Loading a __consumer_offsets partition (immigration) with transactional offsets against plain ones, in one run.

The same number of offset commits, one record per batch as the coordinator writes them: plain OffsetCommit
batches, then TxnOffsetCommit batches of one producer with a COMMIT marker after every `--per-txn` of them
(their offsets wait for the marker in the read, then apply). `read_partition_log` reads the log from memory, so
the figures are the load's own CPU. Prints the best of `--runs` for each (the two alternated) and the ratio.

    .venv/bin/python bench/offsets_load_bench.py [--commits 50000] [--per-txn 10] [--runs 3]
"""

from __future__ import annotations

import argparse
import time

from broker.coordinator.group import records
from broker.coordinator.group.group_metadata_manager import read_partition_log
from common.record import ControlRecordType, ProducerRecord, build_batch, build_end_txn_marker
from proto.types import TopicPartition

PRODUCER_ID = 7000


def offsets_log(commits: int, per_txn: int | None) -> tuple[bytes, int]:
    """`commits` offset commits over 100 groups and 32 partitions; transactional, with a COMMIT marker after every
    `per_txn`, unless `per_txn` is None. The log's bytes and its end offset."""
    transactional = per_txn is not None
    batches, offset = [], 0
    for i in range(commits):
        key = records.offset_commit_key(f"group-{i % 100}", TopicPartition("input", i % 32))
        value = records.offset_commit_value(records.OffsetValue(i, -1, "", 0, -1))
        batches.append(build_batch([ProducerRecord(value, key, 0)], base_offset=offset,
                                   producer_id=PRODUCER_ID if transactional else -1,
                                   producer_epoch=0 if transactional else -1,
                                   base_sequence=0 if transactional else -1, is_transactional=transactional))
        offset += 1
        if per_txn is not None and (i + 1) % per_txn == 0:
            batches.append(build_end_txn_marker(PRODUCER_ID, 0, ControlRecordType.COMMIT, 0, 0, base_offset=offset))
            offset += 1
    return b"".join(batches), offset


def load_seconds(data: bytes, end: int) -> float:
    start = time.perf_counter()
    read_partition_log(lambda _offset, _max_bytes: data, 0, end, len(data))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=50_000)
    parser.add_argument("--per-txn", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    logs = {"plain": offsets_log(args.commits, None), "transactional": offsets_log(args.commits, args.per_txn)}
    best = dict.fromkeys(logs, float("inf"))
    for _ in range(args.runs):  # alternated, so a loaded machine's drift falls on both alike
        for name, (data, end) in logs.items():
            best[name] = min(best[name], load_seconds(data, end))
    plain, transactional = best["plain"], best["transactional"]
    print(f"plain:         {args.commits} commits loaded in {plain * 1000:.0f} ms"
          f" ({args.commits / plain:,.0f} commits/s)")
    print(f"transactional: {args.commits} commits, a marker every {args.per_txn}, loaded in"
          f" {transactional * 1000:.0f} ms ({args.commits / transactional:,.0f} commits/s)")
    print(f"transactional / plain: {transactional / plain:.2f}")


if __name__ == "__main__":
    main()

"""READ_COMMITTED's cost on the broker's read path against READ_UNCOMMITTED, in one run.

On a log of many segments with no transaction, and again with an aborted transaction in every tenth segment,
one partition read as a consumer's Fetch makes it: READ_UNCOMMITTED is `Log.read` to the high watermark;
READ_COMMITTED adds the last stable offset and the aborted transactions of the fetched range
(`Log.collect_aborted_transactions`). Reads at the log's head (every later segment's `.txnindex` is consulted
until one ends the search) and near its tail. Prints microseconds per read and the ratio.

    .venv/bin/python bench/read_committed_bench.py [--segments 400] [--reads 3000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from broker.config.log_config import LogConfig
from broker.log.log import AppendOrigin, Log
from common.record import ControlRecordType, ProducerRecord, build_batch, build_end_txn_marker

NOW = 1_000_000
BATCHES_PER_SEGMENT = 5


def build_log(directory: Path, segments: int, with_aborts: bool) -> Log:
    log = Log.open(directory, LogConfig(segment_bytes=64 * 1024), time=lambda: NOW)
    batch = build_batch([ProducerRecord(b"x" * 100, b"k")] * 100, now_ms=NOW)
    sequence = 0
    for i in range(segments):
        for _ in range(BATCHES_PER_SEGMENT):
            log.append_as_leader(batch, 0)
        if with_aborts and i % 10 == 0:
            log.append_as_leader(build_batch([ProducerRecord(b"t", b"k")], producer_id=7, producer_epoch=0,
                                             base_sequence=sequence, is_transactional=True, now_ms=NOW), 0)
            sequence += 1
            log.append_as_leader(build_end_txn_marker(7, 0, ControlRecordType.ABORT, 0, NOW), 0,
                                 origin=AppendOrigin.COORDINATOR)
        log.roll()
    return log


def per_read_us(log: Log, start: int, committed: bool, reads: int) -> float:
    high_watermark = log.log_end_offset
    began = time.perf_counter()
    for _ in range(reads):
        if committed:
            log.read(start, 1 << 20, log.last_stable_offset(high_watermark))
            log.collect_aborted_transactions(start)
        else:
            log.read(start, 1 << 20, high_watermark)
    return (time.perf_counter() - began) / reads * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", type=int, default=400)
    parser.add_argument("--reads", type=int, default=3000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for with_aborts in (False, True):
            log = build_log(Path(tmp) / f"t-{int(with_aborts)}", args.segments, with_aborts)
            print(f"{log.num_segments} segments, {'an abort every 10 segments' if with_aborts else 'no abort'}:")
            for where, start in (("head", 0), ("tail", log.segments[-2].base_offset)):
                uncommitted = per_read_us(log, start, False, args.reads)
                committed = per_read_us(log, start, True, args.reads)
                print(f"  read at the {where}: read_uncommitted {uncommitted:6.1f} us, read_committed"
                      f" {committed:6.1f} us ({committed / uncommitted:.2f}x)")
            log.close()


if __name__ == "__main__":
    main()

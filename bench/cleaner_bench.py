"""Log cleaner benchmark: one cleaning of a compacted log against a plain copy of the same segment bytes.

Writes a compacted log with the log layer (`--records` keyed records over
`--keys` keys, `--value-bytes` each, batches of `--batch` records, 1 MiB
segments), then in one run:

- the floor: copying every segment file once (read + write + fsync, 512 KiB
  chunks, the size the cleaner writes in) into a scratch directory;
- the cleaner: broker.log.cleaner.algorithm.Cleaner.clean over the whole log (map the
  dirty section, recopy every segment, swap), with its CPU time.

Prints records/s and MB/s (of log read) for both, their ratio and the CPU the
cleaner used. Then, with `--bounded-rounds N`, the bounded-size demo: N rounds
of `--records` updates to the same key set, each followed by a cleaning,
printing the log's size after each round (it stays flat; without the cleaner
it would grow by a round's bytes each time).

    .venv/bin/python bench/cleaner_bench.py [--records 200000] [--keys 10000] [--value-bytes 100] [--batch 100]
                                            [--bounded-rounds 0]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from broker.config.log_config import LogConfig
from broker.log.cleaner.algorithm import Cleaner, LogToClean, Throttler
from broker.log.cleaner.offset_map import SkimpyOffsetMap
from broker.log.log import Log
from common.record import ProducerRecord, build_batch

CHUNK = 512 * 1024


def fill(log: Log, records: int, keys: int, value_bytes: int, batch: int, start: int = 0) -> None:
    value = os.urandom(value_bytes)
    for first in range(start, start + records, batch):
        log.append_as_leader(build_batch([ProducerRecord(value, b"key-%08d" % (i % keys))
                                          for i in range(first, min(first + batch, start + records))],
                                         now_ms=1_700_000_000_000), 0)
    log.roll()


def plain_copy(log: Log, scratch: Path) -> int:
    """Copy every segment file once, as the cleaner's floor; return the bytes copied."""
    scratch.mkdir()
    copied = 0
    for segment in log.segments[:-1]:
        with segment.path.open("rb") as source, (scratch / segment.path.name).open("wb") as target:
            while chunk := source.read(CHUNK):
                target.write(chunk)
                copied += len(chunk)
            target.flush()
            os.fsync(target.fileno())
    return copied


def clean(log: Log, cleaner: Cleaner, first_dirty: int) -> int:
    end, _ = cleaner.clean(LogToClean(log, first_dirty, log.active_segment.base_offset))
    return end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--bounded-rounds", type=int, default=0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cleaner-bench-"))
    try:
        config = LogConfig(segment_bytes=1 << 20, cleanup_policy=("compact",))
        log = Log.open(tmp / "bench-0", config)
        fill(log, args.records, args.keys, args.value_bytes, args.batch)
        size = log.size_in_bytes
        start = time.perf_counter()
        copied = plain_copy(log, tmp / "copy")
        copy_secs = time.perf_counter() - start
        cleaner = Cleaner(0, SkimpyOffsetMap(128 * 1024 * 1024), Throttler(float("inf")),
                          lambda: 1_700_000_000_000)
        cpu = time.process_time()
        start = time.perf_counter()
        end = clean(log, cleaner, 0)
        clean_secs = time.perf_counter() - start
        cpu = time.process_time() - cpu
        mb = 1024 * 1024
        print(f"log: {args.records} records, {args.keys} keys, {size / mb:.1f} MB in {len(log.segments) - 1}"
              f" segments; after cleaning {log.size_in_bytes / mb:.1f} MB")
        print(f"plain segment copy: {copied / mb / copy_secs:8.1f} MB/s  {args.records / copy_secs:12.0f} records/s")
        print(f"cleaner:            {size / mb / clean_secs:8.1f} MB/s  {args.records / clean_secs:12.0f} records/s"
              f"  (CPU {cpu:.2f} s over {clean_secs:.2f} s wall)")
        print(f"cleaner / copy: {copy_secs / clean_secs:.3f}x of the copy's throughput")
        for round_ in range(1, args.bounded_rounds + 1):
            fill(log, args.records, args.keys, args.value_bytes, args.batch, start=round_ * args.records)
            before = log.size_in_bytes
            end = clean(log, cleaner, end)
            print(f"round {round_}: {round_ + 1} x {args.records} updates written, log {before / mb:.1f} MB before"
                  f" cleaning, {log.size_in_bytes / mb:.1f} MB after")
        log.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""What a segment roll costs the append that causes it.

    .venv/bin/python bench/roll_append.py [--appends 3000]

A log built as the broker builds it (a LogManager; segment.bytes=1 MiB) takes `--appends` leader appends of a
16 KiB batch, each timed; printed: the median, p99 and maximum of all appends, and of those that rolled a
segment. A roll fsyncs the sealed segment and the producer snapshot taken at it; where that happens on the
appending thread (the produce path), the rolling appends show it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from broker.log.config import LogConfig  # noqa: E402
from broker.log.manager import LogManager  # noqa: E402
from common.record import ProducerRecord, build_batch  # noqa: E402
from proto.types import TopicPartition  # noqa: E402


def figures(times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(ordered):.3f} ms, p99 {p99:.2f} ms, max {ordered[-1]:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--appends", type=int, default=3000)
    args = parser.parse_args()
    manager = LogManager([Path(tempfile.mkdtemp(prefix="minibroker-roll-append-"))], LogConfig(segment_bytes=1 << 20),
                         broker_id=1)
    manager.startup()
    log = manager.get_or_create_log(TopicPartition("rolling", 0))
    batch = build_batch([ProducerRecord(b"x" * 1024) for _ in range(16)], now_ms=int(time.time() * 1000))
    times: list[float] = []
    rolled: list[float] = []
    for _ in range(args.appends):
        segments = log.num_segments
        began = time.perf_counter()
        log.append_as_leader(batch, 0)
        elapsed = (time.perf_counter() - began) * 1000
        times.append(elapsed)
        if log.num_segments != segments:
            rolled.append(elapsed)
    manager.shutdown()
    print(f"{len(times)} appends: {figures(times)}")
    print(f"{len(rolled)} that rolled a segment: {figures(rolled)}")


if __name__ == "__main__":
    main()

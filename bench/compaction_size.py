"""A compacted topic keeps a bounded size under an endless stream of updates to a fixed key set.

    .venv/bin/python bench/compaction_size.py [--duration 75] [--keys 1000] [--interval 5] [--value-bytes 100]

Brings a real cluster up in a temporary data dir (ZooKeeper, one controller, three brokers, through
local_cluster.cluster), creates one RF=3 partition with cleanup.policy=compact, segment.bytes=64 KiB and
min.cleanable.dirty.ratio=0.01 (brokers run log.cleaner.backoff.ms=500), and has an acks=all producer write
updates to --keys keys round-robin for --duration seconds. Every --interval seconds it prints the bytes written
so far and every replica's on-disk size of the partition (its `.log` files) and segment count: with compaction
the written bytes grow without end while the replicas' sizes stay flat. The cluster is torn down, and its data
dir removed, however it ends.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

if not __package__:  # run as a script: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from client import Admin, NewTopic, Producer
from local_cluster.cluster import scratch_cluster

TOPIC = "compaction-size-bench"
SEGMENT_BYTES = 64 * 1024


def partition_size(log_dir: Path) -> tuple[int, int]:
    """(bytes of `.log` files, number of segments) of the bench partition in one log dir."""
    logs = list((log_dir / f"{TOPIC}-0").glob("*.log"))
    return sum(p.stat().st_size for p in logs if p.exists()), len(logs)


class Writer(threading.Thread):
    """Updates to a fixed key set, acks=all, as fast as the cluster takes them, until stopped."""

    def __init__(self, bootstrap: str, keys: int, value_bytes: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        self.keys = keys
        self.value_bytes = value_bytes
        self.stop = threading.Event()
        self.written = 0
        self.bytes = 0

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            # A bounded amount in flight: a flush every few thousand records.
            for _ in range(2000):
                key = b"key-%06d" % (i % self.keys)
                value = (b"%d-" % i).ljust(self.value_bytes, b"v")
                self.producer.send(TOPIC, value, key=key, partition=0)
                self.bytes += len(key) + len(value)
                i += 1
            self.producer.flush(60)
            self.written = i


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--duration", type=float, default=75.0, help="seconds of updates (default 75)")
    parser.add_argument("--keys", type=int, default=1000, help="size of the key set (default 1000)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between size lines (default 5)")
    parser.add_argument("--value-bytes", type=int, default=100, help="bytes per value (default 100)")
    args = parser.parse_args(argv)
    with scratch_cluster("minibroker-compaction-size-", brokers=3, controllers=1,
                         overrides=["log.cleaner.backoff.ms=500"],
                         report=lambda line: print(line, flush=True)) as (_cluster, info):
        admin = Admin(bootstrap_servers=info.bootstrap_servers)
        admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs={
            "cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES), "min.cleanable.dirty.ratio": "0.01"})])
        admin.close()
        log_dirs = {b.id: Path(b.log_dir) for b in info.brokers}
        writer = Writer(info.bootstrap_servers, args.keys, args.value_bytes)
        print(f"{args.keys} keys x {args.value_bytes}-byte values, segment.bytes={SEGMENT_BYTES},"
              f" min.cleanable.dirty.ratio=0.01, RF=3", flush=True)
        header = f"{'t (s)':>6} {'records':>9} {'written MB':>10} " + " ".join(
            f"{f'broker {b} MB (segs)':>20}" for b in sorted(log_dirs))
        print(header, flush=True)
        started = time.monotonic()
        writer.start()
        deadline = started + args.duration
        while True:
            time.sleep(max(0.0, min(args.interval, deadline - time.monotonic())))
            sizes = " ".join(f"{f'{size / 1e6:.2f} ({segs})':>20}"
                             for size, segs in (partition_size(log_dirs[b]) for b in sorted(log_dirs)))
            print(f"{time.monotonic() - started:6.0f} {writer.written:9d} {writer.bytes / 1e6:10.2f} {sizes}",
                  flush=True)
            if time.monotonic() >= deadline:
                break
        writer.stop.set()
        writer.join(120)
        writer.producer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

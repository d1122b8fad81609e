"""What a topic's compression.type costs the leader: produce appends (`Log.append_as_leader`, the leader's whole
write path: validation, recompression, offsets, indexes, the write) of the same producer batches into logs whose
compression.type is `producer` (kept as sent) and each codec (recompressed, as Kafka's LogValidator does), in one
run.

The batches are what a librdkafka producer sends with compression.type=lz4 (its default in many setups) and
linger: ~16 KiB of records before compression, JSON-like values that compress as real payloads do. Prints, per
topic setting, MB/s of records (uncompressed bytes) and batches/s, the stored size, and the ratio to `producer`
(best of --repeat runs taken round robin over the settings, after a warm-up).

    .venv/bin/python bench/recompression_bench.py [--total-mb 64] [--batch-kb 16] [--codec lz4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

from broker.config.log_config import LogConfig
from broker.log.log import Log
from broker.server.malloc import tune_malloc
from common.recompression import COMPRESSION_TYPES, PRODUCER
from common.record import CompressionType, ProducerRecord, build_batch

TOPIC_SETTINGS = (PRODUCER, "uncompressed", "lz4", "snappy", "zstd", "gzip")
assert set(TOPIC_SETTINGS) <= set(COMPRESSION_TYPES)


def make_batches(batch_bytes: int, codec: CompressionType, count: int = 16) -> tuple[list[bytes], int]:
    """`count` different producer batches of about `batch_bytes` of records; (batches, records per batch)."""
    rng = random.Random(7)
    batches = []
    per_batch = 0
    for _ in range(count):
        records = []
        size = 0
        while size < batch_bytes:
            value = json.dumps({"user": rng.randrange(10_000), "event": rng.choice(["view", "click", "buy"]),
                                "ts": 1_700_000_000_000 + rng.randrange(10**6), "path": f"/item/{rng.randrange(500)}",
                                "score": round(rng.random(), 4)}).encode()
            records.append(ProducerRecord(value, str(rng.randrange(1000)).encode(), 1_700_000_000_000))
            size += len(value) + 12
        per_batch = len(records)
        batches.append(build_batch(records, compression=codec, producer_id=-1))
    return batches, per_batch


def append_all(workdir: Path, setting: str, batches: list[bytes], n_batches: int) -> tuple[float, int]:
    """One run: (seconds for n_batches appends into a new log, bytes stored)."""
    config = LogConfig(segment_bytes=1 << 30, retention_ms=-1, max_message_bytes=4 << 20, compression_type=setting)
    log = Log.open(workdir / f"{setting}-0", config)
    start = time.perf_counter()
    for i in range(n_batches):
        log.append_as_leader(batches[i % len(batches)], leader_epoch=0)
    seconds = time.perf_counter() - start
    stored = log.size_in_bytes
    log.close()
    shutil.rmtree(workdir / f"{setting}-0")
    return seconds, stored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--total-mb", type=int, default=64, help="records (uncompressed) appended per setting")
    parser.add_argument("--batch-kb", type=int, default=16)
    parser.add_argument("--codec", default="lz4", choices=[c.name.lower() for c in CompressionType])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tune_malloc()
    batches, per_batch = make_batches(args.batch_kb * 1024, CompressionType.from_name(args.codec))
    n_batches = max(len(batches), args.total_mb * 1024 // args.batch_kb)
    record_mb = n_batches * args.batch_kb / 1024
    print(f"{n_batches} producer batches ({args.codec}, ~{args.batch_kb} KiB of records, {per_batch} records each),"
          f" {record_mb:.0f} MB of records per topic setting, best of {args.repeat}")
    print(f"{'compression.type':>16} {'MB/s':>8} {'batches/s':>10} {'stored MB':>10} {'vs producer':>12}")
    best: dict[str, float] = {}
    stored: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="recompression-bench-") as tmp:
        append_all(Path(tmp), PRODUCER, batches, len(batches))  # warm-up: imports, allocator, page cache
        # Round robin, best of each: a slow moment of the (shared) machine does not fall on one setting only.
        for _ in range(args.repeat):
            for setting in TOPIC_SETTINGS:
                seconds, stored[setting] = append_all(Path(tmp), setting, batches, n_batches)
                best[setting] = min(best.get(setting, seconds), seconds)
    baseline = record_mb / best[PRODUCER]
    for setting in TOPIC_SETTINGS:
        rate = record_mb / best[setting]
        print(f"{setting:>16} {rate:8.1f} {n_batches / best[setting]:10.0f} {stored[setting] / 2**20:10.1f}"
              f" {rate / baseline:11.2f}x")


if __name__ == "__main__":
    main()

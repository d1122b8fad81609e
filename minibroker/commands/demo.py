"""`minibroker demo`: show minibroker at work (for now: the log engine)."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from broker.log.config import LogConfig
from broker.log.dump import dump_file
from broker.log.manager import LogManager
from broker.log.record import CompressionType, ProducerRecord, build_batch, iter_batches
from proto.types import TopicPartition


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("demo", help="show minibroker working")
    parser.add_argument("--data-dir", type=Path, default=None, help="keep the demo's files here")
    parser.add_argument("--records", type=int, default=5000)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.data_dir is not None:
        return _log_demo(args.data_dir, args.records)
    with tempfile.TemporaryDirectory(prefix="minibroker-demo-") as tmp:
        return _log_demo(Path(tmp), args.records)


def _log_demo(data_dir: Path, n_records: int) -> int:
    tp = TopicPartition("demo", 0)
    manager = LogManager([data_dir / "broker-1"], LogConfig(segment_bytes=16 * 1024), broker_id=1)
    manager.startup()
    log = manager.get_or_create_log(tp)
    start = time.perf_counter()
    codecs = [CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD]
    for i in range(0, n_records, 100):
        records = [ProducerRecord(f"record {n}".encode(), f"key-{n % 10}".encode())
                   for n in range(i, min(i + 100, n_records))]
        log.append_as_leader(build_batch(records, compression=codecs[(i // 100) % 4], now_ms=int(time.time() * 1000)),
                             leader_epoch=0)
    elapsed = time.perf_counter() - start
    print(f"Appended {n_records} records in batches of 100 (none, gzip, lz4, zstd in turn) to {log.dir}"
          f" in {elapsed * 1000:.0f} ms: {log.num_segments} segments, log end offset {log.log_end_offset}")
    read_back = 0
    offset = 0
    while offset < log.log_end_offset:
        for batch in iter_batches(log.read(offset, 1 << 20).records.read()):
            read_back += len(batch.records)
            offset = batch.header.next_offset
    print(f"Read back {read_back} records through the index and file slices")
    first = log.segments[0].path
    manager.shutdown()
    print(f"\n$ minibroker dump-log --files {first} (first lines)")
    for n, line in enumerate(dump_file(first)):
        if n >= 6:
            break
        print(line)
    print(f"\n$ minibroker dump-log --files {first.with_suffix('.index')} --index-sanity-check")
    for line in dump_file(first.with_suffix(".index"), index_sanity_check=True):
        print(line)
    return 0

"""Log engine benchmark: the log's append and read paths against the raw system calls, in one run.

For each batch size (1 KiB, 16 KiB, 1 MiB) the same batch bytes are
- appended through `Log.append_as_leader` (validation, CRC, offset patching,
  indexes) and written with plain `os.write` to a file: the raw baseline;
- read back through `Log.read` slices sent with sendfile to a loopback socket,
  and with plain `os.sendfile` over the raw file in the same chunk sizes.

Prints MB/s, batches/s and the ratio to the raw baseline. Targets (issue):
append >= 70% of raw write for 16 KiB batches and above; reads >= 80% of raw
sendfile.

    .venv/bin/python bench/log_bench.py [--total-mb 256] [--sizes 1024,16384,1048576] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from broker.config.log_config import LogConfig
from broker.log.log import Log
from broker.server.malloc import tune_malloc
from common.record import HEADER_SIZE, ProducerRecord, build_batch

RECORD_VALUE = 100
FETCH_MAX_BYTES = 1 << 20


def make_batch(size: int) -> tuple[bytes, int]:
    """A valid uncompressed batch of about `size` bytes with 100-byte values; (bytes, record count)."""
    per_record = RECORD_VALUE + 8  # value plus its small varint framing
    count = max(1, (size - HEADER_SIZE) // per_record)
    batch = build_batch([ProducerRecord(os.urandom(RECORD_VALUE)) for _ in range(count)], now_ms=1_700_000_000_000)
    return batch, count


class Sink:
    """A loopback TCP connection drained by a child process, which reports the byte count at the end.

    A process, not a thread: a draining thread would compete for the GIL with
    the sending loop and charge the path with more Python work for it.
    """

    def __init__(self) -> None:
        server = socket.create_server(("127.0.0.1", 0))
        self.out = socket.create_connection(server.getsockname())
        conn, _ = server.accept()
        server.close()
        self._count_r, count_w = os.pipe()
        self._pid = os.fork()
        if self._pid == 0:  # the child: drain, report, exit without running the parent's cleanup
            self.out.close()
            buf = bytearray(1 << 20)
            received = 0
            while n := conn.recv_into(buf):
                received += n
            os.write(count_w, str(received).encode())
            os._exit(0)
        conn.close()
        os.close(count_w)

    def close(self) -> int:
        self.out.close()
        os.waitpid(self._pid, 0)
        with os.fdopen(self._count_r, "rb") as counts:
            return int(counts.read())


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    start = time.perf_counter()
    n = fn()
    return time.perf_counter() - start, n


def bench_size(workdir: Path, size: int, total_bytes: int, repeat: int) -> dict[str, float]:
    batch, records_per_batch = make_batch(size)
    n_batches = max(8, total_bytes // len(batch))
    config = LogConfig(segment_bytes=1 << 30, retention_ms=-1, max_message_bytes=2 << 20)

    raw_path = workdir / f"raw-{size}.bin"

    def raw_write() -> int:
        fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for _ in range(n_batches):
                os.write(fd, batch)
        finally:
            os.close(fd)
        return n_batches

    log = Log.open(workdir / f"bench-{size}", config)

    def log_append() -> int:
        for _ in range(n_batches):
            # `bytes`, as the broker gets them from a protobuf request: the log copies once to patch offsets.
            log.append_as_leader(batch, leader_epoch=0)
        return n_batches

    expected = n_batches * len(batch)
    # Each fetch returns as many whole batches as fit in FETCH_MAX_BYTES: the raw path sends the same chunks.
    chunk = max(1, FETCH_MAX_BYTES // len(batch)) * len(batch)

    def raw_sendfile() -> int:
        sink = Sink()
        fd = os.open(raw_path, os.O_RDONLY)
        try:
            for position in range(0, expected, chunk):
                size = min(chunk, expected - position)
                sent = 0
                while sent < size:
                    sent += os.sendfile(sink.out.fileno(), fd, position + sent, size - sent)
        finally:
            os.close(fd)
        return drained(sink)

    def log_sendfile() -> int:
        sink = Sink()
        offset, end = 0, log.log_end_offset
        while offset < end:
            records = log.read(offset, FETCH_MAX_BYTES).records
            sent = 0
            while sent < records.size:
                sent += records.sendfile(sink.out.fileno(), sent)
            offset += (records.size // len(batch)) * records_per_batch
        return drained(sink)

    def drained(sink: Sink) -> int:
        received = sink.close()
        if received != expected:
            raise AssertionError(f"the sink got {received} bytes, {expected} were sent")
        return received

    # Rounds interleave the paths and each keeps its best time, so a burst of load on this
    # shared machine does not land on one side of a ratio only.
    raw_w = log_w = raw_r = log_r = float("inf")
    # The order alternates too: measured here, whichever read pass comes second after the
    # writes runs slower (page-cache writeback), whatever path it is.
    for round_ in range(repeat):
        log.truncate_fully_and_start_at(0)
        raw_w = min(raw_w, timed(raw_write)[0])
        log_w = min(log_w, timed(log_append)[0])
        for path in (raw_sendfile, log_sendfile) if round_ % 2 == 0 else (log_sendfile, raw_sendfile):
            elapsed = timed(path)[0]
            if path is raw_sendfile:
                raw_r = min(raw_r, elapsed)
            else:
                log_r = min(log_r, elapsed)
    log.close()
    mb = n_batches * len(batch) / 1e6
    return {
        "batch": len(batch), "records": records_per_batch, "batches": n_batches, "mb": mb,
        "raw_w": mb / raw_w, "log_w": mb / log_w, "raw_r": mb / raw_r, "log_r": mb / log_r,
        "log_w_bps": n_batches / log_w, "log_r_bps": n_batches / log_r,
    }


def rows(results: list[dict[str, float]]) -> Iterator[str]:
    yield (f"{'batch':>9} {'records':>7} {'MB':>7} | {'append MB/s':>11} {'raw write':>10} {'ratio':>6}"
           f" {'batches/s':>10} | {'read MB/s':>10} {'raw sendfile':>12} {'ratio':>6} {'batches/s':>10}")
    for r in results:
        yield (f"{int(r['batch']):>9} {int(r['records']):>7} {r['mb']:>7.0f} | {r['log_w']:>11.0f}"
               f" {r['raw_w']:>10.0f} {r['log_w'] / r['raw_w']:>6.0%} {r['log_w_bps']:>10.0f} |"
               f" {r['log_r']:>10.0f} {r['raw_r']:>12.0f} {r['log_r'] / r['raw_r']:>6.0%} {r['log_r_bps']:>10.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--total-mb", type=int, default=256, help="bytes written per batch size and path")
    parser.add_argument("--sizes", default="1024,16384,1048576", help="batch sizes in bytes")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per size; each path keeps its best")
    args = parser.parse_args()
    tune_malloc()  # as the broker does at start-up: large buffers stay in the heap
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="log-bench-") as tmp:
        results = [bench_size(Path(tmp), int(s), args.total_mb << 20, args.repeat) for s in args.sizes.split(",")]
    for line in rows(results):
        print(line)


if __name__ == "__main__":
    main()

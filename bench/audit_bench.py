"""Log audit benchmark: `minibroker audit`'s Spark job on local[2] against plain Python reading the same files.

Writes ~1 GiB of log dirs to a temporary directory with the log layer (3
replicas of several partitions, each a LogManager of its own, the followers'
logs appended with append_as_follower as a fetcher would), then in one run:

- the I/O floor: plain Python reading every `.log` file once, in 8 MiB
  chunks (the chunk size the audit reads with);
- the audit: spark_jobs.audit.run_audit on local[2] (session already started,
  so the JVM's start-up is left out and reported apart);

both with the files in the page cache ("warm") and evicted from it first with
posix_fadvise(DONTNEED), which touches only these files ("cold": from the disk).

Prints MB/s of segment data for both and their ratio. Targets (issue 7):
audit >= 100 MB/s and within 3x of the floor. The temporary directory is
removed at the end.

    .venv/bin/python bench/audit_bench.py [--total-mb 1024] [--partitions 4] [--batch-kb 64] [--repeat 2] [--cache both]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from broker.config.log_config import LogConfig
from broker.log.manager import LogManager
from common.record import CompressionType, ProducerRecord, build_batch
from proto.types import TopicPartition

CODECS = (CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD, CompressionType.GZIP)
LEADER_EPOCH = 3


def sample_batches(batch_bytes: int, count: int = 8) -> list[bytes]:
    """A few distinct batches of about `batch_bytes` stored bytes, over the codecs, from random values."""
    batches = []
    for i in range(count):
        codec = CODECS[i % len(CODECS)]
        records = max(1, batch_bytes // 120)
        # Half random, half repeated: compressed batches keep a realistic share of their raw size.
        values = [os.urandom(50) + bytes(50) for _ in range(records)]
        batches.append(build_batch([ProducerRecord(v, key=str(j).encode()) for j, v in enumerate(values)],
                                   compression=codec, now_ms=1_700_000_000_000 + i))
    return batches


def write_log_dirs(root: Path, total_bytes: int, partitions: int, replicas: int = 3, batch_bytes: int = 65536,
                   segment_bytes: int = 128 << 20) -> list[Path]:
    """`replicas` broker log dirs under `root` holding `partitions` partitions of ~total_bytes/replicas each."""
    config = LogConfig(segment_bytes=segment_bytes)
    managers = [LogManager([root / f"broker-{b}"], config, broker_id=b) for b in range(1, replicas + 1)]
    for manager in managers:
        manager.startup()
    samples = sample_batches(batch_bytes)
    per_partition = total_bytes // replicas // partitions
    for p in range(partitions):
        tp = TopicPartition("bench", p)
        logs = [m.get_or_create_log(tp) for m in managers]
        written = 0
        i = 0
        while written < per_partition:
            batch = bytearray(samples[i % len(samples)])
            logs[0].append_as_leader(batch, LEADER_EPOCH)  # stamps offsets and epoch into `batch`
            for follower in logs[1:]:
                follower.append_as_follower(batch)
            written += len(batch)
            i += 1
    for manager in managers:
        manager.write_high_watermarks((tp, log.log_end_offset) for tp, log in manager.all_logs().items())
        manager.shutdown()
    return [root / f"broker-{b}" for b in range(1, replicas + 1)]


def segment_files(log_dirs: list[Path]) -> list[Path]:
    return sorted(p for d in log_dirs for p in d.glob("*/*.log"))


def read_floor(files: list[Path], chunk: int = 8 << 20) -> float:
    """Seconds for plain Python to read every file once."""
    started = time.perf_counter()
    for path in files:
        with path.open("rb", buffering=0) as f:
            while f.read(chunk):
                pass
    return time.perf_counter() - started


def evict(files: list[Path]) -> None:
    """Drop the files' pages from the page cache (theirs only), so the next read comes from the disk."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def tree_cpu_seconds() -> float:
    """CPU time of this process and every descendant (the JVM, Spark's Python workers), reaped ones included.

    On a shared machine the wall clock says how busy the others are; CPU seconds
    per byte say what the audit costs, and on an idle machine with N cores the
    wall time tends to CPU / N.
    """
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0)
        todo += [child for child, parent in parents.items() if parent == pid]
    return total / ticks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--total-mb", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch-kb", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cache", choices=("warm", "cold", "both"), default="both",
                        help="read the files from the page cache, from the disk (evicted first), or both")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from spark_jobs.audit import run_audit, spark_session

    with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        log_dirs = write_log_dirs(root / "data", args.total_mb << 20, args.partitions, batch_bytes=args.batch_kb << 10)
        files = segment_files(log_dirs)
        total = sum(p.stat().st_size for p in files)
        print(f"wrote {total / 1e6:.0f} MB in {len(files)} segments ({len(log_dirs)} replicas x {args.partitions}"
              f" partitions, ~{args.batch_kb} KiB batches) in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        spark, _ = spark_session(args.master, root)
        print(f"Spark session ({args.master}) started in {time.perf_counter() - started:.1f} s (not counted)")
        caches = ("warm", "cold") if args.cache == "both" else (args.cache,)
        floors: dict[str, list[float]] = {c: [] for c in caches}
        audits: dict[str, list[float]] = {c: [] for c in caches}

        cpu: dict[str, list[float]] = {c: [] for c in caches}
        floor_cpu: list[float] = []

        def audit(cache: str) -> float:
            started, cpu_before = time.perf_counter(), tree_cpu_seconds()
            summaries = run_audit(spark, [str(d) for d in log_dirs])
            elapsed = time.perf_counter() - started
            cpu[cache].append(tree_cpu_seconds() - cpu_before)
            findings = sum(len(s.findings) for s in summaries)
            if findings:
                raise SystemExit(f"the generated log dirs should audit clean, {findings} anomalies found")
            return elapsed

        try:
            for round_ in range(args.repeat):
                for cache in caches:
                    if cache == "cold":
                        evict(files)
                    else:
                        read_floor(files)  # into the page cache
                    cpu_before = time.process_time()
                    floors[cache].append(read_floor(files))
                    floor_cpu.append(time.process_time() - cpu_before)
                    if cache == "cold":
                        evict(files)
                    audits[cache].append(audit(cache))
                    print(f"round {round_ + 1} ({cache} cache): floor {total / floors[cache][-1] / 1e6:.0f} MB/s,"
                          f" audit {total / audits[cache][-1] / 1e6:.0f} MB/s ({cpu[cache][-1]:.1f} CPU-s)",
                          flush=True)
        finally:
            spark.stop()
        for cache in caches:
            floor, best = min(floors[cache]), min(audits[cache])
            print(f"{cache} cache, best of {args.repeat}: I/O floor (plain Python read) {total / floor / 1e6:.0f} MB/s"
                  f" ({floor:.2f} s); audit on {args.master} {total / best / 1e6:.0f} MB/s ({best:.2f} s),"
                  f" {best / floor:.1f}x the floor (targets: >= 100 MB/s, <= 3x)")
            least = min(cpu[cache])
            print(f"{cache} cache: audit costs {least:.1f} CPU-s ({total / least / 1e6:.0f} MB per CPU-s; on"
                  f" {os.cpu_count()} idle cores about {total / least * (os.cpu_count() or 1) / 1e6:.0f} MB/s);"
                  f" the floor {min(floor_cpu):.2f} CPU-s")
        print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        shutil.rmtree(root / "data", ignore_errors=True)


if __name__ == "__main__":
    main()

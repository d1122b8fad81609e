"""End-to-end throughput of a real one-broker cluster on this machine, against the "working cluster" targets.

    .venv/bin/python bench/cluster_perf.py [--records 500000] [--record-size 100] [--repeat 3]
        [--producer-props acks=1 linger.ms=5 batch.size=262144] [--skip-defaults]

Brings up ZooKeeper, one controller and one broker in a temporary data dir
(local_cluster.cluster, as `minibroker cluster up` does), then:

  1. `minibroker perf produce` (subprocess, Kafka's producer perf test) with the
     producer's defaults and with the given producer props, each to a fresh
     one-partition RF=1 topic;
  2. `minibroker perf consume` (subprocess) of what the props run wrote
     (1 and 2 --repeat times with the props: the median counts);
  3. the broker's own CPU per MB produced, for batches of 16, 160 and 1600
     records: raw Produce requests of one batch each (built once, so the client
     costs nothing to speak of), with the broker process's utime+stime read from
     /proc/<pid>/stat before and after. The broker's work is per batch, so this
     must not grow with the number of records per batch.

and prints a table with the targets and the ratio reached. The cluster is torn
down however the run ends (the temp dir too, unless --keep).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import grpc

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from client import Admin, NewTopic  # noqa: E402
from client.connection import channel_options  # noqa: E402
from common.record import ProducerRecord, build_batch  # noqa: E402
from local_cluster.cluster import LocalCluster  # noqa: E402
from proto import minibroker_pb2 as pb  # noqa: E402
from proto import minibroker_pb2_grpc as pb_grpc  # noqa: E402

PRODUCE_TARGET = 150_000.0
CONSUME_TARGET = 400_000.0
DEFAULT_PROPS = ("acks=1", "linger.ms=5", "batch.size=262144")
CPU_BATCH_SIZES = (16, 160, 1600)
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PRODUCE_RATE = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec .*99\.9th\.$", re.M)
MB = 1 << 20


def minibroker(*args: str, timeout: float = 600) -> str:
    """Run the `minibroker` command line in a child process; its stdout (raises on a non-zero exit)."""
    done = subprocess.run([sys.executable, "-m", "minibroker.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"minibroker {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def parse_produce_rate(output: str) -> float:
    """records/sec from perf produce's final line."""
    match = _PRODUCE_RATE.search(output)
    if match is None:
        raise ValueError(f"no summary line in perf produce output:\n{output}")
    return float(match.group(2))


def parse_consume_rate(output: str) -> float:
    """nMsg.sec from perf consume's data line (the 6th column)."""
    for line in output.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 10 and not fields[0].startswith("start.time"):
            return float(fields[5])
    raise ValueError(f"no data line in perf consume output:\n{output}")


def _rates(rates: list[float]) -> str:
    """The median, with the range when there were several runs: this machine is shared, runs vary."""
    median = f"{statistics.median(rates):,.0f}/s"
    return median if len(rates) == 1 else f"{median} ({min(rates):,.0f}-{max(rates):,.0f})"


def reference_loop_ms() -> float:
    """CPU ms of a fixed pure-Python loop (best of 3): how fast this shared machine runs Python right now,
    to compare runs made at different times (about 170 ms when the machine is quiet)."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        total = 0
        for i in range(3_000_000):
            total += i & 7
        best = min(best, time.process_time() - started)
    return best * 1000


def process_cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def create_topic(bootstrap: str, name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])


async def produce_batches(address: str, topic: str, batch: bytes, requests: int, concurrency: int = 8) -> None:
    """`requests` Produce requests of the one `batch` (acks=1), `concurrency` of them in flight."""
    request = pb.ProduceRequest(acks=1, timeout_ms=30_000)
    request.topics.add(name=topic).partitions.add(index=0, records=batch)
    async with grpc.aio.insecure_channel(address, options=channel_options(50, 1000)) as channel:
        stub = pb_grpc.KafkaClientStub(channel)
        remaining = requests

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                response = await stub.Produce(request, timeout=30)
                code = response.responses[0].partitions[0].error_code
                if code:
                    raise RuntimeError(f"Produce failed with error code {code}")

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def broker_cpu_per_mb(address: str, broker_pid: int, topic: str, records_per_batch: int, record_size: int,
                      total_bytes: int) -> tuple[float, int, float]:
    """(broker CPU ms per MB produced, requests sent, CPU µs per request) for one-batch requests of
    `records_per_batch` records."""
    value = b"x" * record_size
    now = int(time.time() * 1000)
    batch = build_batch([ProducerRecord(value, None, now)] * records_per_batch)
    requests = max(total_bytes // len(batch), 50)
    asyncio.run(produce_batches(address, topic, batch, 20))  # warm up the connection and the log
    before = process_cpu_s(broker_pid)
    asyncio.run(produce_batches(address, topic, batch, requests))
    cpu_s = process_cpu_s(broker_pid) - before
    return cpu_s * 1000 / (requests * len(batch) / MB), requests, cpu_s * 1e6 / requests


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--producer-props", nargs="+", default=list(DEFAULT_PROPS))
    parser.add_argument("--repeat", type=int, default=1,
                        help="produce + consume runs (fresh topic each); the table shows the median (and the range)")
    parser.add_argument("--skip-defaults", action="store_true", help="do not run perf produce with the defaults")
    parser.add_argument("--cpu-mb", type=int, default=32, help="MB produced per batch size for the CPU figures")
    parser.add_argument("--keep", action="store_true", help="keep the data dir (and print where it is)")
    parser.add_argument("--data-dir", type=Path,
                        help="use the cluster already running from this data dir (left running) instead")
    args = parser.parse_args(argv)

    own = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="minibroker-perf-")) if own else args.data_dir
    cluster = LocalCluster(data_dir)
    rows: list[tuple[str, str, str, str]] = []
    suffix = f"-{os.getpid()}"  # fresh topics on a cluster that is reused
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (on {os.cpu_count()} CPUs),"
          f" reference loop {reference_loop_ms():.0f} ms", flush=True)
    try:
        info = cluster.up(brokers=1, controllers=1, report=lambda line: print(line, flush=True)) if own \
            else cluster.load()
        broker = info.brokers[0]
        assert broker.pid is not None
        bootstrap = info.bootstrap_servers
        n, size = str(args.records), str(args.record_size)

        if not args.skip_defaults:
            create_topic(bootstrap, "perf-defaults" + suffix)
            out = minibroker("perf", "produce", "--bootstrap-server", bootstrap, "--topic", "perf-defaults" + suffix,
                             "--num-records", n, "--record-size", size, "--throughput", "-1",
                             "--producer-props", "acks=1")
            print(out.strip().splitlines()[-1], flush=True)
            rate = parse_produce_rate(out)
            rows.append(("perf produce (acks=1, defaults)", f"{rate:,.0f}/s", "-", "-"))

        produced: list[float] = []
        consumed: list[float] = []
        for run in range(args.repeat):
            topic = f"perf{suffix}-{run}"
            create_topic(bootstrap, topic)
            out = minibroker("perf", "produce", "--bootstrap-server", bootstrap, "--topic", topic,
                             "--num-records", n, "--record-size", size, "--throughput", "-1",
                             "--producer-props", *args.producer_props)
            print(out.strip().splitlines()[-1], flush=True)
            produced.append(parse_produce_rate(out))
            out = minibroker("perf", "consume", "--bootstrap-server", bootstrap, "--topic", topic, "--messages", n)
            print(out.strip().splitlines()[-1], flush=True)
            consumed.append(parse_consume_rate(out))
        rate = statistics.median(produced)
        rows.append((f"perf produce ({' '.join(args.producer_props)})", _rates(produced),
                     f">= {PRODUCE_TARGET:,.0f}/s", f"{rate / PRODUCE_TARGET:.2f}"))
        rate = statistics.median(consumed)
        rows.append((f"perf consume --messages {n}", _rates(consumed), f">= {CONSUME_TARGET:,.0f}/s",
                     f"{rate / CONSUME_TARGET:.2f}"))

        cpu: list[float] = []
        for count in CPU_BATCH_SIZES:
            topic = f"perf-cpu-{count}{suffix}"
            create_topic(bootstrap, topic)
            ms_per_mb, requests, us_per_batch = broker_cpu_per_mb(
                broker.address, broker.pid, topic, count, args.record_size, args.cpu_mb * MB)
            cpu.append(ms_per_mb)
            print(f"broker CPU, {count}-record batches: {ms_per_mb:.1f} ms/MB ({requests} requests of one batch,"
                  f" {us_per_batch:.0f} µs each)", flush=True)
        for count, ms_per_mb in zip(CPU_BATCH_SIZES, cpu, strict=True):
            rows.append((f"broker CPU per MB, {count}-record batches", f"{ms_per_mb:.1f} ms/MB",
                         f"<= {cpu[0]:.1f} (16-record)", f"{ms_per_mb / cpu[0]:.2f}"))
    finally:
        try:
            if own:
                cluster.down()
        finally:
            if not own:
                pass
            elif args.keep:
                print(f"data dir kept: {data_dir}")
            else:
                shutil.rmtree(data_dir, ignore_errors=True)

    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (on {os.cpu_count()} CPUs),"
          f" reference loop {reference_loop_ms():.0f} ms")
    widths = [max(len(row[i]) for row in [("measure", "result", "target", "ratio"), *rows]) for i in range(4)]
    print()
    for row in [("measure", "result", "target", "ratio"), *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

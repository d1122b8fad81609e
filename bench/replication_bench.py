"""What replication costs: throughput by acks and replication factor, and end-to-end latency under acks=all load,
on a real three-broker cluster on this machine.

    .venv/bin/python bench/replication_bench.py [--records 200000] [--record-size 100]
        [--producer-props linger.ms=5 batch.size=65536] [--e2e-records 1000]

Brings up ZooKeeper, one controller and three brokers in a temporary data dir
(local_cluster.cluster, as `minibroker cluster up` does), creates one-partition
topics (RF=3 ones with min.insync.replicas=2), then runs `minibroker perf` in
child processes, each with the same producer props:

  1. `perf produce` unthrottled: RF=3 with acks=1, RF=3 with acks=all, RF=1 with
     acks=1; the three rates and their ratios (target: acks=all >= 50% of acks=1
     at RF=3);
  2. at half the acks=all peak: a throttled acks=all `perf produce` to one RF=3
     topic in the background, and meanwhile `perf end-to-end` (acks=all, one
     record at a time, produce to consume) on another RF=3 topic. Both report
     percentiles: end-to-end round trips, and the loaded producer's own
     send-to-acknowledgement latency (target: p99 <= 50 ms).

The cluster is torn down, and the data dir removed, however the run ends.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from client import Admin, NewTopic
from local_cluster.cluster import scratch_cluster

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PROPS = ("linger.ms=5", "batch.size=65536")
ACKS_ALL_TARGET = 0.5  # of acks=1 at RF=3
P99_TARGET_MS = 50.0
# perf produce's final line: "N records sent, R records/sec (...), ..., P50 ms 50th, P95 ms 95th, P99 ms 99th, ...".
_PRODUCE_TOTAL = re.compile(r"^\d+ records sent, ([\d.]+) records/sec .* (\d+) ms 50th, \d+ ms 95th, (\d+) ms 99th",
                            re.M)
_END_TO_END = re.compile(r"^Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)$", re.M)


def perf(*args: str) -> list[str]:
    return [sys.executable, "-m", "minibroker.cli", "perf", *args]


def run(argv: list[str], timeout: float = 900) -> str:
    """A child's stdout; raises with its output on a non-zero exit."""
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[2:])} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def produce_argv(bootstrap: str, topic: str, records: int, record_size: int, throughput: float, acks: str,
                 props: Sequence[str]) -> list[str]:
    return perf("produce", "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
                "--record-size", str(record_size), "--throughput", str(throughput),
                "--producer-props", f"acks={acks}", *props)


def produce_summary(output: str) -> tuple[float, int, int]:
    """(records/sec, p50 ms, p99 ms) from perf produce's final line."""
    match = _PRODUCE_TOTAL.search(output)
    if match is None:
        raise ValueError(f"no summary line in perf produce output:\n{output}")
    return float(match.group(1)), int(match.group(2)), int(match.group(3))


def end_to_end_summary(output: str) -> tuple[int, int, int]:
    """(p50, p99, p99.9) ms from perf end-to-end's last line."""
    match = _END_TO_END.search(output)
    if match is None:
        raise ValueError(f"no percentiles in perf end-to-end output:\n{output}")
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def create_topics(bootstrap: str) -> None:
    rf3 = {"min.insync.replicas": "2"}
    with Admin(bootstrap) as admin:
        admin.create_topics([
            NewTopic("rf3-acks1", 1, 3, topic_configs=rf3), NewTopic("rf3-acksall", 1, 3, topic_configs=rf3),
            NewTopic("rf1", 1, 1), NewTopic("rf3-load", 1, 3, topic_configs=rf3),
            NewTopic("rf3-e2e", 1, 3, topic_configs=rf3),
        ])


def bench(bootstrap: str, records: int, record_size: int, props: Sequence[str], e2e_records: int) -> None:
    create_topics(bootstrap)
    rates: dict[str, float] = {}
    for label, topic, acks in (("RF=3 acks=1", "rf3-acks1", "1"), ("RF=3 acks=all", "rf3-acksall", "all"),
                               ("RF=1 acks=1", "rf1", "1")):
        out = run(produce_argv(bootstrap, topic, records, record_size, -1, acks, props))
        print(f"{label}: {out.strip().splitlines()[-1]}", flush=True)
        rates[label], _, _ = produce_summary(out)
    all_vs_one = rates["RF=3 acks=all"] / rates["RF=3 acks=1"]

    half = rates["RF=3 acks=all"] / 2
    # Enough load to outlast the round trips (a few ms each), bounded so the run ends on its own.
    load = subprocess.Popen(produce_argv(bootstrap, "rf3-load", int(half * 30), record_size, half, "all", props),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        e2e_out = run(perf("end-to-end", "--bootstrap-server", bootstrap, "--topic", "rf3-e2e", "--num-records",
                           str(e2e_records), "--record-size", str(record_size), "--producer-props", "acks=all",
                           *props))
        load_out, _ = load.communicate(timeout=300)
    finally:
        if load.poll() is None:
            load.kill()
            load.wait()
    if load.returncode != 0:
        raise RuntimeError(f"the background perf produce exited {load.returncode}:\n{load_out}")
    print(f"load at {half:,.0f}/s: {load_out.strip().splitlines()[-1]}", flush=True)
    load_rate, load_p50, load_p99 = produce_summary(load_out)
    e2e_p50, e2e_p99, e2e_p999 = end_to_end_summary(e2e_out)

    print(f"\n{record_size}-byte records, producer props {' '.join(props)}, one partition per topic")
    print(f"{'RF=3 acks=1':<16}{rates['RF=3 acks=1']:>12,.0f} records/s")
    print(f"{'RF=3 acks=all':<16}{rates['RF=3 acks=all']:>12,.0f} records/s   {all_vs_one:.0%} of acks=1"
          f" (target >= {ACKS_ALL_TARGET:.0%})")
    print(f"{'RF=1 acks=1':<16}{rates['RF=1 acks=1']:>12,.0f} records/s   RF=3 acks=1 is"
          f" {rates['RF=3 acks=1'] / rates['RF=1 acks=1']:.0%} of it, acks=all"
          f" {rates['RF=3 acks=all'] / rates['RF=1 acks=1']:.0%}")
    print(f"under acks=all load of {half:,.0f}/s (reached {load_rate:,.0f}/s):")
    print(f"  end-to-end, {e2e_records} round trips: p50 {e2e_p50} ms, p99 {e2e_p99} ms, p99.9 {e2e_p999} ms"
          f" (target p99 <= {P99_TARGET_MS:.0f} ms)")
    print(f"  the load's own acks=all send-to-ack: p50 {load_p50} ms, p99 {load_p99} ms")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000, help="records per unthrottled perf produce")
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--producer-props", nargs="+", default=list(DEFAULT_PROPS),
                        help="shared by every run; acks is set per run")
    parser.add_argument("--e2e-records", type=int, default=1000, help="perf end-to-end round trips")
    args = parser.parse_args(argv)
    with scratch_cluster("minibroker-replication-bench-", brokers=3, controllers=1,
                         report=lambda line: print(line, flush=True)) as (_, info):
        bench(info.bootstrap_servers, args.records, args.record_size, args.producer_props, args.e2e_records)
    return 0


if __name__ == "__main__":
    sys.exit(main())

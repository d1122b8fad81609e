"""What `minibroker console` costs the brokers: requests per second and broker CPU with the page open, against a
local cluster with 1,000 partitions.

    .venv/bin/python bench/console_cost.py [--partitions 1000] [--replication-factor 3] [--window 30]

Brings up three brokers and a controller, creates one topic of --partitions partitions, then measures over
--window seconds each, in turn:

  idle     the brokers' CPU (user + system, from /proc/<pid>/stat, all three summed) with no console;
  console  the same with `minibroker console` running and one page reading its server-sent events, and the
           requests the console sent the cluster in that window (its own count, by Kafka API name).

The difference between the two CPU figures is the console's cost; the console's own CPU is printed beside it.
The machine is shared: run it more than once before trusting a difference of a few percent of a core.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from client import Admin, KafkaError, NewTopic  # noqa: E402
from local_cluster.cluster import LocalCluster, scratch_cluster  # noqa: E402
from proto.errors import ErrorCode  # noqa: E402

TOPIC = "console-cost"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime: fields 14 and 15 of stat


def brokers_cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def measure(pids: list[int], window_s: float) -> float:
    """The share of one core the processes used over the window."""
    before, started = brokers_cpu(pids), time.monotonic()
    time.sleep(window_s)
    return (brokers_cpu(pids) - before) / (time.monotonic() - started)


def picture(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url + "api/picture", timeout=10) as response:
        return json.load(response)


class Page:
    """A page's event stream, read (and counted) on a thread as a browser would."""

    def __init__(self, url: str) -> None:
        self.pictures = 0
        self._response = urllib.request.urlopen(url + "api/stream", timeout=30)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self._response:
                if line.startswith(b"data: "):
                    self.pictures += 1
        except (OSError, ValueError, AttributeError):
            pass  # closed under the reader (http.client's chunked reader then has no file: AttributeError)

    def close(self) -> None:
        self._response.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--window", type=float, default=30.0, help="seconds measured, each way")
    args = parser.parse_args()
    with scratch_cluster("console-cost-", brokers=3, controllers=1) as (cluster, info):
        started = time.monotonic()
        with Admin(info.bootstrap_servers, request_timeout_ms=120_000) as admin:
            try:
                admin.create_topics([NewTopic(TOPIC, args.partitions, args.replication_factor)], timeout_ms=120_000)
            except KafkaError as e:  # a retry after a slow first try finds the topic made
                if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise
            while not all(p.leader >= 0 for p in admin.describe_topics([TOPIC])[0].partitions):
                time.sleep(0.5)
        print(f"{args.partitions} partitions (RF {args.replication_factor}) on 3 brokers in"
              f" {time.monotonic() - started:.1f} s", flush=True)
        pids = [cluster.pid(f"broker-{b.id}") for b in info.brokers]
        time.sleep(5)  # the leaders' first fetches and checkpoints settle
        idle = measure(pids, args.window)
        print(f"idle:    brokers {idle * 100:5.1f}% of a core (3 brokers summed, {args.window:g} s)", flush=True)
        run_console(cluster, pids, args.window, idle)
    return 0


def run_console(cluster: LocalCluster, pids: list[int], window_s: float, idle: float) -> None:
    console = subprocess.Popen([sys.executable, "-m", "minibroker.cli", "console", "--data-dir",
                                str(cluster.data_dir), "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        assert console.stdout is not None
        line = console.stdout.readline()
        found = re.search(r"http://\S+/", line)
        if found is None:
            raise SystemExit(f"the console did not start: {line}{console.stdout.read()}")
        url = found.group(0)
        page, opened = Page(url), time.monotonic()
        time.sleep(5)  # its first pictures: connections made, groups and configs asked once
        sent_before = picture(url)["requests"]
        console_before, began = cpu_seconds(console.pid), time.monotonic()
        with_console = measure(pids, window_s)
        elapsed = time.monotonic() - began
        console_cpu = (cpu_seconds(console.pid) - console_before) / elapsed
        sent_after = picture(url)["requests"]
        pictures, open_s = page.pictures, time.monotonic() - opened
        page.close()
        assert isinstance(sent_before, dict) and isinstance(sent_after, dict)
        rates = {name: (count - sent_before.get(name, 0)) / elapsed for name, count in sorted(sent_after.items())}
        print(f"console: brokers {with_console * 100:5.1f}% of a core: +{(with_console - idle) * 100:.1f} points"
              f" for the console; the console itself {console_cpu * 100:.1f}%")
        print(f"console: {sum(rates.values()):.1f} requests/s to the cluster ("
              + ", ".join(f"{name} {rate:.2f}" for name, rate in rates.items()) + ")")
        print(f"page:    {pictures / open_s:.1f} pictures/s received")
    finally:
        console.terminate()
        console.wait(30)


if __name__ == "__main__":
    raise SystemExit(main())

"""How long a broker restart takes, phase by phase: process start-up, log recovery, registration, back in the ISR.

    .venv/bin/python bench/restart_bench.py [--partitions 6] [--load-seconds 20] [--throughput 2000]
        [--import-runs 5] [--recovery-batches 8000] [--parts startup,recovery,restart]

1. Start-up (no cluster): the command a broker process is spawned with
   (`python -m minibroker.commands.broker --help`: every import, no I/O), against
   the same with the client package imported too (what every broker and
   controller paid before the package stopped importing it eagerly), against a
   bare interpreter; wall time (median) and CPU (mean) over --import-runs runs.
2. Recovery (no cluster): one partition's log of --recovery-batches one-record
   idempotent batches, left as a SIGKILL leaves it (nothing closed, recovery
   point 0), opened again: the whole active segment is re-validated, its
   indexes rebuilt and the producer state replayed.
3. SIGKILL restart on a real cluster (ZooKeeper, one controller, three brokers,
   as `minibroker cluster up` runs them): a topic of --partitions partitions,
   RF=3, under `minibroker perf produce` load (one-record batches, acks=1) for
   --load-seconds; broker 1 is SIGKILLed and started again while the load goes
   on. Prints, from the moment it was spawned: its first log line (Python
   start-up), its logs loaded (recovery), registered in ZooKeeper with a new
   broker epoch, SERVING, and back in the ISR of every partition.

The cluster is torn down, and every temporary directory removed, however the run ends.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from broker.config.log_config import LogConfig
from broker.log.log import Log
from client import Admin, NewTopic
from common.record import ProducerRecord, build_batch
from local_cluster.cluster import LocalCluster
from proto.types import TopicPartition
from zk.client import KafkaZkClient

ROOT = Path(__file__).resolve().parent.parent
BROKER = 1
TOPIC = "restart-bench"
_POLL_S = 0.02
PARTS = ("startup", "recovery", "restart")
PACKAGES = ("broker", "client", "controller", "minibroker", "proto", "zk", "chaos")
_LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO (.*)$")


# ---------------------------------------------------------------------- 1. start-up

def child_cost(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one child process run to completion in `cwd` (first on its sys.path)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench_startup(runs: int) -> None:
    print("1. start-up: the broker command's imports (no I/O)")
    compileall = [sys.executable, "-m", "compileall", "-q", *PACKAGES]
    subprocess.run(compileall, cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
    # A copy of the project's sources without bytecode, run with PYTHONDONTWRITEBYTECODE=1: every project module
    # is compiled on every start, as it was before `make setup` compiled them (site-packages keep theirs).
    source_only = Path(tempfile.mkdtemp(prefix="restart-bench-src-"))
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source_only / package, ignore=shutil.ignore_patterns("__pycache__"))
    no_bytecode = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    broker = [sys.executable, "-m", "minibroker.commands.broker", "--help"]
    eager_client = [sys.executable, "-c", "import client, sys, runpy; sys.argv = ['broker', '--help'];"
                                          " runpy.run_module('minibroker.commands.broker', run_name='__main__')"]
    cases = {
        "bare interpreter (python -c pass)": ([sys.executable, "-c", "pass"], ROOT),
        "before: + client package, no project bytecode": (eager_client, source_only),
        "+ client package, project bytecode": (eager_client, ROOT),
        "broker command, no project bytecode": (broker, source_only),
        "after: broker command, project bytecode": (broker, ROOT),
        "CLI: minibroker.cli broker --help, project bytecode": (
            [sys.executable, "-m", "minibroker.cli", "broker", "--help"], ROOT),
    }
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    try:
        for _ in range(runs):  # interleaved: the machine's load drifts during the run
            for name, (argv, cwd) in cases.items():
                samples[name].append(child_cost(argv, cwd, no_bytecode))
    finally:
        shutil.rmtree(source_only, ignore_errors=True)
    before = statistics.mean(c for _, c in samples["before: + client package, no project bytecode"])
    for name, values in samples.items():
        wall, cpu = statistics.median(w for w, _ in values), statistics.mean(c for _, c in values)
        print(f"  {name:52s} wall {wall * 1000:6.0f} ms  CPU {cpu * 1000:6.0f} ms  ({cpu / before:4.0%} of before)")


# ---------------------------------------------------------------------- 2. recovery

def bench_recovery(batches: int) -> None:
    print(f"2. recovery of one partition after SIGKILL: {batches} one-record idempotent batches, recovery point 0")
    tmp = Path(tempfile.mkdtemp(prefix="restart-bench-log-"))
    try:
        config = LogConfig()
        log = Log.open(tmp / f"{TOPIC}-0", config)
        for i in range(batches):
            log.append_as_leader(build_batch([ProducerRecord(b"v" * 100)], producer_id=1000 + i % 3, producer_epoch=0,
                                             base_sequence=i // 3, now_ms=1_700_000_000_000 + i), 1)
        # No close: what a SIGKILL leaves (preallocated indexes, no producer snapshot at the log end).
        cpu = time.process_time()
        start = time.perf_counter()
        recovered = Log.open(tmp / f"{TOPIC}-0", config, recovery_point=0, clean_shutdown=False)
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
        assert recovered.log_end_offset == batches
        print(f"  Log.open with recovery: wall {wall * 1000:.0f} ms, CPU {cpu * 1000:.0f} ms"
              f" ({cpu * 1e6 / batches:.1f} us per batch)")
        recovered.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------- 3. SIGKILL restart

def log_events(log_file: Path, since: float) -> dict[str, float]:
    """Epoch seconds of the broker's start-up milestones logged at or after `since` (its log's local time)."""
    marks = {"first log line": "starting (broker.server.kafka_server)",
             "old registration seen (waits for its session to expire)": "broker id ",
             "log recovery starts": "Log dir ", "logs loaded": "Loaded ", "listening": "Listening on "}
    found: dict[str, float] = {}
    for line in log_file.read_text(errors="replace").splitlines():
        match = _LOG_TIME.match(line)
        if match is None:
            continue
        at = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if at < since - 0.001:
            continue
        for name, text in marks.items():
            if name not in found and match.group(2).startswith(text):
                found[name] = at
    return found


def wait_for(what: str, condition: Callable[[], bool], deadline: float) -> float:
    while not condition():
        if time.time() >= deadline:
            raise TimeoutError(f"not {what} in time")
        time.sleep(_POLL_S)
    return time.time()


def serving(address: str) -> bool:
    # A channel per check, with connections of its own: one made while the broker was down would wait out
    # gRPC's reconnect backoff, and channels share connections process-wide by default.
    with grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=0.5)
        except grpc.RpcError:
            return False
    return bool(response.status == health_pb2.HealthCheckResponse.SERVING)


def bench_restart(partitions: int, load_seconds: float, throughput: int, timeout: float, keep: bool) -> None:
    print(f"3. SIGKILL restart of broker {BROKER}: {partitions} partitions, RF=3, perf produce load at"
          f" {throughput} records/s for {load_seconds:g} s before the kill and during the restart")
    data_dir = Path(tempfile.mkdtemp(prefix="restart-bench-"))
    cluster = LocalCluster(data_dir)
    load: subprocess.Popen[bytes] | None = None
    try:
        info = cluster.up(brokers=3, controllers=1, timeout=120)
        with Admin(bootstrap_servers=info.bootstrap_servers) as admin:
            admin.create_topics([NewTopic(TOPIC, partitions, 3)])
        zk = KafkaZkClient.connect(info.zookeeper.connect)
        tps = [TopicPartition(TOPIC, p) for p in range(partitions)]

        def full_isr() -> bool:
            states = zk.get_partition_states(tps)
            return len(states) == partitions and all(BROKER in s.isr and len(s.isr) == 3 for s in states.values())

        wait_for("fully replicated", full_isr, time.time() + timeout)
        load = subprocess.Popen(
            [sys.executable, "-m", "minibroker.cli", "perf", "produce", "--bootstrap-server", info.bootstrap_servers,
             "--topic", TOPIC, "--num-records", str(10**9), "--record-size", "100", "--throughput", str(throughput),
             "--producer-props", "acks=1", "linger.ms=0"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(load_seconds)  # the load itself: how much log the killed broker has to recover
        old = zk.get_broker(BROKER)
        assert old is not None
        cluster.send_signal(f"broker-{BROKER}", signal.SIGKILL)
        wait_for("gone", lambda: not cluster.running(f"broker-{BROKER}"), time.time() + timeout)
        killed = time.time()
        entry = info.broker(BROKER)
        restart_error: list[BaseException] = []
        ready_at: list[float] = []

        def restart() -> None:
            try:
                cluster.restart_broker(BROKER, timeout=timeout)
                ready_at.append(time.time())
            except BaseException as e:  # reported by the main thread
                restart_error.append(e)

        spawned = time.time()
        restarter = threading.Thread(target=restart, daemon=True)
        restarter.start()
        deadline = spawned + timeout

        def registered() -> bool:
            broker = zk.get_broker(BROKER)
            return broker is not None and broker.epoch != old.epoch

        at_registered = wait_for("registered", registered, deadline)
        at_serving = wait_for("serving", lambda: serving(entry.address), deadline)
        at_isr = wait_for("back in every ISR", full_isr, deadline)
        restarter.join(timeout)
        at_ready = ready_at[0] if ready_at else float("nan")
        if restart_error:
            raise restart_error[0]
        zk.close()
        events = log_events(cluster.log_file(f"broker-{BROKER}"), spawned)
        print(f"  SIGKILL -> process gone: {killed - spawned:+.2f} s before the spawn (t=0)")
        timeline = [*((name, at) for name, at in sorted(events.items(), key=lambda e: e[1])),
                    ("registered (new broker epoch)", at_registered), ("SERVING", at_serving),
                    (f"in the ISR of all {partitions} partitions", at_isr),
                    ("restart-broker returns (cluster ready)", at_ready)]
        for name, at in timeline:
            print(f"  {name:40s} t={at - spawned:6.2f} s")
        if "logs loaded" in events and "log recovery starts" in events:
            print(f"  log recovery: {events['logs loaded'] - events['log recovery starts']:.2f} s for {partitions}"
                  f" partitions")
        print(f"  registered -> in every ISR: {at_isr - at_registered:.2f} s")
    finally:
        if load is not None:
            load.kill()
            load.wait()
        cluster.down(kill=True)
        if keep:
            print(f"  data dir and process logs kept in {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--load-seconds", type=float, default=20.0)
    parser.add_argument("--throughput", type=int, default=2000, help="records/s of the background load")
    parser.add_argument("--import-runs", type=int, default=5)
    parser.add_argument("--recovery-batches", type=int, default=8000)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--keep", action="store_true", help="keep the cluster's data dir and logs")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated, of {', '.join(PARTS)} (restart on an old checkout: its before figures)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    parts = args.parts.split(",")
    if unknown := set(parts) - set(PARTS):
        parser.error(f"unknown parts {sorted(unknown)}: choose from {', '.join(PARTS)}")
    if "startup" in parts:
        bench_startup(args.import_runs)
    if "recovery" in parts:
        bench_recovery(args.recovery_batches)
    if "restart" in parts:
        bench_restart(args.partitions, args.load_seconds, args.throughput, args.timeout, args.keep)


if __name__ == "__main__":
    main()

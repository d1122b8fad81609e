"""Does the broker's event loop stay free? A Kafka connection's round trip while the broker does slow work.

    .venv/bin/python bench/free_loop.py [--partitions 1000] [--seconds 4] [--pipelined 64]

Brings up a local cluster (1 broker, 1 controller, its own ZooKeeper; minibroker.local.cluster, as `minibroker
cluster up` does) and, on one Kafka connection, sends an ApiVersions request every 5 ms and times its round
trip, through these phases in turn (issue 24's done-when: under 100 ms through all of them):

- idle: nothing else happens;
- create topic: a `--partitions`-partition topic is created (the broker creates the logs and writes their
  leader-epoch checkpoints: LeaderAndIsr);
- produce + roll: a producer (confluent-kafka, acks=1) writes 1 KiB records at `--produce-mb-per-s` (8 MiB/s by
  default; 0: as fast as it can, which on a small machine measures the loop's produce work more than the rolls)
  to a topic with segment.bytes=1 MiB, so segments roll several times a second (the roll's fsyncs);
- ZooKeeper paused: ZooKeeper is stopped (SIGSTOP) while eight DescribeConfigs requests wait on it (their
  answers come once it is resumed);

then a hostile pipeliner: one raw socket sends `--pipelined` Fetches (long polls on an empty partition: max
wait 30 s, min bytes 1 MiB; then reads of up to 50 MiB of the rolling topic) without reading anything, and
the broker's resident memory (VmRSS) is read before and after, and how many fetches it parked (its Fetch
purgatory size, -1 on a broker without that gauge).

Prints, per phase, the probes answered and their round-trip median, p99 and maximum in ms. The cluster and its
temporary data dir are removed at the end.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402
from kio.schema.api_versions.v3.request import ApiVersionsRequest  # noqa: E402
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from kio.schema.types import BrokerId, TopicName  # noqa: E402
from kio.static.primitive import i8, i32, i32Timedelta, i64  # noqa: E402

from local_cluster.cluster import LocalCluster  # noqa: E402
from tests.integration.kafka_wire import WireConnection, encode_request  # noqa: E402
from zk.server import free_port  # noqa: E402

PROBE_INTERVAL_S = 0.005
MB = 1 << 20


class Probe:
    """ApiVersions round trips on one connection, every PROBE_INTERVAL_S, each recorded under the current phase."""

    def __init__(self, address: str) -> None:
        self._conn = WireConnection(address, timeout=120)
        self._request = encode_request(ApiVersionsRequest(client_software_name="free-loop-probe",
                                                          client_software_version="1"), 1)
        self.phase = "idle"
        self.round_trips: dict[str, list[float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.perf_counter()
            self._conn.send(self._request)
            self._conn.receive()
            self.round_trips.setdefault(self.phase, []).append((time.perf_counter() - began) * 1000)
            self._stop.wait(PROBE_INTERVAL_S)


def during(probe: Probe, phase: str, work: Callable[[], None], min_seconds: float) -> None:
    """Run `work` with the probe's round trips recorded under `phase`, for at least `min_seconds`."""
    probe.phase = phase
    began = time.monotonic()
    work()
    remaining = min_seconds - (time.monotonic() - began)
    if remaining > 0:
        time.sleep(remaining)
    probe.phase = "between"


def create_topic(admin: AdminClient, name: str, partitions: int, **configs: str) -> None:
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=configs)],
                                      operation_timeout=120, request_timeout=120).values():
        future.result()


def produce_for(bootstrap: str, topic: str, seconds: float, mb_per_s: float) -> Callable[[], None]:
    """1 KiB records at `mb_per_s` (0: as fast as the producer can) for `seconds`."""
    def work() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5})
        value = os.urandom(1024)
        began = time.monotonic()
        sent = 0
        while (elapsed := time.monotonic() - began) < seconds:
            if mb_per_s and sent > mb_per_s * MB * elapsed:
                producer.poll(0.001)
                continue
            try:
                producer.produce(topic, value)
                sent += len(value)
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.flush(30)
        print(f"(produced {sent / MB:.0f} MiB in {time.monotonic() - began:.1f} s)")

    return work


def zookeeper_paused(cluster: LocalCluster, bootstrap: str, seconds: float) -> Callable[[], None]:
    def work() -> None:
        # Eight DescribeConfigs, each from a client of its own, all waiting on ZooKeeper.
        admins = [AdminClient({"bootstrap.servers": bootstrap}) for _ in range(8)]
        cluster.send_signal("zookeeper", signal.SIGSTOP)
        try:
            waiting = [admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "rolling")],
                                              request_timeout=60) for admin in admins]
            time.sleep(seconds)
        finally:
            cluster.send_signal("zookeeper", signal.SIGCONT)
        for futures in waiting:
            for future in futures.values():
                future.result()

    return work


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def waiting_fetches(metrics_port: int) -> int:
    """The broker's Fetch purgatory size (kafka_server_DelayedOperationPurgatory_NumDelayedOperations), or -1 where
    the broker has no such gauge."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith('kafka_server_DelayedOperationPurgatory_NumDelayedOperations{delayedOperation="Fetch"}'):
                return int(float(line.rsplit(" ", 1)[1]))
    return -1


def pipeliner(address: str, pid: int, metrics_port: int, topic: str, count: int, what: str) -> None:
    """A raw socket sending `count` Fetches of up to 50 MiB from offset 0 (a long poll for 1 MiB on an empty
    topic) and reading nothing; the broker's memory around it."""
    fetch = FetchRequest(
        replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(seconds=30)), min_bytes=i32(MB),
        max_bytes=i32(50 * MB), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName(topic), partitions=(FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0), log_start_offset=i64(-1),
            partition_max_bytes=i32(50 * MB)),)),), forgotten_topics_data=(), rack_id="")
    before, parked_before = rss_mb(pid), waiting_fetches(metrics_port)
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    try:
        sock.sendall(b"".join(encode_request(fetch, i) for i in range(count)))
        time.sleep(3)
        after = rss_mb(pid)
        parked = waiting_fetches(metrics_port) - parked_before
    finally:
        sock.close()
    print(f"\nhostile pipeliner: {count} {what} pipelined on one connection, nothing read")
    print(f"  broker VmRSS before {before:.0f} MB, with them in flight {after:.0f} MB ({after - before:+.0f} MB);"
          f" fetches it parked in the broker's purgatory: {parked}")


def summary(probe: Probe, phases: list[str]) -> None:
    print(f"\n{'phase':22} {'probes':>7} {'median ms':>10} {'p99 ms':>8} {'max ms':>8}")
    for phase in phases:
        rtts = sorted(probe.round_trips.get(phase, []))
        if not rtts:
            print(f"{phase:22} {0:>7}")
            continue
        p99 = rtts[min(len(rtts) - 1, int(len(rtts) * 0.99))]
        print(f"{phase:22} {len(rtts):>7} {statistics.median(rtts):>10.2f} {p99:>8.1f} {rtts[-1]:>8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--pipelined", type=int, default=64)
    parser.add_argument("--produce-mb-per-s", type=float, default=8.0,
                        help="the producer's rate in the roll phase (0: as fast as it can)")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="minibroker-free-loop-"))
    cluster = LocalCluster(data_dir)
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (on {os.cpu_count()} CPUs)")
    try:
        metrics_port = free_port()
        info = cluster.up(brokers=1, controllers=1, overrides=[f"metrics.port={metrics_port}"])
        bootstrap = info.kafka_bootstrap_servers
        pid = cluster.pid("broker-1")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        create_topic(admin, "rolling", 1, **{"segment.bytes": str(MB)})
        create_topic(admin, "empty", 1)
        probe = Probe(bootstrap.split(",")[0])
        probe.start()
        phases = ["idle", f"create topic ({args.partitions}p)", "produce + roll", "ZooKeeper paused"]
        during(probe, phases[0], lambda: None, args.seconds)
        during(probe, phases[1], lambda: create_topic(admin, "wide", args.partitions), args.seconds)
        during(probe, phases[2], produce_for(bootstrap, "rolling", args.seconds, args.produce_mb_per_s), args.seconds)
        during(probe, phases[3], zookeeper_paused(cluster, bootstrap, args.seconds), args.seconds)
        probe.stop()
        summary(probe, phases)
        rolled = len(list((Path(info.brokers[0].log_dir) / "rolling-0").glob("*.log")))
        print(f"(segments of the rolling topic after the run: {rolled})")
        address = bootstrap.split(",")[0]
        pipeliner(address, pid, metrics_port, "empty", args.pipelined, "long-poll Fetches (empty topic)")
        pipeliner(address, pid, metrics_port, "rolling", args.pipelined, "Fetches of 50 MiB (rolling topic)")
    finally:
        cluster.down(kill=True)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

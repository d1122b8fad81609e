"""How long a partition is unavailable when its leader dies (SIGKILL) or stops (SIGTERM, controlled shutdown),
on a real cluster on this machine: ZooKeeper, one controller, three brokers.

    .venv/bin/python bench/failover_bench.py [--rounds 5] [--session-timeout-ms 6000] [--settle-ms 1500]

Brings the cluster up in a temporary data dir (local_cluster.cluster, as
`minibroker cluster up` does) with zookeeper.session.timeout.ms for brokers and
controller alike, creates one RF=3 partition with min.insync.replicas=2, and
keeps an idempotent acks=all producer sending to it (a bounded number of
records in flight). Then:

  1. --rounds times: SIGKILL the partition's leader. The unavailability window
     is the longest gap between two acknowledgements from the last one before
     the kill to the first one after the election. It splits into detection
     (kill -> the broker's /brokers/ids znode gone, seen by a ZooKeeper watch as
     the controller sees it: the session timeout) and gone -> first ack (the
     election, LeaderAndIsr, the new leader's followers, the client's metadata
     refresh and retry; target: median <= 1 s), of which gone -> elected is the
     controller's part (the new leader epoch in the state znode).
  2. --rounds times: SIGTERM the leader: its controlled shutdown moves the
     leadership before it exits. Window as above, from the last ack before the
     signal to the first after the leader change (target: median <= 500 ms).

After every round the broker is started again; the next round waits for the
full ISR, then --settle-ms more: the producer's connection to the restarted
broker is in gRPC's reconnect backoff (reconnect.backoff.max.ms = 1000 ms, plus
jitter) for up to ~1.2 s after it is back, and a leader elected on it sooner
adds that wait to the window (--settle-ms 0 shows it: a rolling restart that
moves leadership onto a broker that came back a moment ago pays it).
The cluster is torn down, and the data dir removed, however it ends.
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from client import Admin, NewTopic, Producer
from client.future import FutureRecordMetadata
from local_cluster.cluster import LocalCluster, scratch_cluster
from proto.types import TopicPartition
from zk import paths
from zk.client import KafkaZkClient
from zk.paths import NO_LEADER, LeaderIsrAndControllerEpoch

TOPIC = TopicPartition("failover-bench", 0)
ELECTION_TARGET_S = 1.0
CONTROLLED_SHUTDOWN_TARGET_S = 0.5
_ROUND_TIMEOUT_S = 120.0


@dataclass
class Load:
    """Acknowledgement times of a steady acks=all load: at most `in_flight` records outstanding."""

    producer: Producer
    in_flight: threading.BoundedSemaphore = field(default_factory=lambda: threading.BoundedSemaphore(20))
    acks: list[float] = field(default_factory=list)
    failures: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            if self.in_flight.acquire(timeout=0.1):
                self.producer.send(TOPIC.topic, f"r{i:09d}".encode(), partition=TOPIC.partition,
                                   callback=self._done)
                i += 1

    def _done(self, future: FutureRecordMetadata) -> None:
        now = time.monotonic()
        with self.lock:
            if future.exception(0) is None:
                self.acks.append(now)
            else:
                self.failures += 1
        self.in_flight.release()

    def window(self, start: float, changed: float) -> tuple[float, float]:
        """(longest gap between acknowledgements from the last one before `start` to the first after `changed`,
        that first acknowledgement's time)."""
        with self.lock:
            acks = sorted(self.acks)
        before = [t for t in acks if t <= start][-1:]
        after = [t for t in acks if t > changed][:1]
        around = before + [t for t in acks if start < t <= changed] + after
        return max(b - a for a, b in itertools.pairwise(around)), after[0]


class ClusterView:
    """The partition's state znode and the registered broker ids, each with the time a watch saw it change."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self._zk = zk
        self._changed = threading.Condition()
        self.state: LeaderIsrAndControllerEpoch | None = None
        self.state_at = 0.0
        self.brokers: set[int] = set()
        self.brokers_at = 0.0
        zk.watch_data(paths.partition_state_path(TOPIC), self._on_state)
        zk.watch_broker_ids(self._on_brokers)

    def _on_state(self, data: bytes | None, stat: object) -> None:
        now = time.monotonic()
        with self._changed:
            if data is not None:
                self.state = paths.decode_partition_state(TOPIC, data, getattr(stat, "version", 0))
                self.state_at = now
            self._changed.notify_all()

    def _on_brokers(self, ids: set[int]) -> None:
        now = time.monotonic()
        with self._changed:
            self.brokers, self.brokers_at = ids, now
            self._changed.notify_all()

    def wait(self, condition: Callable[[], bool], what: str) -> None:
        with self._changed:
            if not self._changed.wait_for(condition, timeout=_ROUND_TIMEOUT_S):
                raise TimeoutError(f"timed out after {_ROUND_TIMEOUT_S:.0f}s waiting for {what}")

    def leader(self) -> LeaderIsrAndControllerEpoch:
        with self._changed:
            assert self.state is not None
            return self.state


def wait_for_acks(load: Load, after: float, what: str) -> None:
    deadline = time.monotonic() + _ROUND_TIMEOUT_S
    while not any(t > after for t in load.acks[-50:]):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.01)


def kill_round(cluster: LocalCluster, view: ClusterView, load: Load) -> tuple[float, float, float, float]:
    """(window, detection, gone -> first ack, gone -> elected) of one SIGKILL of the leader."""
    old = view.leader()
    pid = cluster.load().broker(old.leader).pid
    assert pid is not None
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    view.wait(lambda: old.leader not in view.brokers, f"broker {old.leader}'s registration to go")
    gone_at = view.brokers_at
    view.wait(lambda: view.state is not None and view.state.leader_epoch > old.leader_epoch
              and view.state.leader not in (old.leader, NO_LEADER), "a new leader")
    elected_at = view.state_at
    wait_for_acks(load, elected_at, "the first acknowledgement from the new leader")
    window, first_ack = load.window(killed_at, elected_at)
    return window, gone_at - killed_at, first_ack - gone_at, elected_at - gone_at


def controlled_shutdown_round(cluster: LocalCluster, view: ClusterView, load: Load) -> tuple[float, float]:
    """(window, SIGTERM -> its registration gone) of one controlled shutdown of the leader."""
    old = view.leader()
    pid = cluster.load().broker(old.leader).pid
    assert pid is not None
    signalled_at = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    view.wait(lambda: view.state is not None and view.state.leader not in (old.leader, NO_LEADER),
              "leadership to move")
    moved_at = view.state_at
    wait_for_acks(load, moved_at, "the first acknowledgement from the new leader")
    window, _ = load.window(signalled_at, moved_at)
    view.wait(lambda: old.leader not in view.brokers, f"broker {old.leader} to exit")
    return window, view.brokers_at - signalled_at


def restore(cluster: LocalCluster, view: ClusterView, broker_id: int, settle_s: float) -> None:
    cluster.restart_broker(broker_id)
    view.wait(lambda: view.state is not None and len(view.state.isr) == 3, "the full ISR")
    time.sleep(settle_s)


def summary(label: str, values: Sequence[float], target: float | None = None) -> str:
    median = statistics.median(values)
    line = (f"  {label:<34} min {min(values) * 1000:6.0f} ms   median {median * 1000:6.0f} ms   "
            f"max {max(values) * 1000:6.0f} ms")
    if target is not None:
        line += f"   target median <= {target * 1000:.0f} ms: {'met' if median <= target else 'MISSED'}"
    return line


def bench(cluster: LocalCluster, zk: KafkaZkClient, bootstrap: str, rounds: int, session_timeout_ms: int,
          settle_ms: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC.topic, 1, 3, topic_configs={"min.insync.replicas": "2"})])
    view = ClusterView(zk)
    view.wait(lambda: view.state is not None and len(view.state.isr) == 3, "the new partition's full ISR")
    producer = Producer(bootstrap, acks="all", enable_idempotence=True, linger_ms=1)
    load = Load(producer)
    sender = threading.Thread(target=load.run, name="acks-all-load", daemon=True)
    sender.start()
    kills: list[tuple[float, float, float, float]] = []
    shutdowns: list[tuple[float, float]] = []
    try:
        wait_for_acks(load, time.monotonic(), "the load to start")
        for n in range(rounds):
            leader = view.leader().leader
            kills.append(kill_round(cluster, view, load))
            window, detection, to_ack, to_elected = kills[-1]
            print(f"kill {n + 1}: leader {leader}: window {window * 1000:.0f} ms = detection {detection * 1000:.0f}"
                  f" ms + gone -> first ack {to_ack * 1000:.0f} ms (gone -> elected {to_elected * 1000:.0f} ms)",
                  flush=True)
            restore(cluster, view, leader, settle_ms / 1000)
        for n in range(rounds):
            leader = view.leader().leader
            shutdowns.append(controlled_shutdown_round(cluster, view, load))
            window, exited = shutdowns[-1]
            print(f"controlled shutdown {n + 1}: leader {leader}: window {window * 1000:.0f} ms, deregistered after "
                  f"{exited * 1000:.0f} ms", flush=True)
            restore(cluster, view, leader, settle_ms / 1000)
    finally:
        load.stop.set()
        sender.join(30)
        producer.close(timeout=30)
    print(f"\n{rounds} rounds each, zookeeper.session.timeout.ms={session_timeout_ms} (brokers and controller), "
          f"rounds {settle_ms} ms after the full ISR, {len(load.acks)} records acknowledged, {load.failures} failed")
    print("SIGKILL of the leader:")
    print(summary("unavailability window", [k[0] for k in kills]))
    print(summary("detection (kill -> znode gone)", [k[1] for k in kills]))
    print(summary("gone -> first ack", [k[2] for k in kills], ELECTION_TARGET_S))
    print(summary("  of which gone -> elected", [k[3] for k in kills]))
    print("SIGTERM of the leader (controlled shutdown):")
    print(summary("unavailability window", [s[0] for s in shutdowns], CONTROLLED_SHUTDOWN_TARGET_S))
    print(summary("SIGTERM -> registration gone", [s[1] for s in shutdowns]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="kills, then controlled shutdowns, this many each")
    parser.add_argument("--session-timeout-ms", type=int, default=6000, help="zookeeper.session.timeout.ms")
    parser.add_argument("--settle-ms", type=int, default=1500,
                        help="wait after the full ISR before the next round (see above)")
    args = parser.parse_args(argv)
    session_timeout = f"zookeeper.session.timeout.ms={args.session_timeout_ms}"
    with scratch_cluster("minibroker-failover-bench-", brokers=3, controllers=1, overrides=[session_timeout],
                         report=lambda line: print(line, flush=True)) as (cluster, info), \
            KafkaZkClient.connect(info.zookeeper.connect) as zk:
        bench(cluster, zk, info.bootstrap_servers, args.rounds, args.session_timeout_ms, args.settle_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())

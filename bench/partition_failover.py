"""A partitioned leader against a killed one, on a `cluster up --netns` cluster (root only).

    .venv/bin/python bench/partition_failover.py [--session-timeout-ms 6000] [--rounds 2]

Brings up three brokers and a controller, each broker in its own network namespace, and an RF=3,
min.insync.replicas=2 topic of one partition. Then, --rounds times each, alternating:

  kill       SIGKILL the partition's leader (the baseline: Kafka's classic failure), then start it again;
  partition  cut the leader off from its peers, the controllers and ZooKeeper, clients kept (chaos/netns.py),
             while a producer that only knows the old leader keeps sending acks=all; then heal.

and prints, per fault, how long until ZooKeeper names a new leader and how long from the restart / heal until
the ISR is whole again, and how many acks=all writes the isolated leader acknowledged (must be 0). Both
failovers wait out zookeeper.session.timeout.ms: the partition should cost no more than the kill.
`cluster up --netns` against a plain `cluster up` of the same size is measured first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from chaos import netns  # noqa: E402
from client import Admin, NewTopic, Producer  # noqa: E402
from local_cluster.cluster import LocalCluster  # noqa: E402
from proto.types import TopicPartition  # noqa: E402
from zk.client import KafkaZkClient  # noqa: E402

TOPIC = "failover"
TP = TopicPartition(TOPIC, 0)
DEADLINE_S = 120.0


def wait(condition: Callable[[], bool], what: str) -> float:
    """Seconds until `condition` holds."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > DEADLINE_S:
            raise SystemExit(f"gave up after {DEADLINE_S:g} s waiting for {what}")
        time.sleep(0.02)
    return time.monotonic() - start


def up_time(netns_on: bool, base: Path) -> float:
    cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="up-", dir=base)))
    start = time.monotonic()
    cluster.up(brokers=3, controllers=1, netns=netns_on)
    elapsed = time.monotonic() - start
    cluster.down(kill=True)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="partition-bench-"))
    plain, with_netns = up_time(False, base), up_time(True, base)
    print(f"cluster up, 3 brokers + 1 controller: plain {plain:.2f} s, --netns {with_netns:.2f} s")

    data_dir = base / "cluster"
    cluster = LocalCluster(data_dir)
    info = cluster.up(brokers=3, controllers=1, netns=True, overrides=[
        f"zookeeper.session.timeout.ms={args.session_timeout_ms}", "min.insync.replicas=2",
        "replica.lag.time.max.ms=3000", "replica.socket.timeout.ms=3000"])
    zk = KafkaZkClient.connect(info.zookeeper.connect)
    results: dict[str, list[tuple[float, float]]] = {"kill": [], "partition": []}
    false_acks = 0
    try:
        Admin(bootstrap_servers=info.bootstrap_servers).create_topics([NewTopic(TOPIC, 1, 3)], timeout_ms=30_000)

        def state() -> tuple[int, int, tuple[int, ...]]:
            s = zk.get_partition_state(TP)
            return (-1, -1, ()) if s is None else (s.leader, s.leader_epoch, s.isr)

        def full_isr() -> bool:
            return len(state()[2]) == 3

        wait(full_isr, "the topic's ISR")
        for _ in range(args.rounds):
            for fault in ("kill", "partition"):
                leader, epoch, _ = state()

                def moved() -> bool:
                    new_leader, new_epoch, _ = state()
                    return new_leader not in (leader, -1) and new_epoch > epoch  # noqa: B023 (called at once)

                if fault == "kill":
                    os.kill(cluster.load().broker(leader).pid or -1, signal.SIGKILL)
                    elected = wait(moved, "a new leader")
                    start = time.monotonic()
                    cluster.restart_broker(leader)
                else:
                    netns.isolate(data_dir, leader, keep_clients=True)
                    acked: list[object] = []
                    stop = threading.Event()
                    stranded = threading.Thread(target=_send_until, args=(info.broker(leader).address, stop, acked))
                    stranded.start()
                    elected = wait(moved, "a new leader")
                    stop.set()
                    stranded.join()
                    false_acks += len(acked)
                    start = time.monotonic()
                    netns.heal(data_dir)
                wait(full_isr, "a whole ISR")
                results[fault].append((elected, time.monotonic() - start))
    finally:
        zk.close()
        cluster.down(kill=True)
        shutil.rmtree(base, ignore_errors=True)

    print(f"zookeeper.session.timeout.ms={args.session_timeout_ms}, {args.rounds} round(s) each (median):")
    for fault, label in (("kill", "leader SIGKILLed (baseline)"), ("partition", "leader partitioned")):
        elected = statistics.median(e for e, _ in results[fault])
        rejoined = statistics.median(r for _, r in results[fault])
        then = "restart" if fault == "kill" else "heal"
        print(f"  {label:<28} new leader after {elected:5.2f} s; {then} -> whole ISR after {rejoined:5.2f} s")
    print(f"  acks=all writes acknowledged by an isolated leader: {false_acks} (must be 0)")
    if false_acks:
        raise SystemExit(1)


def _send_until(address: str, stop: threading.Event, acked: list[object]) -> None:
    """A producer that only knows the isolated leader: whatever it gets acknowledged is a false ack."""
    with Producer(bootstrap_servers=address, acks="all", request_timeout_ms=2000, delivery_timeout_ms=2000,
                  max_block_ms=2000) as producer:
        while not stop.is_set():
            if producer.send(TOPIC, b"stranded", partition=0).exception(timeout=30) is None:
                acked.append(True)


if __name__ == "__main__":
    main()

"""Rebalance time of a new consumer group: from subscribe to each member's first record, for 1, 2 and 4 members.

    .venv/bin/python bench/group_rebalance.py [--members 1,2,4] [--rounds 3] [--initial-delay-ms 3000]

Brings a real cluster up in a temporary data dir (ZooKeeper, one controller, three brokers, through
minibroker.local.cluster) with group.initial.rebalance.delay.ms as given (Kafka's default 3000), creates an
8-partition RF=3 topic holding 800 records, then per round and per member count starts that many
confluent-kafka group consumers at once, each in its own thread, in a new group, and times each one from
subscribe() to its first record. It prints the fastest and slowest member's time per run (the slowest is the
group's rebalance time: every member has its partitions and has read). The first FindCoordinator of the run
creates __consumer_offsets; that is done once before timing. The cluster is torn down, and its data dir
removed, however it ends.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

if not __package__:  # run as a script: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from minibroker.local.cluster import scratch_cluster

TOPIC = "rebalance-bench"
PARTITIONS = 8
RECORDS = 800


def first_record_seconds(bootstrap: str, group: str, members: int) -> list[float]:
    """Start `members` consumers of `group` together; each one's seconds from subscribe to its first record."""
    times: list[float] = [float("nan")] * members
    start = threading.Barrier(members)

    def member(i: int) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        try:
            start.wait()
            began = time.monotonic()
            consumer.subscribe([TOPIC])
            deadline = began + 120
            while time.monotonic() < deadline:
                message = consumer.poll(0.05)
                if message is not None and message.error() is None:
                    times[i] = time.monotonic() - began
                    break
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--members", default="1,2,4", help="member counts to time (default 1,2,4)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per member count (default 3)")
    parser.add_argument("--initial-delay-ms", type=int, default=3000,
                        help="group.initial.rebalance.delay.ms (default Kafka's 3000)")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.members.split(",")]
    with scratch_cluster("minibroker-rebalance-", brokers=3, controllers=1,
                         overrides=[f"group.initial.rebalance.delay.ms={args.initial_delay_ms}"],
                         report=lambda line: print(line, flush=True)) as (_cluster, info):
        bootstrap = info.kafka_bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(timeout=60)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(RECORDS):
            producer.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS)
        if producer.flush(60):
            print("records not acknowledged: no bench", file=sys.stderr)
            return 1
        first_record_seconds(bootstrap, "warm-up", 1)  # creates __consumer_offsets, off the clock
        print(f"group.initial.rebalance.delay.ms={args.initial_delay_ms}, {PARTITIONS} partitions, confluent-kafka"
              f" consumers; seconds from subscribe() to the first record", flush=True)
        print(f"{'members':>7} {'round':>5} {'fastest':>8} {'slowest':>8}", flush=True)
        slowest: dict[int, list[float]] = {n: [] for n in counts}
        for round_ in range(1, args.rounds + 1):
            for n in counts:
                times = first_record_seconds(bootstrap, f"bench-{n}-{round_}", n)
                slowest[n].append(max(times))
                print(f"{n:>7} {round_:>5} {min(times):>8.2f} {max(times):>8.2f}", flush=True)
        for n in counts:
            print(f"{n} member(s): median rebalance (slowest member) {statistics.median(slowest[n]):.2f} s",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Consumer-group rebalance times: join to first record, and scaling a group out and in, for 1, 2 and 4 members.

    .venv/bin/python bench/group_rebalance.py [--members 1,2,4] [--rounds 3] [--partitions 8]
        [--heartbeat-interval-ms 1000] [--initial-delay-ms 3000] [--clients confluent-kafka,minibroker]

Brings up three brokers and a controller (local_cluster's scratch_cluster) and a topic of --partitions
partitions, RF 3, filled with records; one group joins first (the first FindCoordinator creates
__consumer_offsets). Members are confluent-kafka (librdkafka) group consumers on the Kafka listeners and the
project's own (client.Consumer with a group_id, on the gRPC listeners), each polling in a thread of its own,
committing nothing (so a partition's new owner starts from the beginning and has a record at once). Per round
and per group size N, with a fresh group:

  join -> first record   N members subscribe together; until every one of them has its first record (with
                         Kafka's group.initial.rebalance.delay.ms, a new group waits that long for more members)
  scale out N -> N+1     one more member subscribes; until every member got its new assignment
                         (on_assign / on_partitions_assigned) and the new member its first record
  scale in N+1 -> N      that member leaves (close(): LeaveGroup); until every remaining member got its new
                         assignment

The baseline, measured in the same run for each client, is a consumer without a group (assign()): the time to
a first record that no coordinator stands in front of. The other members learn of a rebalance on their next
heartbeat, so the rebalance times scale with heartbeat.interval.ms (printed).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer  # noqa: E402
from confluent_kafka import TopicPartition as CkTopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import client  # noqa: E402
from client.subscription import ConsumerRebalanceListener  # noqa: E402
from local_cluster.cluster import scratch_cluster  # noqa: E402
from local_cluster.cluster_file import ClusterInfo  # noqa: E402
from proto.types import TopicPartition  # noqa: E402

TOPIC = "rebalance"
DEADLINE_S = 120.0


class Member:
    """One group consumer polling in its own thread; remembers when it was assigned and first got a record."""

    def __init__(self) -> None:
        self.assigned: list[float] = []  # when each assignment came
        self.first_record: float | None = None
        self._stop = threading.Event()
        self.subscribed = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_assign(self) -> None:
        self.assigned.append(time.monotonic())

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._poll() and self.first_record is None:
                self.first_record = time.monotonic()

    def _poll(self) -> bool:
        """Poll once; True when a record came."""
        raise NotImplementedError

    def _leave(self) -> None:
        raise NotImplementedError

    def close(self) -> float:
        """Leave the group; returns when the leave began."""
        self._stop.set()
        self._thread.join()
        left = time.monotonic()
        self._leave()
        return left


class ConfluentMember(Member):
    """librdkafka on the Kafka listeners."""

    def __init__(self, cluster: ClusterInfo, group: str, name: str, heartbeat_ms: int) -> None:
        super().__init__()
        self._consumer = Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": group,
                                   "client.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                   "session.timeout.ms": 10_000, "heartbeat.interval.ms": heartbeat_ms,
                                   "fetch.wait.max.ms": 100})
        self._consumer.subscribe([TOPIC], on_assign=lambda _c, _p: self._on_assign())
        self._thread.start()

    def _poll(self) -> bool:
        return any(m.error() is None for m in self._consumer.consume(500, 0.05))

    def _leave(self) -> None:
        self._consumer.close()


class MinibrokerMember(Member, ConsumerRebalanceListener):
    """The project's client on the gRPC listeners."""

    def __init__(self, cluster: ClusterInfo, group: str, name: str, heartbeat_ms: int) -> None:
        Member.__init__(self)
        self._consumer = client.Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group, client_id=name,
                                         enable_auto_commit=False, auto_offset_reset="earliest",
                                         session_timeout_ms=10_000, heartbeat_interval_ms=heartbeat_ms,
                                         fetch_max_wait_ms=100)
        self._consumer.subscribe([TOPIC], listener=self)
        self._thread.start()

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._on_assign()

    def _poll(self) -> bool:
        return bool(self._consumer.poll(timeout_ms=50))

    def _leave(self) -> None:
        self._consumer.close(autocommit=False)


MEMBERS: dict[str, Callable[[ClusterInfo, str, str, int], Member]] = {
    "confluent-kafka": ConfluentMember, "minibroker": MinibrokerMember}


def wait(condition: Callable[[], bool], what: str) -> float:
    """The time `condition()` first held."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up after {DEADLINE_S:g} s waiting for {what}")
        time.sleep(0.005)
    return time.monotonic()


def confluent_baseline(cluster: ClusterInfo, partitions: int) -> float:
    consumer = Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": "unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    start = time.monotonic()
    consumer.assign([CkTopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
    wait(lambda: any(m.error() is None for m in consumer.consume(500, 0.05)), "the baseline's first record")
    elapsed = time.monotonic() - start
    consumer.close()
    return elapsed


def minibroker_baseline(cluster: ClusterInfo, partitions: int) -> float:
    start = time.monotonic()
    consumer = client.Consumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False,
                               fetch_max_wait_ms=100)
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    wait(lambda: bool(consumer.poll(timeout_ms=50)), "the baseline's first record")
    elapsed = time.monotonic() - start
    consumer.close()
    return elapsed


# A consumer without a group: assign() every partition from the beginning, until the first record.
BASELINES: dict[str, Callable[[ClusterInfo, int], float]] = {
    "confluent-kafka": confluent_baseline, "minibroker": minibroker_baseline}


def one_round(kind: str, cluster: ClusterInfo, size: int, round_no: int, heartbeat_ms: int
              ) -> tuple[float, float, float]:
    group = f"bench-{kind}-{size}-{round_no}"
    new_member = MEMBERS[kind]
    members = [new_member(cluster, group, f"m{i}", heartbeat_ms) for i in range(size)]
    try:
        start = min(m.subscribed for m in members)
        joined = wait(lambda: all(m.first_record is not None for m in members), "every member's first record")
        # Scale out: the members already in the group are assigned again, the new one reads.
        counts = [len(m.assigned) for m in members]
        extra = new_member(cluster, group, f"m{size}", heartbeat_ms)
        members.append(extra)
        out_done = wait(lambda: all(len(m.assigned) > c for m, c in zip(members, counts, strict=False))
                        and extra.first_record is not None, "the scale-out rebalance")
        # Scale in: the new member leaves.
        counts = [len(m.assigned) for m in members[:-1]]
        left = members.pop().close()
        in_done = wait(lambda: all(len(m.assigned) > c for m, c in zip(members, counts, strict=False)),
                       "the scale-in rebalance")
        return joined - start, out_done - extra.subscribed, in_done - left
    finally:
        for member in members:
            member.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=lambda text: [int(n) for n in text.split(",")], default=[1, 2, 4],
                        help="group sizes, comma-separated (default 1,2,4)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=lambda text: text.split(","), default=list(MEMBERS),
                        help=f"comma-separated, from {', '.join(MEMBERS)} (default both)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=1000)
    parser.add_argument("--initial-delay-ms", type=int, default=3000,
                        help="the brokers' group.initial.rebalance.delay.ms (default Kafka's, 3000)")
    args = parser.parse_args()
    rows = {}
    baselines = {}
    with scratch_cluster("group-bench-", brokers=3, controllers=1, overrides=[
            f"group.initial.rebalance.delay.ms={args.initial_delay_ms}", "replica.fetch.wait.max.ms=100"]) as (_, info):
        bootstrap = info.kafka_bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer
        admin.create_topics([NewTopic(TOPIC, args.partitions, 3)], operation_timeout=30)[TOPIC].result(timeout=60)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(args.partitions * 500):
            producer.produce(TOPIC, b"x" * 100, partition=i % args.partitions)
        producer.flush(60)
        # The first FindCoordinator creates __consumer_offsets: once, before anything is timed.
        warm_up = ConfluentMember(info, "bench-warm-up", "warm-up", args.heartbeat_interval_ms)
        wait(lambda: warm_up.first_record is not None, "the warm-up member's first record")
        warm_up.close()
        for kind in args.clients:
            BASELINES[kind](info, args.partitions)  # warm-up: the first connections of this process
            baselines[kind] = statistics.median(BASELINES[kind](info, args.partitions) for _ in range(args.rounds))
            for size in args.members:
                results = [one_round(kind, info, size, r, args.heartbeat_interval_ms) for r in range(args.rounds)]
                rows[(kind, size)] = [statistics.median(column) for column in zip(*results, strict=True)]

    print(f"group consumers, topic of {args.partitions} partitions (RF 3), heartbeat.interval.ms"
          f" {args.heartbeat_interval_ms}, group.initial.rebalance.delay.ms {args.initial_delay_ms};"
          f" median of {args.rounds} round(s)")
    for kind, base_s in baselines.items():
        print(f"baseline: a {kind} consumer without a group (assign) has its first record after"
              f" {base_s * 1000:.0f} ms")
    print(f"{'client':<16} {'members':>7}  {'join -> first record':>21}  {'scale out N -> N+1':>19}"
          f"  {'scale in N+1 -> N':>18}")
    for (kind, size), (join, out, back) in rows.items():
        print(f"{kind:<16} {size:>7}  {join * 1000:>18.0f} ms  {out * 1000:>16.0f} ms  {back * 1000:>15.0f} ms")


if __name__ == "__main__":
    main()

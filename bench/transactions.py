"""What transactions cost, in one run: confluent-kafka's transactional producer against its idempotent
producer on the same kind of topic, and read_committed against read_uncommitted consumption.

    .venv/bin/python bench/transactions.py [--records 100000] [--size 512] [--partitions 6]

Brings up a local cluster (3 brokers, 1 controller, as `minibroker cluster up` does) and, on RF=3,
min.insync.replicas=2 topics through the Kafka listener:
- produces `--records` records with the idempotent producer (acks=all), the baseline;
- produces them again transactionally, committing every 100, 1,000 and 10,000 records (a topic each), timing
  every commit_transaction (EndTxn until the coordinator has written PrepareCommit, as Kafka answers it);
- consumes the 1,000-per-transaction topic with isolation.level read_uncommitted and then read_committed;
and prints issue 25's ratios beside their goals: at 1,000 records per transaction at least 70% of the
idempotent producer's records/s, and read_committed consume within 10% of read_uncommitted.
The cluster and its temporary data dir are removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from bench.kafka_vs_grpc import FirstRecord, create, kafka_consume, produce_waiting  # noqa: E402
from local_cluster.cluster import LocalCluster  # noqa: E402

TRANSACTION_SIZES = (100, 1_000, 10_000)
MB = 1 << 20


def produce(bootstrap: str, topic: str, n: int, value: bytes, per_transaction: int | None
            ) -> tuple[float, list[float]]:
    """Records/s of producing `n` records (transactions of `per_transaction`, or idempotent without), and the
    latency of each commit_transaction in ms."""
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                 "linger.ms": 5}
    if per_transaction is not None:
        config["transactional.id"] = f"bench-{topic}"
    producer = Producer(config)
    commits: list[float] = []
    # Both producers start warm, so the ratio compares steady states: the topic's metadata and the producer id
    # (InitProducerId: init_transactions, or the idempotent producer's own at its first record) before the clock.
    if per_transaction is not None:
        producer.init_transactions(60)
        producer.list_topics(topic, timeout=60)
    else:
        produce_waiting(producer, topic, value)
        assert producer.flush(60) == 0
    started = time.perf_counter()
    sent = 0
    while sent < n:
        batch = n - sent if per_transaction is None else min(per_transaction, n - sent)
        if per_transaction is not None:
            producer.begin_transaction()
        for _ in range(batch):
            produce_waiting(producer, topic, value)
        sent += batch
        if per_transaction is not None:
            began = time.perf_counter()
            producer.commit_transaction(60)
            commits.append((time.perf_counter() - began) * 1000)
    if per_transaction is None:
        assert producer.flush(300) == 0
    return n / (time.perf_counter() - started), commits


def consume(bootstrap: str, topic: str, partitions: int, n: int, isolation: str) -> float:
    """Records/s reading `n` records of `topic` from its start with `isolation`."""
    work, close = kafka_consume(bootstrap, topic, partitions, n, FirstRecord(), {"isolation.level": isolation})
    started = time.perf_counter()
    got = work()
    elapsed = time.perf_counter() - started
    close()
    if got < n:
        raise SystemExit(f"{isolation} read {got} of {n} records of {topic}")
    return got / elapsed


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--partitions", type=int, default=6)
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="minibroker-transactions-bench-"))
    cluster = LocalCluster(data_dir)
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (on {os.cpu_count()} CPUs)")
    try:
        info = cluster.up(brokers=3, controllers=1)
        bootstrap = info.kafka_bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        value = os.urandom(args.size)
        n = args.records
        print(f"{n:,} records of {args.size} B on {args.partitions} partitions, RF=3, acks=all")
        create(admin, "idempotent", args.partitions)
        baseline, _ = produce(bootstrap, "idempotent", n, value, None)
        print(f"{'produce, idempotent':40} {baseline:>11,.0f} records/s {baseline * args.size / MB:>7.1f} MB/s")
        rates: dict[int, float] = {}
        for per in TRANSACTION_SIZES:
            topic = f"txn-{per}"
            create(admin, topic, args.partitions)
            rate, commits = produce(bootstrap, topic, n, value, per)
            rates[per] = rate
            print(f"{f'produce, transactions of {per:,}':40} {rate:>11,.0f} records/s {rate * args.size / MB:>7.1f}"
                  f" MB/s  {rate / baseline:.2f} of idempotent; commit p50 {percentile(commits, 50):.1f} ms,"
                  f" p99 {percentile(commits, 99):.1f} ms ({len(commits)} commits)")
        uncommitted = consume(bootstrap, "txn-1000", args.partitions, n, "read_uncommitted")
        committed = consume(bootstrap, "txn-1000", args.partitions, n, "read_committed")
        print(f"{'consume txn-1000, read_uncommitted':40} {uncommitted:>11,.0f} records/s")
        print(f"{'consume txn-1000, read_committed':40} {committed:>11,.0f} records/s")
        ratio = rates[1_000] / baseline
        print(f"goal: transactions of 1,000 at >= 0.70 of the idempotent producer: {ratio:.2f} ({_met(ratio >= 0.7)})")
        read_ratio = committed / uncommitted
        print(f"goal: read_committed within 10% of read_uncommitted: {read_ratio:.2f}"
              f" ({_met(read_ratio >= 0.9)})")
    finally:
        cluster.down()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

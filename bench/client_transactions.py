"""What a transaction costs the project's producer over gRPC: records/s of the transactional Producer committing
every N records, against the idempotent Producer alone on the same one-broker cluster (baseline).

    .venv/bin/python bench/client_transactions.py [--records 20000] [--record-size 100] [--every 10000 1000 100]

Brings up ZooKeeper, one controller and one broker in a temporary data dir (local_cluster.cluster, as
`minibroker cluster up` does; a one-broker cluster's __transaction_state has replication factor 1), sends
`--records` records to a fresh one-partition topic per run and prints records/s and commits/s. A commit costs a
flush (the batch waits for acks=all), an EndTxn round trip and, per transaction, an AddPartitionsToTxn before
the first batch: fewer records per transaction pay it more often. The cluster is torn down however the run
ends.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from client import Admin, NewTopic, Producer  # noqa: E402
from local_cluster.cluster import LocalCluster  # noqa: E402


def run(bootstrap: str, topic: str, records: int, value: bytes, every: int | None) -> float:
    """Seconds to send `records` records (and commit every `every` of them; None: no transactions)."""
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    producer = Producer(bootstrap, linger_ms=5, transactional_id=None if every is None else f"bench-{topic}")
    try:
        if every is not None:
            producer.init_transactions()
        producer.partitions_for(topic)  # the topic's metadata, outside the timing
        began = time.perf_counter()
        for start in range(0, records, every or records):
            if every is not None:
                producer.begin_transaction()
            for _ in range(min(every or records, records - start)):
                producer.send(topic, value, partition=0)
            if every is not None:
                producer.commit_transaction()
        producer.flush()
        return time.perf_counter() - began
    finally:
        producer.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--every", type=int, nargs="+", default=[10000, 1000, 100])
    args = parser.parse_args(argv)
    data_dir = Path(tempfile.mkdtemp(prefix="minibroker-txn-bench-"))
    cluster = LocalCluster(data_dir)
    value = b"x" * args.record_size
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (on {os.cpu_count()} CPUs)")
    try:
        info = cluster.up(brokers=1, controllers=1)
        bootstrap = info.bootstrap_servers
        baseline = run(bootstrap, "idempotent", args.records, value, None)
        print(f"{'producer':<36}{'records/s':>12}{'commits/s':>12}{'vs idempotent':>15}")
        print(f"{'idempotent (no transactions)':<36}{args.records / baseline:>12.0f}{'-':>12}{'1.00':>15}")
        for every in args.every:
            seconds = run(bootstrap, f"txn-{every}", args.records, value, every)
            commits = -(-args.records // every)
            print(f"{f'transactional, commit every {every}':<36}{args.records / seconds:>12.0f}"
                  f"{commits / seconds:>12.1f}{baseline / seconds:>15.2f}")
    finally:
        cluster.down()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

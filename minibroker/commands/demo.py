"""`minibroker demo`: a 3-broker cluster at work, start to finish, with the commands to go on by hand.

Brings up (or reuses) a local cluster of 3 brokers and 2 controllers under
--data-dir, on Kafka's well-known ports where they are free (Kafka listeners
localhost:9092-9094, gRPC 9192-9194, ZooKeeper 2181, as docker-compose.yml
publishes them; it names each one taken and the port used instead), creates
the topic `demo`, produces and consumes records with the Python client,
describes the topic as kafka-topics.sh does, prints a few records with the
console consumer and the first batches of a partition's segment on disk with
dump-log, and leaves the cluster running.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

from broker.log.dump import dump_file
from client import Admin, Consumer, KafkaError, NewTopic, Producer, TopicPartition
from local_cluster.cluster import ClusterError, LocalCluster
from local_cluster.cluster_file import ClusterFileError
from minibroker import cli
from proto.errors import ErrorCode

TOPIC = "demo"
PARTITIONS = 3
REPLICATION_FACTOR = 3
_DUMP_LINES = 5


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("demo", help="run a 3-broker cluster, produce, consume, describe",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("data/demo"),
                        help="the cluster's directory (default ./data/demo); a cluster already running there is reused")
    parser.add_argument("--records", type=int, default=5000, help="how many records to produce and consume")
    parser.add_argument("--replication-factor", type=int, default=REPLICATION_FACTOR,
                        help=f"of the demo topic (default {REPLICATION_FACTOR})")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.data_dir)
    data_dir = cluster.data_dir
    try:
        bootstrap = _cluster(cluster)
        _create_topic(bootstrap, args.replication_factor)
        _produce_and_consume(bootstrap, args.records)
    except (ClusterError, ClusterFileError, KafkaError) as e:
        print(f"minibroker demo: {e}", file=sys.stderr)
        return 1
    _command("topics", "--data-dir", str(data_dir), "--describe", "--topic", TOPIC)
    _command("console-consumer", "--data-dir", str(data_dir), "--topic", TOPIC, "--partition", "0", "--offset",
             "earliest", "--max-messages", "3", "--property", "print.key=true", "--property", "print.offset=true")
    _dump_first_segment(cluster)
    prog = _prog()
    print(f"""
The cluster keeps running. Go on with:
  {prog} console-consumer --data-dir {data_dir} --topic {TOPIC} --from-beginning
  {prog} console-producer --data-dir {data_dir} --topic {TOPIC}
  {prog} perf produce --data-dir {data_dir} --topic perf --num-records 100000 --record-size 100 --throughput -1
  {prog} cluster status --data-dir {data_dir}
  {prog} console --data-dir {data_dir} --allow-faults   (watch replication live in a browser: docs/console.md)
  {prog} cluster down --data-dir {data_dir}
Kafka's own tools talk to the brokers' Kafka listeners:
  kcat -b {cluster.load().kafka_bootstrap_servers} -L""")
    return 0


def _prog() -> str:
    """The command as the user can type it: `make demo` runs .venv/bin/minibroker, which may not be on the PATH."""
    return sys.argv[0] if Path(sys.argv[0]).name == "minibroker" else "minibroker"


def _cluster(cluster: LocalCluster) -> str:
    """The bootstrap servers of the cluster in the data dir, started unless it already runs."""
    try:
        _, statuses = cluster.status()
    except ClusterFileError:
        statuses = []
    if statuses and all(s.healthy for s in statuses):
        print(f"Using the cluster already running from {cluster.data_dir}")
        return cluster.load().bootstrap_servers
    print(f"$ {_prog()} cluster up --data-dir {cluster.data_dir} --brokers 3 --controllers 2 --well-known-ports")
    started = time.monotonic()
    info = cluster.up(brokers=3, controllers=2, report=print, well_known_ports=True)
    print(f"Cluster ready in {time.monotonic() - started:.1f} s, bootstrap servers {info.bootstrap_servers}"
          f" (gRPC), {info.kafka_bootstrap_servers} (Kafka)")
    return info.bootstrap_servers


def _create_topic(bootstrap: str, replication_factor: int) -> None:
    with Admin(bootstrap) as admin:
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor)])
            print(f"\nCreated topic {TOPIC}: {PARTITIONS} partitions, replication factor {replication_factor}")
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            print(f"\nTopic {TOPIC} exists already: adding to it")


def _produce_and_consume(bootstrap: str, n_records: int) -> None:
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer = Consumer(bootstrap_servers=bootstrap, consumer_timeout_ms=30_000)
    try:
        # Where this run's records will start: earlier runs' records stay in the topic.
        start_offsets = consumer.end_offsets(tps)
        with Producer(bootstrap, acks="all", linger_ms=5) as producer:
            started = time.monotonic()
            futures = [producer.send(TOPIC, f"record {i}".encode(), key=f"key-{i % 10}".encode())
                       for i in range(n_records)]
            producer.flush()
            elapsed = time.monotonic() - started
        failed = [f for f in futures if f.failed()]
        if failed:
            raise KafkaError(f"{len(failed)} of {n_records} records failed, the first with: {failed[0].exception()}")
        print(f"Produced {n_records} records (acks=all, 10 keys) in {elapsed:.2f} s:"
              f" {n_records / elapsed:,.0f} records/s")

        consumer.assign(tps)
        for tp, offset in start_offsets.items():
            consumer.seek(tp, offset)
        started = time.monotonic()
        per_partition = dict.fromkeys(range(PARTITIONS), 0)
        for record in consumer:
            per_partition[record.partition] += 1
            if sum(per_partition.values()) == n_records:
                break
        elapsed = time.monotonic() - started
    finally:
        consumer.close()
    consumed = sum(per_partition.values())
    print(f"Consumed {consumed} records in {elapsed:.2f} s: {consumed / elapsed:,.0f} records/s; per partition "
          + ", ".join(f"{p}: {n}" for p, n in per_partition.items()))
    if consumed != n_records:
        raise KafkaError(f"consumed {consumed} of the {n_records} records produced")


def _command(*argv: str) -> None:
    print(f"\n$ {_prog()} {' '.join(argv)}", flush=True)
    cli.main(list(argv))
    sys.stdout.flush()


def _dump_first_segment(cluster: LocalCluster) -> None:
    """Partition 0's first segment on a replica's disk, as kafka-dump-log.sh prints it."""
    for broker in cluster.load().brokers:
        segment = Path(broker.log_dir) / f"{TOPIC}-0" / f"{0:020d}.log"
        if segment.exists() and segment.stat().st_size > 0:
            print(f"\n$ {_prog()} dump-log --files {segment}   (first lines)")
            for line in itertools.islice(dump_file(segment), _DUMP_LINES):
                print(line)
            return

"""The `minibroker` Spark source and sink against confluent-kafka alone, on the same topic, in one run.

Starts a one-broker cluster (local_cluster, as `minibroker cluster up`), or uses `--data-dir`'s, then:

- producer alone: confluent-kafka's idempotent Producer (acks=all) writes the records (the topic the reads
  use); the sink: `df.write.format("minibroker")` writes the same records, from a cached DataFrame, to
  another topic (each task an idempotent producer); and the sink's task code alone, in this process, on
  Arrow batches of the same records (what is left of df.write's time is Spark's); and a streaming copy of the
  topic (readStream -> writeStream, Trigger.AvailableNow) through the at-least-once sink against the same
  through the exactlyOnce sink (a transaction per task, the ledger read and written), each run twice;
- consumer alone: one confluent-kafka Consumer assigned every partition reads the topic to its end, touching
  each record's key, value, offset and timestamp; the source: `spark.read.format("minibroker")` into Spark's
  `noop` sink (every row built, nothing kept), and the same as a streaming query (Trigger.AvailableNow).

Spark runs local[N] (`--master`, default local[2]) in a session started before the clock (the JVM's start-up
is left out). Prints records/s for each and the ratio to the client alone.

    .venv/bin/python bench/spark_source.py [--records 1000000] [--record-size 100] [--partitions 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as a script: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from local_cluster.cluster import LocalCluster
from spark_jobs.audit import spark_session
from spark_jobs.kafka_options import SinkOptions
from spark_jobs.kafka_source import FORMAT
from spark_jobs.kafka_writer import produce_batches


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def produce_alone(bootstrap: str, topic: str, records: int, size: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    value = b"v" * size
    began = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=str(i % 1000).encode())
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return records / (time.perf_counter() - began)


def consume_alone(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "enable.partition.eof": True, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, at_end = 0, set[int]()
    began = time.perf_counter()
    while len(at_end) < partitions:
        for message in consumer.consume(10_000, timeout=1.0):
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_end.add(message.partition() or 0)
                continue
            message.key(), message.value(), message.offset(), message.timestamp()
            seen += 1
    elapsed = time.perf_counter() - began
    consumer.close()
    assert seen == records, (seen, records)
    return records / elapsed


def sink_writer_alone(bootstrap: str, topic: str, records: int, size: int) -> float:
    """The sink's task code (kafka_writer.produce_batches) on Arrow batches built here: its share of df.write."""
    keys = pa.array([str(i % 1000).encode() for i in range(records)], pa.binary())
    values = pa.array([b"v" * size] * records, pa.binary())
    table = pa.RecordBatch.from_arrays([keys, values], names=["key", "value"])
    batches = [table.slice(i, 10_000) for i in range(0, records, 10_000)]  # Spark's arrow.maxRecordsPerBatch
    began = time.perf_counter()
    produce_batches(SinkOptions({"bootstrap.servers": bootstrap}, topic), iter(batches))
    return records / (time.perf_counter() - began)


def stream_copy(spark: SparkSession, kafka: dict[str, str], source: str, topic: str, checkpoint: Path, records: int,
                exactly_once: bool) -> float:
    """records/s of a streaming query copying `source` to `topic` through the sink in the given mode."""
    began = time.perf_counter()
    query = spark.readStream.format(FORMAT).options(**kafka).option("subscribe", source) \
        .option("startingOffsets", "earliest").load().select("key", "value").writeStream.format(FORMAT) \
        .options(**kafka).option("topic", topic).option("exactlyOnce", str(exactly_once).lower()) \
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination()
    rate = records / (time.perf_counter() - began)
    assert sum(p["numInputRows"] for p in query.recentProgress) == records
    return rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--data-dir", type=Path, help="use the cluster already running from this data dir")
    args = parser.parse_args()

    own = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="minibroker-spark-bench-")) if own else args.data_dir
    cluster = LocalCluster(data_dir)
    suffix = str(os.getpid())
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (on {os.cpu_count()} CPUs)",
          flush=True)
    try:
        info = cluster.up(brokers=1, controllers=1) if own else cluster.load()
        bootstrap = info.kafka_bootstrap_servers
        source, sunk = f"spark-bench-{suffix}", f"spark-bench-sink-{suffix}"
        create_topic(bootstrap, source, args.partitions)
        create_topic(bootstrap, sunk, args.partitions)
        copies = {mode: f"spark-bench-copy-{mode}-{suffix}" for mode in ("alo", "eos")}
        for topic in copies.values():
            create_topic(bootstrap, topic, args.partitions)
        produced = produce_alone(bootstrap, source, args.records, args.record_size)
        consumed = consume_alone(bootstrap, source, args.partitions, args.records)

        with tempfile.TemporaryDirectory(prefix="minibroker-spark-bench-") as workdir:
            spark, _ = spark_session(args.master, Path(workdir), app_name="minibroker-spark-bench")
            kafka = {"kafka.bootstrap.servers": bootstrap}
            # A first small read warms the Python workers and the planning path up.
            spark.read.format(FORMAT).options(**kafka).option("subscribe", source) \
                .option("endingOffsets", json.dumps({source: {str(p): 1 for p in range(args.partitions)}})).load() \
                .count()

            began = time.perf_counter()
            spark.read.format(FORMAT).options(**kafka).option("subscribe", source).load() \
                .write.format("noop").mode("overwrite").save()
            batch_read = args.records / (time.perf_counter() - began)

            began = time.perf_counter()
            query = spark.readStream.format(FORMAT).options(**kafka).option("subscribe", source) \
                .option("startingOffsets", "earliest").load().writeStream.format("noop") \
                .option("checkpointLocation", str(Path(workdir) / "checkpoint")).trigger(availableNow=True).start()
            query.awaitTermination()
            stream_read = args.records / (time.perf_counter() - began)
            assert sum(p["numInputRows"] for p in query.recentProgress) == args.records

            rows = spark.read.format(FORMAT).options(**kafka).option("subscribe", source).load() \
                .select("key", "value").cache()
            assert rows.count() == args.records
            began = time.perf_counter()
            rows.write.format(FORMAT).options(**kafka).option("topic", sunk).mode("append").save()
            sink = args.records / (time.perf_counter() - began)
            # Each mode twice, alternating, the better run kept: the first streaming query pays a warm-up.
            best = {"alo": 0.0, "eos": 0.0}
            for run, mode in enumerate(["alo", "eos"] * 2):
                rate = stream_copy(spark, kafka, source, copies[mode], Path(workdir) / f"copy-{run}", args.records,
                                   mode == "eos")
                best[mode] = max(best[mode], rate)
            copy_alo, copy_eos = best["alo"], best["eos"]
            spark.stop()
        writer_alone = sink_writer_alone(bootstrap, sunk, args.records, args.record_size)

        print(f"\n{args.records:,} records of {args.record_size} bytes, {args.partitions} partitions,"
              f" Spark {args.master}")
        print(f"{'':42} {'records/s':>12} {'vs client':>10}")
        for name, rate, base in [("confluent-kafka Consumer alone", consumed, consumed),
                                 ("minibroker source, spark.read -> noop", batch_read, consumed),
                                 ("minibroker source, readStream -> noop", stream_read, consumed),
                                 ("confluent-kafka Producer alone", produced, produced),
                                 ("minibroker sink, df.write", sink, produced),
                                 ("its writer alone, no Spark (one task's code)", writer_alone, produced),
                                 ("streaming copy, at-least-once sink", copy_alo, produced),
                                 ("streaming copy, exactlyOnce sink", copy_eos, produced)]:
            print(f"{name:42} {rate:12,.0f} {rate / base:9.2f}x")
        return 0
    finally:
        if own:
            cluster.down(kill=True)


if __name__ == "__main__":
    sys.exit(main())

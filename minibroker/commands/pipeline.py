"""`minibroker pipeline`: the example Spark pipeline (spark_jobs/pipeline.py) on a topic of any Kafka cluster."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from minibroker.commands import extras
from minibroker.commands.client_options import (
    UsageError,
    add_cluster_options,
    bootstrap_servers,
    cluster_info,
    load_config_file,
)
from minibroker.commands.listener_probe import KAFKA


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "pipeline", help="a Spark Structured Streaming job: count a topic's records per key per window into another",
        description="Read --input with the `minibroker` Spark source, count its records per key per --window of"
                    " event time (the record timestamps), and write each window's count once the watermark has"
                    " passed it (--watermark-delay) to --output with the `minibroker` sink, at least once, or in"
                    " transactions with --exactly-once. Offsets"
                    " and the aggregation's state are checkpointed in --checkpoint: run again with the same"
                    " directory to go on where the pipeline stopped.")
    add_cluster_options(parser)
    parser.add_argument("--input", required=True, metavar="TOPIC", help="the topic to read")
    parser.add_argument("--output", required=True, metavar="TOPIC", help="the topic the counts go to")
    parser.add_argument("--checkpoint", required=True, type=Path, metavar="DIR", help="Spark's checkpoint directory")
    parser.add_argument("--window", default="10 seconds", help="the tumbling window (default: 10 seconds)")
    parser.add_argument("--watermark-delay", default="10 seconds",
                        help="how late a record may come and still count (default: 10 seconds)")
    parser.add_argument("--starting-offsets", default="earliest", metavar="earliest|latest|JSON",
                        help="where a new pipeline starts reading (default earliest); a checkpoint wins over it")
    parser.add_argument("--max-offsets-per-trigger", type=int, metavar="N", help="records per micro-batch at most")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--trigger-interval", default="5 seconds",
                      help="how often a micro-batch starts (default: 5 seconds); the pipeline runs until Ctrl-C")
    when.add_argument("--available-now", action="store_true",
                      help="read what the topic holds now, in as many micro-batches as needed, then stop")
    parser.add_argument("--exactly-once", action="store_true",
                        help="write each task's results in one Kafka transaction: a failed task's output is aborted"
                             " and read_committed readers see each window once (docs/spark.md)")
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not extras.require("minibroker pipeline", "audit", extras.AUDIT_MODULES):
        return 2
    try:
        if args.bootstrap_server or args.data_dir is None:
            servers = bootstrap_servers(args, listener=KAFKA)  # no address at all: Kafka's missing-argument line
        else:
            servers = cluster_info(args).kafka_bootstrap_servers
        if not servers:
            raise UsageError(f"the cluster of {args.data_dir} has no Kafka listener in its cluster.json")
        client = load_config_file(args.command_config) if args.command_config else {}
    except UsageError as exc:
        print(f"pipeline: {exc}", file=sys.stderr)
        return 1
    # Imported here: Spark is heavy, and every other command would pay for it.
    from spark_jobs.audit import spark_session
    from spark_jobs.pipeline import Pipeline, delivery, start

    pipeline = Pipeline(servers, args.input, args.output, str(args.checkpoint.resolve()), args.window,
                        args.watermark_delay, args.starting_offsets, args.max_offsets_per_trigger,
                        None if args.available_now else args.trigger_interval, client, args.exactly_once)
    with tempfile.TemporaryDirectory(prefix="minibroker-pipeline-") as workdir:
        spark, ours = spark_session(args.master, Path(workdir), app_name="minibroker-pipeline")
        try:
            query = start(spark, pipeline)
            print(f"pipeline: {args.input} -> {args.output}, counts per key per {args.window},"
                  f" {delivery(args.exactly_once)}, checkpoint {pipeline.checkpoint}", flush=True)
            try:
                query.awaitTermination()
            except KeyboardInterrupt:
                query.stop()
            if query.exception() is not None:
                print(f"pipeline: the query failed: {query.exception()}", file=sys.stderr)
                return 3
            batches = query.recentProgress
            print(f"pipeline: stopped after {len(batches)} micro-batches,"
                  f" {sum(p['numInputRows'] for p in batches)} records read", flush=True)
            return 0
        finally:
            if ours:
                spark.stop()

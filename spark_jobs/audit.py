"""The log audit as a Spark job: `minibroker audit ...` or `spark-submit spark_jobs/audit.py ...`.

    spark-submit --master spark://host:7077 spark_jobs/audit.py --log-dirs hdfs://nn/snap/b1,hdfs://nn/snap/b2

Executors parse the files (spark_jobs/log_source.py), the checks run per
partition after one shuffle that brings a partition's batch rows and replica
rows together (spark_jobs/checks.py), and only one summary row per partition
comes back to the driver. The code the executors need (broker/log, proto's
errors and types, spark_jobs) is shipped with addPyFile, so a cluster needs
only the third-party packages (pyarrow, crc32c, and lz4/zstandard for
`rows=records` on compressed batches).

Exit codes: 0 clean, 1 anomalies found, 2 usage error, 3 the job itself failed
(no verdict on the logs, no report written).
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as a script by spark-submit: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import os
import tempfile
import time
import zipfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

from local_cluster.cluster_file import ClusterFileError, ClusterInfo
from spark_jobs import checks
from spark_jobs.files import Location, exists
from spark_jobs.kafka_source import MinibrokerDataSource
from spark_jobs.log_source import FORMAT, MinibrokerLogDataSource, broker_id_of
from spark_jobs.options import EXIT_ANOMALIES, EXIT_CLEAN, EXIT_FAILED, EXIT_USAGE, UsageError, add_arguments
from spark_jobs.report import (
    SUMMARY_SCHEMA,
    PartitionSummary,
    format_table,
    from_row,
    report_json,
    summarize,
    summary_row,
    write_outputs,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

REPO_ROOT = Path(__file__).resolve().parents[1]
# What executors import: the log formats, the error types they raise, and this package.
SHIPPED = ("broker/__init__.py", "broker/log", "proto/__init__.py", "proto/errors.py", "proto/types.py", "spark_jobs")


def log_dirs_of(args: argparse.Namespace) -> list[str]:
    if args.data_dir is not None:
        try:
            info = ClusterInfo.load(args.data_dir)
        except ClusterFileError as exc:
            raise UsageError(str(exc)) from None
        dirs = [log_dir for broker in info.brokers for log_dir in broker.log_dir.split(",") if log_dir]
    else:
        dirs = [d.strip() for d in args.log_dirs.split(",") if d.strip()]
    if not dirs:
        raise UsageError("no log dirs to audit")
    missing = [d for d in dirs if not exists(Location(d))]
    if missing:
        raise UsageError(f"no such log dir: {', '.join(missing)}")
    if args.chunk_size < 1:
        raise UsageError(f"--chunk-size must be positive, got {args.chunk_size}")
    return dirs


def ship_code(spark: SparkSession, workdir: Path) -> None:
    """Zip the packages executors import and add them to the job, for clusters without minibroker installed."""
    archive = workdir / "minibroker-audit.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for entry in SHIPPED:
            path = REPO_ROOT / entry
            for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
                z.write(file, file.relative_to(REPO_ROOT).as_posix())
    spark.sparkContext.addPyFile(str(archive))


def audit_group(schema: pa.Schema, batches: pa.Table, replicas: pa.Table) -> pa.Table:
    """The cogroup function: one partition's batch rows and replica rows in, its summary row out."""
    import pyarrow as pa

    found = checks.replicas_of(batches.to_pylist(), replicas.to_pylist())
    summary = summarize(found, checks.audit_partition(found))
    return pa.Table.from_pylist([summary_row(summary)], schema=schema)


def run_audit(spark: SparkSession, log_dirs: Sequence[str], chunk_size: int = 8 << 20,
              compacted_topics: Sequence[str] = ()) -> list[PartitionSummary]:
    """The Spark job: every partition's summary and findings, log-dir findings in a row with topic None."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string

    spark.dataSource.register(MinibrokerLogDataSource)
    struct = _parse_datatype_string(SUMMARY_SCHEMA)
    assert isinstance(struct, StructType)
    arrow_schema = to_arrow_schema(struct)

    def read(rows: str) -> DataFrame:
        return (spark.read.format(FORMAT).option("paths", ",".join(log_dirs)).option("rows", rows)
                .option("chunkSize", str(chunk_size)).option("compactedTopics", ",".join(compacted_topics)).load())

    def per_partition(batches: pa.Table, replicas: pa.Table) -> pa.Table:
        return audit_group(arrow_schema, batches, replicas)

    keys = ("topic", "partition")
    grouped = read("batches").groupBy(*keys).cogroup(read("replicas").groupBy(*keys))
    rows = grouped.applyInArrow(per_partition, struct).collect()
    summaries = [from_row(row.asDict(recursive=True)) for row in rows]
    return sorted(summaries, key=lambda s: (s.topic is not None, s.topic or "", s.partition or 0))


def spark_session(master: str | None, workdir: Path, app_name: str = "minibroker-audit") -> tuple[SparkSession, bool]:
    """The session to run in (spark-submit's or a running one, else a new one) and whether we started it.

    The jobs' data sources are registered in it: `minibroker-log` (log dirs) and `minibroker` (topics).
    """
    from pyspark.sql import SparkSession

    # Python workers must be this interpreter (with this venv's packages), not whatever `python3` is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    existing = SparkSession.getActiveSession()
    if existing is not None:
        return existing, False
    # spark-submit starts the JVM first and hands the Python driver its gateway (and its --master).
    under_spark_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    builder = (SparkSession.builder.appName(app_name).config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false"))
    if master is not None:
        builder = builder.master(master)
    elif not under_spark_submit:
        builder = builder.master("local[*]")
    if (master or ("" if under_spark_submit else "local")).startswith("local"):
        # A few partitions' worth of metadata per shuffle: Spark's default of 200 tasks would dominate.
        builder = builder.config("spark.sql.shuffle.partitions", "4")
        # The JVM only moves Arrow batches here: its C2 compiler would burn more CPU than it ever saves.
        builder = builder.config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    ship_code(spark, workdir)
    spark.dataSource.register(MinibrokerLogDataSource)
    spark.dataSource.register(MinibrokerDataSource)
    return spark, True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="audit", description=__doc__.split("\n", 1)[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    try:
        log_dirs = log_dirs_of(args)
    except UsageError as exc:
        print(f"audit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="minibroker-audit-") as workdir:
        try:
            spark, ours = spark_session(args.master, Path(workdir))
        except Exception as exc:  # Spark's errors for a bad master URL are of no one class
            print(f"audit: cannot start Spark (--master {args.master}): {exc}", file=sys.stderr)
            return EXIT_USAGE
        try:
            compacted = [t.strip() for t in args.compacted_topics.split(",") if t.strip()]
            summaries = run_audit(spark, log_dirs, args.chunk_size, compacted)
        except Exception as exc:
            # Not a verdict on the logs: the job itself failed (lost executors, a filesystem it cannot reach).
            print(f"audit: the Spark job failed: {exc}", file=sys.stderr)
            return EXIT_FAILED
        finally:
            if ours:
                spark.stop()
    findings = [f for s in summaries for f in s.findings]
    print(format_table(summaries))
    if args.output:
        brokers = [broker_id_of(Location(d)) for d in log_dirs]
        write_outputs(Location(args.output), report_json(summaries, log_dirs, brokers, time.monotonic() - started),
                      findings)
    return EXIT_ANOMALIES if findings else EXIT_CLEAN


if __name__ == "__main__":
    sys.exit(main())

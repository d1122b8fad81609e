"""The audit's command line, shared by `minibroker audit` and `spark-submit spark_jobs/audit.py`.

Kept free of Spark and pyarrow imports: every `minibroker` command registers it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

EXIT_CLEAN, EXIT_ANOMALIES, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3


class UsageError(Exception):
    """Bad arguments: exit code 2 with the message."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--log-dirs", metavar="D1,D2,...",
                       help="comma-separated broker log dirs: local paths or URIs Spark's executors can read"
                            " (file://, hdfs://, s3a://, gs://)")
    where.add_argument("--data-dir", type=Path, metavar="DIR",
                       help="audit the log dirs of the local cluster whose cluster.json is in DIR")
    parser.add_argument("--output", metavar="OUT",
                        help="write OUT/report.json and OUT/anomalies.parquet (a local path or a URI)")
    parser.add_argument("--master", default=None,
                        help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument("--compacted-topics", default="", metavar="T1,T2,...",
                        help="topics with cleanup.policy=compact: their replicas are compared by the latest value"
                             " per key where cleaned, and gaps in their offsets are allowed (partitions a log"
                             " cleaner has cleaned, listed in cleaner-offset-checkpoint, are found without it)")
    parser.add_argument("--chunk-size", type=int, default=8 << 20, metavar="BYTES",
                        help="bytes of a segment read at a time (default 8 MiB)")

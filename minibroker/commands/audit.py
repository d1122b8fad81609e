"""`minibroker audit`: the Spark log audit (spark_jobs/audit.py) on this machine or any Spark master."""

from __future__ import annotations

import argparse

from minibroker.commands import extras
from spark_jobs.options import add_arguments


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "audit", help="check with Spark that every broker's log files are whole and that the replicas agree",
        description="Read every broker's segment, index and checkpoint files with Spark and report, partition by"
                    " partition, whether they are whole, consistent and identical across replicas."
                    " Exit code 0 when clean, 1 when anomalies are found, 2 on usage errors, 3 when the job fails.")
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not extras.require("minibroker audit", "audit", extras.AUDIT_MODULES):
        return 2
    # Imported here: Spark and pyarrow are heavy, and every other command would pay for them.
    from spark_jobs.audit import run as run_audit

    return run_audit(args)

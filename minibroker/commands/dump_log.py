"""`minibroker dump-log`: Kafka's kafka-dump-log.sh for segment and index files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from broker.log.dump import DumpLogError, dump_file


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("dump-log", help="print the batches of .log files and the entries of index files")
    parser.add_argument("--files", required=True,
                        help="comma-separated .log, .index, .timeindex and .txnindex files to dump")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print each record's offset, key and payload")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only check that each index file is sane")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Dump every file; one that cannot be dumped is reported on stderr and makes the exit status 1."""
    status = 0
    for name in filter(None, (f.strip() for f in args.files.split(","))):
        try:
            for line in dump_file(Path(name), args.print_data_log, args.index_sanity_check):
                print(line)
        except DumpLogError as exc:
            print(f"Error: {exc}", file=sys.stderr)
            status = 1
        except OSError as exc:
            print(f"Error: {name} ({exc.strerror})", file=sys.stderr)
            status = 1
    return status

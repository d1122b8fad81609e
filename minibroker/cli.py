"""The `minibroker` command line: one subcommand per module under minibroker/commands."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module defines `register(subparsers)`, which adds its subcommand and sets
# `func` on the parser's defaults; func(args) returns the exit code.
COMMAND_MODULES = (
    "minibroker.commands.demo",
    "minibroker.commands.dump_log",
    "minibroker.commands.controller",
    "minibroker.commands.broker",
    "minibroker.commands.cluster",
    "minibroker.commands.topics",
    "minibroker.commands.leader_election",
    "minibroker.commands.get_offsets",
    "minibroker.commands.delete_records",
    "minibroker.commands.reassign_partitions",
    "minibroker.commands.console_producer",
    "minibroker.commands.console_consumer",
    "minibroker.commands.perf",
    "minibroker.commands.chaos",
    "minibroker.commands.health",
    "minibroker.commands.audit",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minibroker", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `minibroker dump-log ... | head` is normal use, not an error.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())

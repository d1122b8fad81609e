"""The `minibroker` command line: one subcommand per module under minibroker/commands."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from minibroker.commands.usage import CommandLineError

# Each module defines `register(subparsers)`, which adds the subcommand named after the module (`dump_log`:
# `dump-log`) and sets `func` on the parser's defaults; func(args) returns the exit code.
COMMAND_MODULES = (
    "minibroker.commands.demo",
    "minibroker.commands.dump_log",
    "minibroker.commands.controller",
    "minibroker.commands.broker",
    "minibroker.commands.cluster",
    "minibroker.commands.topics",
    "minibroker.commands.configs",
    "minibroker.commands.acls",
    "minibroker.commands.transactions",
    "minibroker.commands.leader_election",
    "minibroker.commands.get_offsets",
    "minibroker.commands.consumer_groups",
    "minibroker.commands.delete_records",
    "minibroker.commands.reassign_partitions",
    "minibroker.commands.console_producer",
    "minibroker.commands.console_consumer",
    "minibroker.commands.perf",
    "minibroker.commands.chaos",
    "minibroker.commands.health",
    "minibroker.commands.console",
    "minibroker.commands.zookeeper_security_migration",
    "minibroker.commands.audit",
    "minibroker.commands.pipeline",
)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that reports arguments it does not know itself. argparse leaves a subcommand's unknown
    arguments to the top-level parser, whose error shows `usage: minibroker [-h] COMMAND ...` instead of the
    subcommand's usage; subparsers inherit this class (add_subparsers' parser_class defaults to the parent's)."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def command_name(module: str) -> str:
    return module.rsplit(".", 1)[1].replace("_", "-")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand's parser, or only `command`'s when it is one. Each command module imports what its
    command needs (gRPC, the client, the broker, kio, Spark): all of them cost ~1 s of CPU, which every
    invocation paid for its one command."""
    parser = _Parser(prog="minibroker", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = [name for name in COMMAND_MODULES if command_name(name) == command] or COMMAND_MODULES
    for name in modules:
        importlib.import_module(name).register(subparsers)
    _remember_parsers(parser)
    return parser


def _remember_parsers(parser: argparse.ArgumentParser) -> None:
    """Every leaf (sub)command's parser in its own defaults, so a CommandLineError is reported with its usage."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not actions:
        parser.set_defaults(command_parser=parser)
    for action in actions:
        for subparser in action.choices.values():
            _remember_parsers(subparser)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # The command is the first argument (the top-level parser has no options but -h).
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    try:
        return int(args.func(args))
    except CommandLineError as e:
        args.command_parser.error(str(e))  # exits 2
        raise
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `minibroker dump-log ... | head` is normal use, not an error.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())

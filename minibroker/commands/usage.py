"""Usage errors found after argparse has parsed a command line."""

from __future__ import annotations


class CommandLineError(Exception):
    """Options argparse accepted that cannot go together or make no sense (e.g. --broker-id without
    --zookeeper). minibroker/cli.py reports it as argparse reports its own errors: the subcommand's usage,
    `minibroker <subcommand>: error: <message>`, exit code 2."""

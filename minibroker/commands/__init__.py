"""Subcommands of the `minibroker` command line."""

"""`minibroker controller`: run a controller process (controller/main.py)."""

from __future__ import annotations

import argparse

from controller.main import DESCRIPTION, add_arguments, run


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "controller",
        help="run a controller: one of them is elected, the others stand by",
        description=DESCRIPTION,
    )
    add_arguments(parser)
    parser.set_defaults(func=run)

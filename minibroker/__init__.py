"""minibroker: a mini Kafka (ZooKeeper-era replication) in Python.

The public face: the Python client (kafka-python's shapes: Producer, Consumer,
Admin, OffsetAndMetadata, the error classes... every name of `client.__all__`)
and the `minibroker` command line.

  cli.py        the `minibroker` command line: one subcommand per module under commands/
  commands/     the subcommands
  container.py  the container image's entrypoint: environment variables -> a config file -> exec the process
The local-cluster library the commands are built on (and chaos, the benches, the audit and the tests use
without this package) is the top-level local_cluster/.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from client import *  # noqa: F403


def __getattr__(name: str) -> Any:
    # The client is imported on first use, not with the package: every broker and controller
    # process starts as `python -m minibroker.…` and has no use for it (a third of its start-up).
    # Dunder look-ups other than __all__ (import machinery, tools) must not pull it in.
    if name.startswith("__") and name != "__all__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    client = importlib.import_module("client")
    if name == "__all__":
        return client.__all__
    if name in client.__all__:
        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

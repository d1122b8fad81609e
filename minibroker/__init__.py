"""minibroker: a mini Kafka (ZooKeeper-era replication) in Python.

The public face: the Python client (kafka-python's shapes) and the `minibroker` command line (minibroker/cli.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from client import Admin, Consumer, NewTopic, Producer, TopicPartition

__all__ = ["Admin", "Consumer", "NewTopic", "Producer", "TopicPartition"]


def __getattr__(name: str) -> Any:
    # The client is imported on first use, not with the package: every broker and controller
    # process starts as `python -m minibroker.…` and has no use for it (a third of its start-up).
    if name in __all__:
        return getattr(importlib.import_module("client"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

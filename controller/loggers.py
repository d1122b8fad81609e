"""The controller's two logs, prefixed as Kafka prefixes them (its logIdent).

- the controller log: "[Controller id=1001] ..." - elections, events, failover;
- the state change log (logger "state.change.logger", Kafka's name, so it can be
  routed to its own file): "[Controller id=1001 epoch=3] ..." - every partition
  and replica state change and every request sent, the trail an operator reads
  to learn why a partition has the leader it has.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, MutableMapping
from typing import Any

STATE_CHANGE_LOGGER = "state.change.logger"


Logger = logging.LoggerAdapter[logging.Logger]


class _Prefixed(Logger):
    def __init__(self, logger: logging.Logger, prefix: Callable[[], str]) -> None:
        super().__init__(logger, {})
        self._prefix = prefix

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        return f"{self._prefix()}{msg}", kwargs


def controller_logger(name: str, controller_id: int) -> Logger:
    return _Prefixed(logging.getLogger(name), lambda: f"[Controller id={controller_id}] ")


def state_change_logger(controller_id: int, epoch: Callable[[], int]) -> Logger:
    """`epoch` is read at each line: the same logger serves every term of this controller."""
    return _Prefixed(
        logging.getLogger(STATE_CHANGE_LOGGER), lambda: f"[Controller id={controller_id} epoch={epoch()}] "
    )

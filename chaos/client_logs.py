"""The client libraries' log lines of a chaos run, into the run's `clients.log` instead of the terminal.

librdkafka logs to stderr unless confluent-kafka is given a Python `logger` (chaos/clients/confluent.py gives
it LIBRDKAFKA_LOGGER); kafka-python and minibroker's client log through `logging`. During a run all three go
to the file alone, so the terminal keeps to the nemesis and the verdict.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

CLIENT_LOG_FILE = "clients.log"
LIBRDKAFKA_LOGGER = "chaos.clients.librdkafka"
# librdkafka's (through confluent-kafka), kafka-python's and minibroker's own client's loggers.
CLIENT_LOGGERS = (LIBRDKAFKA_LOGGER, "kafka", "client")


@contextlib.contextmanager
def client_logs(path: Path) -> Iterator[None]:
    """While inside: the client loggers write to `path` (INFO and above), nowhere else."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    loggers = [logging.getLogger(name) for name in CLIENT_LOGGERS]
    saved = [(logger.propagate, logger.level) for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        for logger, (propagate, level) in zip(loggers, saved, strict=True):
            logger.removeHandler(handler)
            logger.propagate = propagate
            logger.setLevel(level)
        handler.close()

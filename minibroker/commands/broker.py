"""`minibroker broker --config server.properties [--override key=value ...]`: run one broker.

Like kafka-server-start.sh: the config file plus overrides, which win over
it; keys a broker here does not use (Kafka's num.network.threads,
socket.send.buffer.bytes ...) are named in one warning, as Kafka does. The
process runs until SIGTERM or Ctrl-C and then shuts down cleanly.
Exit code 1, with the reason on stderr, for a configuration or start-up error.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from broker.config.kafka_config import KafkaConfig, unused_configs_warning
from broker.log.log_dir_failure import LogDirFailedError
from broker.log.manager import LogDirOwnedError
from broker.server.kafka_server import BrokerStartupError, KafkaServer
from common.config import ConfigError
from zk.client import DuplicateBrokerIdError

logger = logging.getLogger("kafka.Kafka")

_LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"

# How long a thread may hold the GIL while another waits for it (CPython's default is 5 ms). A follower's fetch
# with records is answered on a disk thread and handed back to the event loop, one GIL hand-off each way; while
# the loop is busy with a producer's load, each hand-off waited up to the whole 5 ms: at 0.5 ms their p99 fell
# from 4-12 ms to 0.8-2.6 ms on the leader (a timed hop, acks=all records beside 20,000 records/s of 1 KiB), with
# the same broker CPU per MB and produce records/s (bench/kafka_vs_grpc.py). Kafka's threads have no such lock.
SWITCH_INTERVAL_S = 0.0005


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("broker", help="run a broker", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True, help="server.properties file")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a config key=value that wins over the file (repeatable)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    logging.basicConfig(level=args.log_level, format=_LOG_FORMAT, stream=sys.stderr)
    if not args.config.is_file():
        print(f"minibroker broker: config file {args.config} does not exist", file=sys.stderr)
        return 1
    unused: list[str] = []
    try:
        config = KafkaConfig.from_properties(args.config, args.override, unused)
    except (ConfigError, OSError) as e:
        print(f"minibroker broker: {e}", file=sys.stderr)
        return 1
    if unused:
        logger.warning("%s", unused_configs_warning(unused))
    try:
        asyncio.run(KafkaServer(config).run())
    except (BrokerStartupError, DuplicateBrokerIdError, LogDirFailedError, LogDirOwnedError, OSError) as e:
        # LogDirFailedError: no log dir could be created or validated; OSError: a port that is taken. The
        # message names it, so the traceback would only hide it.
        logger.error("Fatal error during KafkaServer startup. Prepare to shutdown: %s", e)
        return 1
    except Exception as e:
        logger.exception("Fatal error during KafkaServer startup. Prepare to shutdown: %s", e)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m minibroker.commands.broker ...`: the same command without the `minibroker` front end."""
    parser = argparse.ArgumentParser(prog="minibroker")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["broker", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())

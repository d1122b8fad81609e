"""The controller process: `minibroker controller` (or `python -m controller.main`).

    minibroker controller --zookeeper 127.0.0.1:2181 --controller-id 1001 [--config F] [--override k=v]

Serves the KafkaController service (ControlledShutdown, ElectLeaders) on its
`listeners` address, advertised in /controller when it wins, each request
checked against the cluster's ACLs in ZooKeeper when `authorizer.class.name` is
set, as the brokers check theirs. Runs for controller until
SIGTERM or SIGINT; then resigns and closes its ZooKeeper session, which deletes
/controller at once so a standby takes over without waiting for the session to
time out. A SIGKILLed active controller
holds the seat until its session expires (zookeeper.session.timeout.ms).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from kazoo.handlers.threading import KazooTimeoutError

from common.config import ConfigError
from common.security.authorizer import AclAuthorizer, parse_super_users
from controller.config import ControllerConfig
from controller.controller import KafkaController
from controller.server import bind_controller_server, serve
from zk.acl_store import ZkAclStore
from zk.client import KafkaZkClient

log = logging.getLogger(__name__)

DESCRIPTION = (
    "Run a controller process: it races for /controller in ZooKeeper; the winner manages partition leadership "
    "and tells the brokers, the others take over when it goes."
)
_SHUTDOWN_SIGNALS = {signal.SIGTERM, signal.SIGINT}
LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--zookeeper", metavar="HOST:PORT[/CHROOT]", help="ZooKeeper connect string (zookeeper.connect)"
    )
    parser.add_argument("--controller-id", type=int, metavar="N", help="this controller's id (controller.id)")
    parser.add_argument("--config", type=Path, metavar="FILE", help="controller .properties file")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a configuration property; wins over --config (repeatable)",
    )


def config_from_args(args: argparse.Namespace) -> ControllerConfig:
    """--zookeeper and --controller-id are shorthands for overrides, and win over them."""
    overrides = list(args.override)
    if args.zookeeper is not None:
        overrides.append(f"zookeeper.connect={args.zookeeper}")
    if args.controller_id is not None:
        overrides.append(f"controller.id={args.controller_id}")
    return ControllerConfig.from_properties(args.config, overrides)


def run(args: argparse.Namespace) -> int:
    if args.config is not None and not args.config.is_file():
        print(f"minibroker controller: config file {args.config} does not exist", file=sys.stderr)
        return 1
    try:
        config = config_from_args(args)
    except ConfigError as e:
        print(f"minibroker controller: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, stream=sys.stderr)
    # Blocked before any thread starts, so every thread inherits the mask and only sigwait below sees them.
    signal.pthread_sigmask(signal.SIG_BLOCK, _SHUTDOWN_SIGNALS)
    try:
        return _run(config)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SHUTDOWN_SIGNALS)


def _run(config: ControllerConfig) -> int:
    log.info(
        "Starting controller %d (zookeeper.connect=%s, zookeeper.session.timeout.ms=%d)",
        config.controller_id,
        config.zookeeper_connect,
        config.zookeeper_session_timeout_ms,
    )
    try:
        zk = KafkaZkClient.connect(
            config.zookeeper_connect,
            config.zookeeper_session_timeout_ms,
            timeout=config.zookeeper_session_timeout_ms / 1000,
            security=config.zk_security,
        )
    except KazooTimeoutError:
        log.error("Timed out waiting for connection to ZooKeeper at %s", config.zookeeper_connect)
        return 1
    try:
        zk.ensure_persistent_paths()
        try:
            server, endpoint = bind_controller_server(config)
        except OSError as e:
            log.error("%s", e)
            return 1
        # The brokers' ACLs, loaded before any request is served so none is decided on an empty cache.
        acl_store = None
        if config.authorizer_class_name.strip():
            acl_store = ZkAclStore(zk, AclAuthorizer(parse_super_users(config.super_users),
                                                     config.allow_everyone_if_no_acl_found))
            acl_store.startup()
        controller = KafkaController(config, zk, endpoint=endpoint)
        if config.metrics_port:
            controller.metrics.serve(config.metrics_port)
        serve(server, controller, config, None if acl_store is None else acl_store.authorizer)
        log.info("Serving ControlledShutdown on %s", endpoint)
        controller.startup()
        try:
            received = signal.sigwait(_SHUTDOWN_SIGNALS)
            log.info("Received %s, shutting down", signal.Signals(received).name)
        finally:
            # Requests waiting for the event thread are answered by it or time out; none is taken after this.
            server.stop(grace=None)
            controller.shutdown()
            controller.metrics.close()
            if acl_store is not None:
                acl_store.shutdown()
    finally:
        zk.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="minibroker controller", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

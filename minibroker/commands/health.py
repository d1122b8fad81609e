"""`minibroker health`: is this broker registered and serving, is this controller up? For container healthchecks.

    minibroker health --bootstrap-server H:P [--broker-id N --zookeeper Z]   # a broker
    minibroker health --controller H:P                                       # a controller

A broker is healthy when grpc.health.v1 says SERVING (it turns SERVING only once
registered) and, given --broker-id and --zookeeper, /brokers/ids/<id> exists
right now (a broker whose ZooKeeper session expired still serves, unregistered).
A controller is healthy when grpc.health.v1 says its KafkaController service is
SERVING (it serves only after connecting to ZooKeeper); a broker's address given
as --controller is not a controller and says so. Exit 0 with one line on stdout
when healthy ("broker 1 at H:P is healthy: SERVING, registered"), else 1 with the
reason on stderr; 2 for a usage error. `--command-config FILE` (client properties: security.protocol=SSL,
ssl.ca.location, ssl.certificate.location, ssl.key.location) checks a TLS listener.
"""

from __future__ import annotations

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kazoo.handlers.threading import KazooTimeoutError

from common.grpc_tls import PLAINTEXT, GrpcSecurity
from minibroker.commands.client_options import UsageError, add_command_config_option, client_security
from minibroker.commands.listener_probe import GRPC, wrong_listener
from minibroker.commands.usage import CommandLineError
from proto.types import CONTROLLER_SERVICE
from zk.client import KafkaZkClient


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("health", help="check that a broker is registered and serving, or a controller up",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the broker's listener address")
    target.add_argument("--controller", metavar="HOST:PORT", help="the controller's listener address")
    parser.add_argument("--broker-id", type=int, metavar="N", help="with --zookeeper: check /brokers/ids/N")
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]", help="with --broker-id: where to look")
    parser.add_argument("--timeout-ms", type=int, default=5000, help="give up after this long (default 5000)")
    add_command_config_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.broker_id is None) != (args.zookeeper is None):
        raise CommandLineError("--broker-id and --zookeeper go together")
    if args.timeout_ms <= 0:
        raise CommandLineError(f"--timeout-ms must be positive, not {args.timeout_ms}")
    timeout_s = args.timeout_ms / 1000
    try:
        security = client_security(args)
    except UsageError as e:
        print(f"minibroker health: {e}", file=sys.stderr)
        return 1
    if args.controller is not None:
        problem = controller_problem(args.controller, timeout_s, security)
        healthy = f"controller at {args.controller} is healthy: SERVING"
    else:
        problem = broker_problem(args.bootstrap_server, args.broker_id, args.zookeeper, timeout_s, security)
        healthy = (f"broker at {args.bootstrap_server} is healthy: SERVING" if args.broker_id is None else
                   f"broker {args.broker_id} at {args.bootstrap_server} is healthy: SERVING, registered")
    if problem is not None:
        print(f"minibroker health: {problem}", file=sys.stderr)
        return 1
    print(healthy)
    return 0


def broker_problem(address: str, broker_id: int | None, zookeeper: str | None, timeout_s: float,
                   security: GrpcSecurity = PLAINTEXT) -> str | None:
    """Why the broker at `address` is not healthy, or None."""
    with security.channel(address) as channel:
        try:
            status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout_s)
        except grpc.RpcError as e:
            return (wrong_listener(address, GRPC, "health")
                    or f"{address} does not answer health checks ({e.code().name})")
    if status.status != health_pb2.HealthCheckResponse.SERVING:
        return f"{address} is {health_pb2.HealthCheckResponse.ServingStatus.Name(status.status)}"
    if broker_id is None or zookeeper is None:
        return None
    try:
        zk = KafkaZkClient.connect(zookeeper, timeout=timeout_s)
    except KazooTimeoutError:
        return f"cannot connect to ZooKeeper at {zookeeper}"
    try:
        if zk.get_broker(broker_id) is None:
            return f"broker {broker_id} is not registered in ZooKeeper (/brokers/ids/{broker_id})"
    finally:
        zk.close()
    return None


def controller_problem(address: str, timeout_s: float, security: GrpcSecurity = PLAINTEXT) -> str | None:
    """Why the controller at `address` is not healthy, or None."""
    with security.channel(address) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            return f"controller {address} does not accept connections"
        try:
            status = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=CONTROLLER_SERVICE), timeout=timeout_s)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNIMPLEMENTED):
                return (f"{address} is not a controller: it does not serve {CONTROLLER_SERVICE}"
                        " (a broker's address?)")
            return f"controller {address} does not answer health checks ({e.code().name})"
    if status.status != health_pb2.HealthCheckResponse.SERVING:
        return f"controller {address} is {health_pb2.HealthCheckResponse.ServingStatus.Name(status.status)}"
    return None

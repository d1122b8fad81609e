"""`minibroker health`: is this broker registered and serving, is this controller up? For container healthchecks.

    minibroker health --bootstrap-server H:P [--broker-id N --zookeeper Z]   # a broker
    minibroker health --controller H:P                                       # a controller

A broker is healthy when grpc.health.v1 says SERVING (it turns SERVING only once
registered) and, given --broker-id and --zookeeper, /brokers/ids/<id> exists
right now (a broker whose ZooKeeper session expired still serves, unregistered).
A controller is healthy when its KafkaController service accepts a connection
(it binds only after connecting to ZooKeeper). Exit 0 when healthy, else 1 with
the reason on stderr.
"""

from __future__ import annotations

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kazoo.handlers.threading import KazooTimeoutError

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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.broker_id is None) != (args.zookeeper is None):
        print("minibroker health: --broker-id and --zookeeper go together", file=sys.stderr)
        return 2
    timeout_s = args.timeout_ms / 1000
    problem = (controller_problem(args.controller, timeout_s) if args.controller is not None
               else broker_problem(args.bootstrap_server, args.broker_id, args.zookeeper, timeout_s))
    if problem is not None:
        print(f"minibroker health: {problem}", file=sys.stderr)
        return 1
    return 0


def broker_problem(address: str, broker_id: int | None, zookeeper: str | None, timeout_s: float) -> str | None:
    """Why the broker at `address` is not healthy, or None."""
    with grpc.insecure_channel(address) as channel:
        try:
            status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout_s)
        except grpc.RpcError as e:
            return f"{address} does not answer health checks ({e.code().name})"
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


def controller_problem(address: str, timeout_s: float) -> str | None:
    with grpc.insecure_channel(address) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            return f"controller {address} does not accept connections"
    return None

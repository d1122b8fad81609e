"""`minibroker console`: a live web console of replication, served on 127.0.0.1.

    minibroker console --data-dir D [--port N] [--allow-faults]
    minibroker console --bootstrap-server H:P [--command-config FILE] [--port N]

One bar per replica of each partition on a common offset axis (log start, log
end offset, high watermark), the leader and its epoch, the ISR, each follower's
lag in offsets and in time since it last caught up against
replica.lag.time.max.ms; the cluster; a timeline of leader epochs, ISR shrinks
and expands, truncations and elections with their reasons (the brokers' and the
controller's own event rings); topics and consumer groups with lag. Pushed to
the page twice a second. With --allow-faults, on a local cluster, buttons
SIGKILL, SIGSTOP, SIGCONT or restart a broker and kill the active controller.
docs/console.md says where each figure comes from.
"""

from __future__ import annotations

import argparse
import sys

from minibroker.commands import extras
from minibroker.commands.client_options import (
    UsageError,
    add_cluster_options,
    bootstrap_servers,
    client_security,
    cluster_info,
    kafka_python_admin_properties,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("console", help="a live web console of replicas, high watermarks, ISR and groups",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cluster_options(parser)
    parser.add_argument("--host", default="127.0.0.1",
                        help="the address to serve on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8090, help="the port to serve on (default 8090; 0: any free)")
    parser.add_argument("--interval-ms", type=int, default=400,
                        help="how often the cluster is asked and the page updated (default 400: a tick that"
                             " takes longer on a big cluster still leaves two pictures a second)")
    parser.add_argument("--allow-faults", action="store_true",
                        help="show the fault buttons (SIGKILL/SIGSTOP/SIGCONT/restart a broker, kill the"
                             " controller): a --data-dir cluster only")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not extras.require("minibroker console", "console", extras.CONSOLE_MODULES):
        return 2
    if args.interval_ms <= 0:
        print(f"minibroker console: --interval-ms must be positive, not {args.interval_ms}", file=sys.stderr)
        return 1
    if args.allow_faults and args.data_dir is None:
        print("minibroker console: --allow-faults needs --data-dir: faults are for a local cluster only",
              file=sys.stderr)
        return 1
    try:
        servers = bootstrap_servers(args)
        security = client_security(args)
        kafka = _kafka_listeners(args)
        # --bootstrap-server: the brokers tell the rest (console/remote.py); DescribeLogDirs asked as the admin.
        remote = args.bootstrap_server is not None or args.data_dir is None
        kafka_properties = kafka_python_admin_properties(args) if remote else None
    except UsageError as e:
        print(f"minibroker console: {e}", file=sys.stderr)
        return 1
    from console.main import serve  # aiohttp is an extra: imported once it is known to be there
    return serve(servers, security, data_dir=args.data_dir if args.bootstrap_server is None else None,
                 host=args.host, port=args.port, interval_ms=args.interval_ms, allow_faults=args.allow_faults,
                 kafka=kafka, kafka_properties=kafka_properties)


def _kafka_listeners(args: argparse.Namespace) -> tuple[str, dict[str, str]] | None:
    """Where the console asks DescribeLogDirs (the replicas' bytes), with the admin's kafka-python properties: a
    --data-dir cluster's Kafka listeners, as its cluster.json names them. --bootstrap-server names gRPC
    listeners: the console finds a Kafka one in a broker's described advertised.listeners (console/remote.py)."""
    if args.bootstrap_server is not None or args.data_dir is None:
        return None
    servers = cluster_info(args).kafka_bootstrap_servers
    return (servers, kafka_python_admin_properties(args)) if servers else None

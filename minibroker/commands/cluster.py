"""`minibroker cluster up | status | down | restart-broker | restart-zookeeper`: a cluster on this machine
(local_cluster/cluster.py).

    minibroker cluster up --data-dir D [--brokers 3] [--controllers 2] [--zookeeper H:P | --zookeeper-nodes 3]
                          [--override k=v ...] [--port-base N | --well-known-ports] [--netns] [--security]
    minibroker cluster status --data-dir D
    minibroker cluster down --data-dir D [--kill]
    minibroker cluster restart-broker --data-dir D --id N [--kill]
    minibroker cluster restart-zookeeper --data-dir D [--member I] [--kill]
    minibroker cluster isolate --data-dir D --id N [--cut-clients]    (a cluster started with --netns)
    minibroker cluster heal --data-dir D

`up` prints progress on stderr and the bootstrap servers on stdout, so
`BOOTSTRAP=$(minibroker cluster up --data-dir D)` works in a script. The
addresses stay: `up` on a data dir that ran before listens where it did (ports
from the brokers' server.properties and cluster.json), `--port-base N` puts
ZooKeeper on N and broker <id> on N+<id> (an ensemble's member <i> on N+200+<i>),
`--well-known-ports` (what `minibroker demo` does) takes Kafka's where they are
free: Kafka listeners 9092.., gRPC 9192.., ZooKeeper 2181, and names each one taken.
`--zookeeper-nodes 3` runs a ZooKeeper ensemble of three servers instead of one
(zookeeper-1..3: a quorum of two keeps the cluster going); the brokers and
controllers get the whole connect string. The brokers' and controllers'
.properties files in D are kept as the user left them; `up` changes only the
keys it must (zookeeper.connect, listeners for a new --port-base, this run's
--override keys) and says which.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from chaos import netns
from local_cluster.cluster import ClusterError, ClusterUsageError, LocalCluster, ProcessStatus
from local_cluster.cluster_file import ClusterFileError
from minibroker.commands.usage import CommandLineError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("cluster", help="start, inspect and stop a local cluster", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    up = actions.add_parser("up", help="start ZooKeeper, controllers and brokers; wait until they serve")
    _data_dir(up)
    up.add_argument("--brokers", type=int, metavar="N",
                    help="number of brokers, ids 1..N (default: as many as the data dir had, else 3)")
    up.add_argument("--controllers", type=int, metavar="N",
                    help="number of controller processes, ids 1001.. (default: as many as the data dir had, else 2)")
    up.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                    help="use this ZooKeeper instead of starting one")
    up.add_argument("--zookeeper-nodes", type=int, metavar="N",
                    help="start a ZooKeeper ensemble of N servers (default: as many as the data dir had, else 1)")
    up.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker config key=value (repeatable); keys a controller knows go to the controllers too")
    up.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                    help="how long to wait for the cluster to be ready (default 60)")
    up.add_argument("--port-base", type=int, metavar="N",
                    help="ZooKeeper on port N, broker <id> on N+<id> (default: the ports this data dir had, else"
                         " free ones)")
    up.add_argument("--well-known-ports", action="store_true",
                    help="for ports the data dir does not have yet, Kafka's where they are free: broker <id>'s Kafka"
                         " listener on 9091+<id> (9092, ...), its gRPC listener on 9191+<id>, ZooKeeper on 2181;"
                         " a taken one is named and a free port used instead")
    up.add_argument("--netns", action="store_true",
                    help="run each broker, and ZooKeeper with the controllers, in a network namespace of its own on a"
                         " bridge, so a broker can be cut off from its peers (root only; `cluster down` removes it;"
                         " kept for later runs of the data dir)")
    up.add_argument("--security", action="store_true",
                    help="a secure cluster (kept for later runs of the data dir): a development CA and certificates"
                         " under DIR/security, SASL_SSL Kafka listeners (SCRAM), TLS gRPC with mutual TLS inside the"
                         " cluster, ZooKeeper ACLs, an admin super user and its client properties file"
                         " (DIR/security/admin.properties, for --command-config, kcat -F, confluent-kafka)")
    up.set_defaults(action_func=_up)

    status = actions.add_parser("status", help="is every process running, registered, which controller is active")
    _data_dir(status)
    status.set_defaults(action_func=_status)

    down = actions.add_parser("down", help="stop every process of the cluster, ZooKeeper last")
    _data_dir(down)
    down.add_argument("--kill", action="store_true", help="SIGKILL at once instead of SIGTERM")
    down.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                      help="SIGKILL what is still running after SIGTERM and this long (default 30)")
    down.set_defaults(action_func=_down)

    restart = actions.add_parser("restart-broker", help="stop one broker and start it again on the same port and logs")
    _data_dir(restart)
    restart.add_argument("--id", type=int, required=True, metavar="N", help="the broker id")
    restart.add_argument("--kill", action="store_true", help="SIGKILL it instead of SIGTERM (an unclean stop)")
    restart.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                         help="how long to wait for it to serve again (default 60)")
    restart.set_defaults(action_func=_restart_broker)

    restart_zk = actions.add_parser("restart-zookeeper",
                                    help="start the cluster's ZooKeeper again alone (stopping it first if it runs)")
    _data_dir(restart_zk)
    restart_zk.add_argument("--member", type=int, metavar="I",
                            help="the ensemble member zookeeper-I (a cluster started with --zookeeper-nodes)")
    restart_zk.add_argument("--kill", action="store_true", help="SIGKILL it instead of SIGTERM if it runs")
    restart_zk.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                            help="how long to wait for it, then the brokers, to serve again (default 60)")
    restart_zk.set_defaults(action_func=_restart_zookeeper)

    isolate = actions.add_parser("isolate", help="cut a broker off from its peers, the controllers and ZooKeeper"
                                                 " (a cluster started with --netns)")
    _data_dir(isolate)
    isolate.add_argument("--id", type=int, required=True, metavar="N", help="the broker id")
    isolate.add_argument("--cut-clients", action="store_true",
                         help="cut it off from clients on this machine too (by default they still reach it)")
    isolate.set_defaults(action_func=_isolate)

    heal = actions.add_parser("heal", help="undo every `cluster isolate`")
    _data_dir(heal)
    heal.set_defaults(action_func=_heal)
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    # kazoo logs every failed connection attempt; whether ZooKeeper can be reached is ours to report, once.
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    return int(args.action_func(args))


def _data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, required=True, metavar="DIR",
                        help="the cluster's directory: cluster.json, configs, logs and data")


def _report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _up(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.data_dir)
    started = time.monotonic()
    try:
        info = cluster.up(brokers=args.brokers, controllers=args.controllers, zookeeper=args.zookeeper,
                          overrides=args.override, timeout=args.timeout, report=_report, netns=args.netns,
                          port_base=args.port_base, security=args.security,
                          zookeeper_nodes=args.zookeeper_nodes, well_known_ports=args.well_known_ports)
    except ClusterUsageError as e:
        raise CommandLineError(str(e)) from None
    except (ClusterError, ClusterFileError) as e:
        print(f"minibroker cluster up: {e}", file=sys.stderr)
        return 1
    _report(f"Cluster ready in {time.monotonic() - started:.1f} s; cluster file {cluster.data_dir / 'cluster.json'},"
            f" logs in {cluster.logs_dir}")
    _report(f"Kafka bootstrap servers (kcat, confluent-kafka, kafka-python): {info.kafka_bootstrap_servers}")
    _report(f"gRPC bootstrap servers (minibroker's client and commands): {info.bootstrap_servers}")
    if info.security is not None:
        _report(f"Secure cluster: SASL_SSL (SCRAM) Kafka listeners, TLS gRPC; admin client properties"
                f" {info.security.client_config} (user {info.security.admin_user}; CA {info.security.ca})")
    print(info.bootstrap_servers)
    return 0


def _status(args: argparse.Namespace) -> int:
    try:
        info, statuses = LocalCluster(args.data_dir).status()
    except ClusterFileError as e:
        print(f"minibroker cluster status: {e}", file=sys.stderr)
        return 1
    width = max(len(s.name) for s in statuses)
    for s in statuses:
        print(_status_line(s, width))
    print(f"bootstrap servers: {info.bootstrap_servers}")
    print(f"kafka bootstrap servers: {info.kafka_bootstrap_servers}")
    if info.network is not None:
        print(f"network: {info.network.subnet} on bridge {info.network.bridge}, clients from {info.network.gateway}")
        try:
            isolated = netns.partitions(args.data_dir)
        except netns.PartitionError as e:
            print(f"minibroker cluster status: {e}", file=sys.stderr)
            return 1
        for p in isolated:
            print(f"broker-{p.broker_id} isolated since {time.strftime('%H:%M:%S', time.localtime(p.since))}"
                  f" ({'clients still reach it' if p.keep_clients else 'from clients too'})")
    return 0 if all(s.healthy for s in statuses) else 1


def _status_line(status: ProcessStatus, width: int) -> str:
    pid = "-" if status.pid is None else str(status.pid)
    state = "running" if status.running else "stopped"
    return f"{status.name:<{width}}  pid {pid:<8} {state:<8} {status.detail}".rstrip()


def _down(args: argparse.Namespace) -> int:
    try:
        stopped = LocalCluster(args.data_dir).down(kill=args.kill, timeout=args.timeout, report=_report)
    except (ClusterError, ClusterFileError) as e:
        print(f"minibroker cluster down: {e}", file=sys.stderr)
        return 1
    print(f"Stopped {', '.join(stopped)}" if stopped else "Nothing was running")
    return 0


def _restart_broker(args: argparse.Namespace) -> int:
    try:
        broker = LocalCluster(args.data_dir).restart_broker(args.id, kill=args.kill, timeout=args.timeout,
                                                            report=_report)
    except (ClusterError, ClusterFileError) as e:
        print(f"minibroker cluster restart-broker: {e}", file=sys.stderr)
        return 1
    print(f"Broker {broker.id} serving on {broker.address} (pid {broker.pid})")
    return 0


def _restart_zookeeper(args: argparse.Namespace) -> int:
    name = "zookeeper" if args.member is None else f"zookeeper-{args.member}"
    try:
        cluster = LocalCluster(args.data_dir)
        info = cluster.load()
        if info.zookeeper.members and args.member is None:
            raise ClusterError("the cluster runs a ZooKeeper ensemble: name the member with --member I (one of "
                               + ", ".join(str(m.id) for m in info.zookeeper.members) + ")")
        if not info.zookeeper.members and info.zookeeper.pid is None:
            raise ClusterError(f"the cluster uses a ZooKeeper it did not start ({info.zookeeper.connect}):"
                               " restart it where it runs")
        started = time.monotonic()
        pid = cluster.restart_zookeeper(name, kill=args.kill, timeout=args.timeout, report=_report)
        # As restart-broker: done once the brokers serve with the cluster's metadata again.
        cluster.wait_ready(max(args.timeout - (time.monotonic() - started), 1.0))
    except (ClusterError, ClusterFileError) as e:
        print(f"minibroker cluster restart-zookeeper: {e}", file=sys.stderr)
        return 1
    print(f"ZooKeeper {name} serving on {cluster.load().zookeeper.connect} (pid {pid})")
    return 0


def _isolate(args: argparse.Namespace) -> int:
    try:
        netns.isolate(args.data_dir, args.id, keep_clients=not args.cut_clients)
    except (netns.PartitionError, ClusterFileError) as e:
        print(f"minibroker cluster isolate: {e}", file=sys.stderr)
        return 1
    print(f"Broker {args.id} is cut off from its peers, the controllers and ZooKeeper"
          + (" and from clients" if args.cut_clients else "; clients still reach it"))
    return 0


def _heal(args: argparse.Namespace) -> int:
    try:
        healed = netns.heal(args.data_dir)
    except (netns.PartitionError, ClusterFileError) as e:
        print(f"minibroker cluster heal: {e}", file=sys.stderr)
        return 1
    print(f"Healed {', '.join(f'broker-{p.broker_id}' for p in healed)}" if healed else "Nothing was cut off")
    return 0

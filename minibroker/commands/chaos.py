"""`minibroker chaos run | check`: kill, pause and cut off brokers, controllers and ZooKeeper servers under load,
expire sessions, then check nothing acknowledged was lost (chaos/).

    minibroker chaos run [--data-dir D | --compose [PROJECT]] [--faults kill-leader,...] [--interval 10s]
                         [--duration 120s] [--seed N] [--output DIR] [--audit | --no-audit]
                         [--client minibroker|confluent-kafka|kafka-python] [--group-members N]
                         [--zookeeper-nodes 3]
    minibroker chaos check HISTORY [--output DIR]

Without --data-dir or --compose, `run` starts a fresh cluster of its own under OUTPUT/cluster and stops it at
the end (with --zookeeper-nodes 3 on a ZooKeeper ensemble). --compose runs against a docker-compose.yml
cluster that is up (its containers are killed, paused and disconnected; the audit is then
`docker-compose run --rm audit`).
The verdict goes to stdout; OUTPUT gets history.jsonl, result.json, chaos.png and chaos.html.
Exit 0 only when every safety check held; 1 when one did not; 2 when the run could not be made.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from chaos.audit import AuditResult, run_audit
from chaos.checker import check
from chaos.clients import CLIENTS
from chaos.cluster import PARTITION_FAULTS, ChaosCluster, ChaosError, LocalChaosCluster, local_unsupported
from chaos.compose import ComposeServices, default_project
from chaos.compose_cluster import ComposeChaosCluster
from chaos.history import HistoryError, load
from chaos.nemesis import DEFAULT_FAULTS, FAULTS, parse_duration, parse_faults
from chaos.report import HTML_FILE, PNG_FILE, RESULT_FILE, summarize, verdict, write_report
from chaos.runner import RunConfig, group_unsupported, run
from chaos.workload import WorkloadConfig
from local_cluster.cluster import ClusterError, LocalCluster
from local_cluster.cluster_file import ClusterFileError
from local_cluster.security import grpc_security
from minibroker.commands import extras

T = TypeVar("T")
# A cluster of our own fails over in seconds, not Kafka's 18 s session timeout: a 10 s fault interval
# must see the fault and its recovery.
OWN_CLUSTER_OVERRIDES = (
    "zookeeper.session.timeout.ms=6000",
    "replica.lag.time.max.ms=5000",
    "replica.socket.timeout.ms=3000",
    "replica.fetch.wait.max.ms=200",
)


def _argument(parse: Callable[[str], T]) -> Callable[[str], T]:
    """argparse shows an ArgumentTypeError's message; a ValueError's it replaces with "invalid value"."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return convert


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("chaos", help="fault injection under load, with a safety verdict",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    run_parser = actions.add_parser("run", help="a workload and a nemesis for --duration, then the checks")
    where = run_parser.add_mutually_exclusive_group()
    where.add_argument("--data-dir", type=Path, metavar="DIR",
                       help="a running `minibroker cluster up` cluster (default: start a fresh one)")
    where.add_argument("--compose", nargs="?", const="", metavar="PROJECT",
                       help="a running docker-compose cluster: the compose project's name (default as"
                            " docker-compose names it: $COMPOSE_PROJECT_NAME, else this directory's name)")
    run_parser.add_argument("--faults", type=_argument(parse_faults), default=DEFAULT_FAULTS, metavar="F[,F...]",
                            help=f"from {', '.join(FAULTS)} (default: {','.join(DEFAULT_FAULTS)};"
                                 " partition-leader needs `cluster up --netns` and expire-session iptables and a"
                                 " cgroup, both as root)")
    run_parser.add_argument("--interval", type=_argument(parse_duration), default=10.0, metavar="DURATION",
                            help="a fault every DURATION, held for half of it (default 10s)")
    run_parser.add_argument("--duration", type=_argument(parse_duration), default=120.0, metavar="DURATION",
                            help="how long the workload runs (default 120s)")
    run_parser.add_argument("--seed", type=int, metavar="N", help="the nemesis's random seed (default: random)")
    run_parser.add_argument("--output", type=Path, metavar="DIR",
                            help="where the history and the report go (default data/chaos/<UTC time>)")
    run_parser.add_argument("--audit", action=argparse.BooleanOptionalAction, default=None,
                            help="run the Spark audit of the log dirs after the run (default: when the cluster's log"
                                 " dirs are on this machine; --audit makes their absence a failure)")
    run_parser.add_argument("--client", choices=CLIENTS, default="minibroker",
                            help="the writers' and readers' client library: minibroker's own (gRPC listeners) or a"
                                 " Kafka client on the brokers' Kafka listeners (default minibroker)")
    run_parser.add_argument("--topic", default="chaos", help="the topic to write (created; default chaos)")
    run_parser.add_argument("--partitions", type=int, default=6, metavar="N", help="default 6")
    run_parser.add_argument("--writers", type=int, default=3, metavar="N",
                            help="idempotent acks=all producers (default 3)")
    run_parser.add_argument("--rate", type=float, default=100.0, metavar="N",
                            help="records per second per writer (default 100)")
    run_parser.add_argument("--readers", type=int, default=2, metavar="N", help="consumers reading along (default 2)")
    run_parser.add_argument("--group-members", type=int, default=0, metavar="N",
                            help="members of one consumer group sharing the topic, committing what they read"
                                 " (--client confluent-kafka; default 0); kill-coordinator needs them")
    run_parser.add_argument("--txn-processors", type=int, default=0, metavar="N",
                            help="consume-transform-produce processors copying the topic to <topic>-out exactly once"
                                 " in transactions with confluent-kafka (default 0); kill-txn-coordinator needs them")
    run_parser.add_argument("--txn-records", type=int, default=100, metavar="N",
                            help="at most this many records a transaction (default 100)")
    run_parser.add_argument("--acks1-writer", action=argparse.BooleanOptionalAction, default=True,
                            help="also an acks=1 writer, whose losses are reported, not failed (default on)")
    run_parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                            help="a broker config for the cluster this command starts (repeatable)")
    run_parser.add_argument("--security", action="store_true",
                            help="start the fresh cluster with `cluster up --security` (minibroker's client only); a"
                                 " --data-dir cluster started so is reached as its admin by itself")
    run_parser.add_argument("--zookeeper-nodes", type=int, default=1, metavar="N",
                            help="ZooKeeper servers of the cluster this command starts (default 1; 3: an ensemble)")
    run_parser.add_argument("--keep-cluster", action="store_true",
                            help="leave the cluster this command started running")
    run_parser.set_defaults(action_func=_run)

    check_parser = actions.add_parser("check", help="check a recorded history again")
    check_parser.add_argument("history", type=Path, metavar="HISTORY", help="a history.jsonl of `chaos run`")
    check_parser.add_argument("--output", type=Path, metavar="DIR",
                              help="write result.json, chaos.png and chaos.html here (default: nowhere)")
    check_parser.set_defaults(action_func=_check)
    parser.set_defaults(func=_dispatch)


def _dispatch(args: argparse.Namespace) -> int:
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    return int(args.action_func(args))


def _report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _fail(message: str) -> int:
    print(f"minibroker chaos: {message}", file=sys.stderr)
    return 2


def _run(args: argparse.Namespace) -> int:
    # The report's plots need matplotlib, the audit at the end PySpark: say so before starting anything.
    needed = extras.CHAOS_MODULES if args.audit is not False else ("matplotlib",)
    if not extras.require("minibroker chaos run", "chaos", needed):
        return 2
    if args.partitions < 1 or args.writers < 1 or args.readers < 0 or args.group_members < 0 or args.rate <= 0:
        return _fail("--partitions and --writers must be at least 1, --readers and --group-members at least 0,"
                     " --rate positive")
    if args.interval > args.duration:
        return _fail(f"--interval ({args.interval:g} s) is longer than --duration ({args.duration:g} s): no fault"
                     " would be injected")
    for fault in args.faults if args.compose is None else ():
        why = local_unsupported(fault)
        if why is not None:
            return _fail(why)
    if (args.compose is not None or args.data_dir is not None) and args.zookeeper_nodes != 1:
        return _fail("--zookeeper-nodes is for the cluster `chaos run` starts: start yours with"
                     " `minibroker cluster up --zookeeper-nodes N`")
    if args.zookeeper_nodes < 1:
        return _fail("--zookeeper-nodes must be at least 1")
    if args.compose is not None and (args.override or args.keep_cluster or args.security):
        return _fail("--override, --security and --keep-cluster are for the cluster `chaos run` starts; a --compose"
                     " cluster is"
                     " configured in docker-compose.yml")
    if args.compose is not None and args.audit:
        return _fail("--audit: the logs of a --compose cluster are in its volumes, not here; audit them with"
                     " `docker-compose run --rm audit`")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    output = (args.output or Path("data/chaos") / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())).resolve()
    config = RunConfig(faults=args.faults, interval=args.interval, duration=args.duration, seed=seed,
                       client=args.client,
                       workload=WorkloadConfig(topic=args.topic, partitions=args.partitions, writers=args.writers,
                                               rate=args.rate, acks1_writer=args.acks1_writer,
                                               readers=args.readers, group_members=args.group_members,
                                               txn_processors=args.txn_processors, txn_records=args.txn_records))
    why = group_unsupported(config)
    if why is not None:
        return _fail(why)
    if args.compose is not None:
        return _run_compose(args.compose or default_project(Path.cwd(), os.environ), config, output,
                            audit=args.audit is None)
    own = args.data_dir is None
    cluster = LocalCluster(output / "cluster" if own else args.data_dir)
    try:
        if own:
            if (cluster.data_dir / "cluster.json").exists():
                return _fail(f"{output} holds an earlier run: give another --output")
            _report(f"chaos: starting a fresh cluster in {cluster.data_dir}")
            cluster.up(overrides=[*OWN_CLUSTER_OVERRIDES, *args.override], report=_report,
                       netns=not PARTITION_FAULTS.isdisjoint(args.faults), security=args.security,
                       zookeeper_nodes=args.zookeeper_nodes)
        info = cluster.load()
        if info.security is not None:
            if args.client != "minibroker":
                return _fail(f"--client {args.client} on a secure cluster: only minibroker's client takes its TLS"
                             " and SASL settings in chaos runs so far")
            config = dataclasses.replace(config, workload=dataclasses.replace(
                config.workload, channel_factory=grpc_security(info).channel_factory))
        backend = LocalChaosCluster(cluster)
        try:
            history_path = run(backend, config, output, _report)
        finally:
            backend.close()
        data_dir = cluster.data_dir
        if own and not args.keep_cluster:
            # Stopped before the audit: the logs are then at rest, checkpoints written.
            cluster.down()
        audit = None if args.audit is False else run_audit(data_dir, output / "audit", required=bool(args.audit))
    except (ChaosError, ClusterError, ClusterFileError) as e:
        return _fail(str(e))
    finally:
        if own and not args.keep_cluster:
            with contextlib.suppress(ClusterError, ClusterFileError):
                cluster.down(kill=True)
    return _finish(history_path, output, audit)


def _run_compose(project: str, config: RunConfig, output: Path, audit: bool) -> int:
    try:
        backend: ChaosCluster = ComposeChaosCluster(ComposeServices(project))
        _report(f"chaos: compose project {project}, brokers at {backend.bootstrap_servers}")
        try:
            history_path = run(backend, config, output, _report)
        finally:
            backend.close()
    except ChaosError as e:
        return _fail(str(e))
    # The logs are in the project's volumes: run_audit reports it NOT RUN, having no data dir.
    result = run_audit(backend.data_dir, output / "audit", required=False) if audit else None
    return _finish(history_path, output, result)


def _finish(history_path: Path, output: Path | None, audit: AuditResult | None) -> int:
    history = load(history_path)
    result = check(history)
    summary = write_report(output, history, result, audit) if output is not None else summarize(history, result, audit)
    print(verdict(summary))
    if output is not None:
        print(f"history {history_path}; report {output / RESULT_FILE}, {output / PNG_FILE}, {output / HTML_FILE}")
    return 0 if summary["valid"] else 1


def _check(args: argparse.Namespace) -> int:
    if args.output is not None and not extras.require("minibroker chaos check --output", "chaos", ("matplotlib",)):
        return 2
    try:
        return _finish(args.history, args.output, None)
    except HistoryError as e:
        return _fail(str(e))

"""`minibroker leader-election`: Kafka's kafka-leader-election.sh, preferred and unclean elections.

    minibroker leader-election --election-type preferred|unclean (--topic T --partition P | --all-topic-partitions)
                               (--zookeeper H:P[/CHROOT] | --data-dir D)

preferred moves each partition's leadership back to its preferred replica (the
first of its assignment) when that replica is alive and in the ISR. The request
goes the ZooKeeper way (Kafka's PreferredReplicaLeaderElectionCommand): the
partitions are written to /admin/preferred_replica_election, the controller
elects and deletes the znode, and the command reads the outcome from the
partitions' states.

unclean (Kafka's ElectionType.UNCLEAN) brings back partitions that have no live
leader by electing a live replica outside the ISR, whatever
unclean.leader.election.enable says: records the ISR had acknowledged and the
new leader lacks are lost. It is an ElectLeaders request to the active
controller, found through ZooKeeper's /controller znode (the brokers do not
forward ElectLeaders on their gRPC listener, so --bootstrap-server alone cannot reach it; on their Kafka listeners
they do, as a Kafka admin client's elect_leaders needs). Output
lines are Kafka's; any partition not elected makes the exit code 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import grpc

from broker.admin.controller_channel import elect_leaders_request, election_results
from common.grpc_tls import PLAINTEXT, GrpcSecurity
from minibroker.commands.client_options import (
    UsageError,
    add_cluster_options,
    add_zookeeper_option,
    client_security,
    connect_zookeeper,
    zookeeper_connect,
    zookeeper_security,
)
from proto import minibroker_pb2_grpc as pb_grpc
from proto.errors import ErrorCode
from proto.types import TopicPartition
from zk.client import KafkaZkClient

PREFERRED = "PREFERRED"
UNCLEAN = "UNCLEAN"
_ELECTION_TYPE_IDS = {PREFERRED: 0, UNCLEAN: 1}  # Kafka's ElectionType ids
_POLL_S = 0.1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "leader-election",
        help="elect the preferred replicas as leaders (kafka-leader-election.sh)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_cluster_options(parser)
    add_zookeeper_option(parser)
    parser.add_argument("--election-type", required=True, type=str.upper, choices=[PREFERRED, UNCLEAN],
                        help="Type of election to attempt. Possible values are \"preferred\" for preferred leader"
                             " election or \"unclean\" for unclean leader election.")
    parser.add_argument("--topic", help="Name of topic for which to perform an election; needs --partition.")
    parser.add_argument("--partition", type=int, help="Partition id for which to perform an election.")
    parser.add_argument("--all-topic-partitions", action="store_true",
                        help="Perform election on all of the eligible topic partitions.")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                        help="How long to wait for the controller to finish the election.")
    parser.set_defaults(func=run)


@dataclass(frozen=True)
class ElectionOutcome:
    """Kafka's three answers: elected now, already led by the preferred replica, or an error per partition."""

    succeeded: list[TopicPartition]
    noop: list[TopicPartition]
    failed: dict[TopicPartition, str]


def unknown_partition_errors(
    requested: Iterable[TopicPartition], known: Iterable[TopicPartition]
) -> dict[TopicPartition, str]:
    """Kafka's UnknownTopicOrPartitionException for each partition that does not exist."""
    known_set = set(known)
    return {tp: "This server does not host this topic-partition." for tp in requested if tp not in known_set}


def led_by_preferred(
    partitions: Iterable[TopicPartition], preferred: Mapping[TopicPartition, int], leaders: Mapping[TopicPartition, int]
) -> list[TopicPartition]:
    return sorted(tp for tp in partitions if leaders.get(tp) == preferred[tp])


def run(args: argparse.Namespace) -> int:
    try:
        connect = zookeeper_connect(args, "election", "ElectLeaders")
        requested = _requested_partitions(args)
        with connect_zookeeper(connect, security=zookeeper_security(args)) as zk:
            if args.election_type == UNCLEAN:
                outcome = elect_leaders_through_controller(zk, UNCLEAN, requested, args.timeout,
                                                           client_security(args))
            else:
                outcome = elect_preferred_leaders(zk, requested, args.timeout)
    except UsageError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    if outcome.succeeded:
        print(f"Successfully completed leader election ({args.election_type}) for partitions "
              f"{', '.join(map(str, outcome.succeeded))}")
    if outcome.noop:
        print(f"Valid replica already elected for partitions {', '.join(map(str, outcome.noop))}")
    for tp, error in sorted(outcome.failed.items()):
        print(f"Error completing leader election ({args.election_type}) for partition: {tp}: {error}")
    if outcome.failed:
        print(f"Error: {len(outcome.failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0


def elect_preferred_leaders(zk: KafkaZkClient, requested: Sequence[TopicPartition] | None,
                            timeout_s: float) -> ElectionOutcome:
    """Request the election of the partitions (None: all) and wait for the controller's answer."""
    assignments = zk.get_topic_assignments(zk.get_all_topics())
    preferred = {tp: a.replicas(tp.partition)[0] for a in assignments.values() for tp in a.topic_partitions()}
    partitions = sorted(preferred) if requested is None else list(requested)
    failed = unknown_partition_errors(partitions, preferred)
    candidates = [tp for tp in partitions if tp not in failed]
    leaders = {tp: s.leader for tp, s in zk.get_partition_states(candidates).items()}
    noop = led_by_preferred(candidates, preferred, leaders)
    to_elect = [tp for tp in candidates if tp not in noop]
    if not to_elect:
        return ElectionOutcome([], noop, failed)
    if not zk.create_preferred_replica_election(to_elect):
        raise UsageError("Preferred replica leader election currently in progress for "
                         f"{', '.join(map(str, sorted(zk.get_preferred_replica_election())))}. Aborting operation")
    deadline = time.monotonic() + timeout_s
    # The controller deletes the znode when it is done (or a new controller finds it on failover).
    while zk.get_preferred_replica_election():
        if time.monotonic() >= deadline:
            timed_out = {tp: "Timed out waiting for the controller to complete the election." for tp in to_elect}
            return ElectionOutcome([], noop, failed | timed_out)
        time.sleep(_POLL_S)
    leaders = {tp: s.leader for tp, s in zk.get_partition_states(to_elect).items()}
    succeeded = led_by_preferred(to_elect, preferred, leaders)
    not_elected = {
        tp: f"Failed to elect leader for partition {tp} under strategy PreferredReplicaPartitionLeaderElectionStrategy"
        for tp in to_elect if tp not in succeeded
    }
    return ElectionOutcome(succeeded, noop, failed | not_elected)


def elect_leaders_through_controller(zk: KafkaZkClient, election_type: str,
                                     requested: Sequence[TopicPartition] | None, timeout_s: float,
                                     security: GrpcSecurity = PLAINTEXT) -> ElectionOutcome:
    """An ElectLeaders request to the controller /controller advertises, and its answer per partition."""
    endpoint = zk.get_controller_endpoint()
    if endpoint is None:
        raise UsageError("No active controller advertises its address in /controller: cannot send ElectLeaders")
    # No partitions (an empty list) asks the controller for every partition.
    request = elect_leaders_request(_ELECTION_TYPE_IDS[election_type], requested or (), int(timeout_s * 1000))
    with security.channel(endpoint) as channel:
        try:
            response = pb_grpc.KafkaControllerStub(channel).ElectLeaders(request, timeout=timeout_s + 5)
        except grpc.RpcError as e:
            raise UsageError(f"ElectLeaders to the controller at {endpoint} failed: {e.code().name}") from None
    if response.error_code != ErrorCode.NONE:
        raise UsageError(f"ElectLeaders failed: {ErrorCode(response.error_code).name}")
    succeeded, noop, failed = [], [], {}
    for tp, (error, message) in election_results(response).items():
        if error == ErrorCode.NONE:
            succeeded.append(tp)
        elif error == ErrorCode.ELECTION_NOT_NEEDED:
            noop.append(tp)
        else:
            failed[tp] = message or error.name
    return ElectionOutcome(sorted(succeeded), sorted(noop), failed)


def _requested_partitions(args: argparse.Namespace) -> list[TopicPartition] | None:
    if args.all_topic_partitions:
        if args.topic is not None or args.partition is not None:
            raise UsageError("--all-topic-partitions cannot be combined with --topic or --partition")
        return None
    if args.topic is None or args.partition is None:
        raise UsageError("one of --all-topic-partitions or --topic with --partition is required")
    return [TopicPartition(args.topic, args.partition)]

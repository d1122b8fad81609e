"""`minibroker reassign-partitions`: Kafka's kafka-reassign-partitions.sh, through ZooKeeper.

    minibroker reassign-partitions (--zookeeper H:P[/CHROOT] | --data-dir D)
        --generate --topics-to-move-json-file F --broker-list 1,2,3
        --execute --reassignment-json-file F
        --verify --reassignment-json-file F
        --cancel --reassignment-json-file F

--generate proposes an assignment of the topics' partitions over the given
brokers (and prints the current one); --execute checks the file (partitions and
brokers must exist, no duplicates), prints the current assignment to roll back
to, and writes /admin/reassign_partitions, which the controller carries out
(new replicas join as followers, leadership moves once they are in sync, old
replicas are deleted); --verify says, per partition, whether that is done and,
if not, what it waits for (target replicas outside the ISR, their brokers down or
not caught up). As Kafka's --zookeeper mode, one reassignment runs at a time, so
one that cannot finish would block every later one: --cancel (KIP-455) reverts
the file's partitions to their original replicas, through the same znode (each
partition's target becomes its original replicas, which the controller carries
out at once: the added replicas are stopped and deleted, the partition leaves
/admin/reassign_partitions), and waits until the controller has done so; a
request no controller has started yet is just taken out of the znode. The
brokers have no AlterPartitionReassignments API, so --bootstrap-server alone
cannot reach the controller.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from minibroker.commands.client_options import (
    UsageError,
    add_cluster_options,
    add_zookeeper_option,
    connect_zookeeper,
    zookeeper_connect,
    zookeeper_security,
)
from minibroker.commands.reassignment_json import (
    calculate_assignment,
    cancelled_text,
    current_assignment_text,
    find_partition_reassignment_states,
    format_as_reassignment_json,
    not_cancelled_error,
    parse_broker_list,
    parse_partition_reassignment_data,
    parse_topics_data,
    partition_reassignment_states_text,
    started_text,
    validated_reassignments,
    verify_replicas_and_brokers,
    waiting_reason,
)
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from zk.client import KafkaZkClient
from zk.paths import NO_LEADER, ReplicaAssignment

# Kafka 2.6+'s cannotExecuteBecauseOfExistingMessage, without --additional (not supported here).
EXISTING_REASSIGNMENT = "Cannot execute because there is an existing partition assignment."
# How long --cancel waits for the controller to revert the partitions (it does so in one pass of its event loop).
CANCEL_TIMEOUT_S = 30.0
_POLL_S = 0.1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "reassign-partitions",
        help="move partitions between brokers (kafka-reassign-partitions.sh)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_cluster_options(parser)
    add_zookeeper_option(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--generate", action="store_true",
                         help="Generate a candidate partition reassignment configuration. Note that this only "
                              "generates a candidate assignment, it does not execute it.")
    actions.add_argument("--execute", action="store_true",
                         help="Kick off the reassignment as specified by the --reassignment-json-file option.")
    actions.add_argument("--verify", action="store_true",
                         help="Verify if the reassignment completed as specified by the --reassignment-json-file "
                              "option.")
    actions.add_argument("--cancel", action="store_true",
                         help="Cancel an active reassignment of the partitions in the --reassignment-json-file: "
                              "they go back to their original replicas.")
    parser.add_argument("--reassignment-json-file", type=Path, metavar="FILE",
                        help='The JSON file with the partition reassignment configuration: {"partitions": '
                             '[{"topic": "foo", "partition": 1, "replicas": [1,2,3]}], "version": 1}')
    parser.add_argument("--topics-to-move-json-file", type=Path, metavar="FILE",
                        help="Generate a reassignment configuration to move the partitions of the specified topics "
                             'to the list of brokers specified by the --broker-list option: {"topics": '
                             '[{"topic": "foo"}, {"topic": "foo1"}], "version": 1}')
    parser.add_argument("--broker-list", metavar="1,2,3",
                        help="The list of brokers to which the partitions need to be reassigned, for --generate.")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        connect = zookeeper_connect(args, "reassignment", "AlterPartitionReassignments")
        if args.generate:
            if args.topics_to_move_json_file is None or args.broker_list is None:
                raise UsageError("--generate needs --topics-to-move-json-file and --broker-list")
            topics = parse_topics_data(_read(args.topics_to_move_json_file))
            brokers = parse_broker_list(args.broker_list)
            with connect_zookeeper(connect, security=zookeeper_security(args)) as zk:
                generate_assignment(zk, topics, brokers)
            return 0
        if args.reassignment_json_file is None:
            action = "--execute" if args.execute else "--verify" if args.verify else "--cancel"
            raise UsageError(f"{action} needs --reassignment-json-file")
        entries = parse_partition_reassignment_data(_read(args.reassignment_json_file))
        with connect_zookeeper(connect, security=zookeeper_security(args)) as zk:
            if args.execute:
                execute_assignment(zk, validated_reassignments(entries))
            elif args.verify:
                verify_assignment(zk, dict(entries))
            else:
                cancel_assignment(zk, {tp for tp, _ in entries})
        return 0
    except (UsageError, KafkaError) as e:
        print(f"Error: {e.message if isinstance(e, KafkaError) else e}", file=sys.stderr)
        return 1


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


def _current_assignment(zk: KafkaZkClient, topics: set[str]) -> dict[TopicPartition, tuple[int, ...]]:
    """Each partition's replicas as its topic's znode has them (RS, while a reassignment runs)."""
    return {
        tp: assignment.replicas(tp.partition)
        for assignment in zk.get_topic_assignments(sorted(topics)).values()
        for tp in assignment.topic_partitions()
    }


def generate_assignment(zk: KafkaZkClient, topics: list[str], broker_ids: list[int]) -> None:
    registered = {b.id for b in zk.get_all_brokers()}
    for broker_id in broker_ids:
        if broker_id not in registered:
            raise KafkaError(f"Unknown broker id {broker_id}", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    current = _current_assignment(zk, set(topics))
    missing = sorted(set(topics) - {tp.topic for tp in current})
    if missing:
        raise KafkaError(f"Topic '{missing[0]}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    proposed = calculate_assignment(current, broker_ids)
    print(f"Current partition replica assignment\n{format_as_reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_as_reassignment_json(proposed)}")


def execute_assignment(zk: KafkaZkClient, proposed: dict[TopicPartition, tuple[int, ...]]) -> None:
    current = _current_assignment(zk, {tp.topic for tp in proposed})
    verify_replicas_and_brokers(proposed, current, (b.id for b in zk.get_all_brokers()))
    if zk.get_partition_reassignment():
        raise KafkaError(EXISTING_REASSIGNMENT, ErrorCode.REASSIGNMENT_IN_PROGRESS)
    print(current_assignment_text(proposed, current))
    if not zk.create_partition_reassignment(proposed):
        raise KafkaError(EXISTING_REASSIGNMENT, ErrorCode.REASSIGNMENT_IN_PROGRESS)
    print(started_text(proposed))


def _full_assignment(zk: KafkaZkClient, partitions: set[TopicPartition]) -> dict[TopicPartition, ReplicaAssignment]:
    """Each partition's ReplicaAssignment (with the replicas being added and removed) from its topic's znode."""
    assignments = zk.get_topic_assignments(sorted({tp.topic for tp in partitions}))
    return {tp: assignments[tp.topic].partitions[tp.partition] for tp in partitions
            if tp.topic in assignments and tp.partition in assignments[tp.topic].partitions}


def verify_assignment(zk: KafkaZkClient, targets: dict[TopicPartition, tuple[int, ...]]) -> None:
    current = _current_assignment(zk, {tp.topic for tp in targets})
    states = find_partition_reassignment_states(targets, current, zk.get_partition_reassignment())
    waiting = {tp for tp, state in states.items() if not state.done}
    print(partition_reassignment_states_text(states, _waiting_reasons(zk, waiting) if waiting else {}))


def _waiting_reasons(zk: KafkaZkClient, partitions: set[TopicPartition]) -> dict[TopicPartition, str]:
    assignments = _full_assignment(zk, partitions)
    states = zk.get_partition_states(partitions)
    live = {b.id for b in zk.get_all_brokers()}
    reasons = {}
    for tp in partitions:
        state = states.get(tp)
        leader, isr = (NO_LEADER, ()) if state is None else (state.leader, state.isr)
        reasons[tp] = waiting_reason(assignments.get(tp), leader, isr, live)
    return reasons


def cancel_assignment(zk: KafkaZkClient, partitions: set[TopicPartition],
                      timeout_s: float = CANCEL_TIMEOUT_S) -> None:
    """KIP-455's cancel the ZooKeeper way: each running partition's target becomes its original replicas (the
    controller reverts it), and a request no controller has started yet is taken back out of the znode."""
    requested = zk.get_partition_reassignment().keys()
    running = {tp: a for tp, a in _full_assignment(zk, partitions).items() if a.is_being_reassigned}
    unstarted = (partitions & requested) - running.keys()
    if running or unstarted:
        zk.change_partition_reassignment({tp: a.origin_replicas for tp, a in running.items()}, removals=unstarted)
        # A controller may have started one of the others between the reads and the write: revert it too.
        started = {tp: a for tp, a in _full_assignment(zk, unstarted).items() if a.is_being_reassigned}
        if started:
            zk.change_partition_reassignment({tp: a.origin_replicas for tp, a in started.items()})
            running.update(started)
        deadline = time.monotonic() + timeout_s
        while not _reverted(zk, set(running)):
            if time.monotonic() >= deadline:
                raise KafkaError(
                    f"The controller did not cancel the reassignment of {','.join(map(str, sorted(running)))}"
                    f" within {timeout_s:.0f} s (is a controller running?); the request stays in"
                    f" /admin/reassign_partitions", ErrorCode.REQUEST_TIMED_OUT)
            time.sleep(_POLL_S)
        print(cancelled_text(running.keys() | unstarted))
    not_running = partitions - running.keys() - unstarted
    if not_running:
        raise not_cancelled_error(not_running)


def _reverted(zk: KafkaZkClient, partitions: set[TopicPartition]) -> bool:
    if partitions & zk.get_partition_reassignment().keys():
        return False
    return not any(a.is_being_reassigned for a in _full_assignment(zk, partitions).values())

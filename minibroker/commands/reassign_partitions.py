"""`minibroker reassign-partitions`: Kafka's kafka-reassign-partitions.sh, through ZooKeeper.

    minibroker reassign-partitions (--zookeeper H:P[/CHROOT] | --data-dir D)
        --generate --topics-to-move-json-file F --broker-list 1,2,3
        --execute --reassignment-json-file F
        --verify --reassignment-json-file F

--generate proposes an assignment of the topics' partitions over the given
brokers (and prints the current one); --execute checks the file (partitions and
brokers must exist, no duplicates), prints the current assignment to roll back
to, and writes /admin/reassign_partitions, which the controller carries out
(new replicas join as followers, leadership moves once they are in sync, old
replicas are deleted); --verify says, per partition, whether that is done. As
Kafka's --zookeeper mode, one reassignment runs at a time. The brokers have no
AlterPartitionReassignments API, so --bootstrap-server alone cannot reach the
controller.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from minibroker.commands.client_options import (
    UsageError,
    add_cluster_options,
    add_zookeeper_option,
    connect_zookeeper,
    zookeeper_connect,
)
from minibroker.commands.reassignment_json import (
    calculate_assignment,
    current_assignment_text,
    find_partition_reassignment_states,
    format_as_reassignment_json,
    parse_broker_list,
    parse_partition_reassignment_data,
    parse_topics_data,
    partition_reassignment_states_text,
    started_text,
    validated_reassignments,
    verify_replicas_and_brokers,
)
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from zk.client import KafkaZkClient

# Kafka 2.6+'s cannotExecuteBecauseOfExistingMessage, without --additional (not supported here).
EXISTING_REASSIGNMENT = "Cannot execute because there is an existing partition assignment."


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
            with connect_zookeeper(connect) as zk:
                generate_assignment(zk, topics, brokers)
            return 0
        if args.reassignment_json_file is None:
            action = "--execute" if args.execute else "--verify"
            raise UsageError(f"{action} needs --reassignment-json-file")
        entries = parse_partition_reassignment_data(_read(args.reassignment_json_file))
        with connect_zookeeper(connect) as zk:
            if args.execute:
                execute_assignment(zk, validated_reassignments(entries))
            else:
                verify_assignment(zk, dict(entries))
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


def verify_assignment(zk: KafkaZkClient, targets: dict[TopicPartition, tuple[int, ...]]) -> None:
    current = _current_assignment(zk, {tp.topic for tp in targets})
    states = find_partition_reassignment_states(targets, current, zk.get_partition_reassignment())
    print(partition_reassignment_states_text(states))

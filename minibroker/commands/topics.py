"""`minibroker topics`: Kafka's kafka-topics.sh (2.x, --bootstrap-server mode): create, alter, list, describe,
delete.

    minibroker topics --create --topic T [--partitions N] [--replication-factor N | --replica-assignment 1:2,2:3]
                      [--config k=v ...] [--if-not-exists]
    minibroker topics --alter --topic REGEX --partitions N [--replica-assignment 1:2,2:3,...] [--if-exists]
    minibroker topics --describe [--topic REGEX] [--if-exists] [--under-replicated-partitions]
                      [--unavailable-partitions] [--topics-with-overrides]
    minibroker topics --list [--topic REGEX]
    minibroker topics --delete --topic REGEX [--if-exists]

each with --bootstrap-server H:P[,H:P] or --data-dir D. Output and error
lines are Kafka's; a failure prints `Error while executing topic command :
<message>` and exits 1. Describe's `Configs:` lists the topic's overrides,
read from ZooKeeper when --data-dir names the cluster (the brokers have no
DescribeConfigs API yet); with --bootstrap-server alone it stays empty, and
--topics-with-overrides needs --data-dir. --alter only adds partitions
(CreatePartitions): the controller assigns, creates and elects the new ones.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

from client import Admin, KafkaError, NewPartitions, NewTopic, PartitionInfo, TopicDescription
from minibroker.commands.client_options import (
    UsageError,
    add_cluster_options,
    bootstrap_servers,
    client_security,
    cluster_info,
    connect_zookeeper,
    zookeeper_security,
)
from proto.errors import ErrorCode

_MAX_REPLICATION_FACTOR = 32767  # Kafka's: a short
_COLLISION_WARNING = ("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_')"
                      " could collide. To avoid issues it is best to use either, but not both.")


class TopicCommandError(Exception):
    """Kafka's IllegalArgumentException / AdminCommandFailedException: a request that cannot be made."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("topics", help="create, list, describe and delete topics (kafka-topics.sh)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cluster_options(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--create", action="store_true", help="Create a new topic.")
    actions.add_argument("--list", action="store_true", help="List all available topics.")
    actions.add_argument("--alter", action="store_true",
                         help="Alter the number of partitions and replica assignment.")
    actions.add_argument("--describe", action="store_true", help="List details for the given topics.")
    actions.add_argument("--delete", action="store_true", help="Delete a topic")
    parser.add_argument("--topic", help="The topic to create, describe or delete; a regular expression, except with"
                                        " --create.")
    parser.add_argument("--partitions", type=int,
                        help="The number of partitions for the topic being created or altered (WARNING: If"
                             " partitions are increased for a topic that has a key, the partition logic or ordering"
                             " of the messages will be affected). If not supplied for create, defaults to the"
                             " cluster default.")
    parser.add_argument("--replication-factor", type=int, help="The replication factor for each partition of the"
                                                               " topic. If not supplied, the cluster default.")
    parser.add_argument("--replica-assignment", metavar="BROKER:BROKER,...",
                        help="A list of manual partition-to-broker assignments: 1:2,2:3 puts partition 0 on"
                             " brokers 1 and 2, partition 1 on 2 and 3.")
    parser.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                        help="A topic configuration override for the topic being created (repeatable).")
    parser.add_argument("--if-not-exists", action="store_true",
                        help="With --create: create the topic only if it does not exist yet.")
    parser.add_argument("--if-exists", action="store_true",
                        help="With --alter, --describe or --delete: act only if the topic exists.")
    parser.add_argument("--under-replicated-partitions", action="store_true",
                        help="With --describe: only partitions whose ISR is smaller than their replica set.")
    parser.add_argument("--unavailable-partitions", action="store_true",
                        help="With --describe: only partitions whose leader is not available.")
    parser.add_argument("--topics-with-overrides", action="store_true",
                        help="With --describe: only show topics that have overridden configs.")
    parser.add_argument("--exclude-internal", action="store_true",
                        help="With --list or --describe: leave internal topics out.")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        _check_args(args)
        with Admin(bootstrap_servers(args), client_id="minibroker-topics",
                   channel_factory=client_security(args).channel_factory) as admin:
            if args.create:
                _create(admin, args)
            elif args.list:
                for topic in _topics(admin, args):
                    print(topic)
            elif args.alter:
                _alter(admin, args)
            elif args.describe:
                for line in _describe(admin, args):
                    print(line)
            else:
                admin.delete_topics(_existing_topics(admin, args))
    except (KafkaError, TopicCommandError, UsageError) as e:
        print(f"Error while executing topic command : {_message(e)}")
        return 1
    return 0


def _check_args(args: argparse.Namespace) -> None:
    """TopicCommandOptions.checkArgs: options that make no sense together are refused before connecting."""
    if (args.create or args.alter or args.delete) and args.topic is None:
        raise UsageError('Missing required argument "[topic]"')
    if args.alter and args.partitions is None:
        raise UsageError('Missing required argument "[partitions]"')
    if not args.create:
        for option in ("replication_factor", "if_not_exists"):
            if getattr(args, option) not in (None, False):
                raise UsageError(f'Option "[{option.replace("_", "-")}]" can only be used with option "[create]"')
        if args.config:
            raise UsageError('Option "[config]" can only be used with option "[create]"'
                             + (" (kafka-configs.sh alters topic configs)" if args.alter else ""))
        if not args.alter and (args.partitions is not None or args.replica_assignment is not None):
            option = "partitions" if args.partitions is not None else "replica-assignment"
            raise UsageError(f'Option "[{option}]" can only be used with option "[create],[alter]"')
    if args.create and args.replica_assignment is not None and (
            args.partitions is not None or args.replication_factor is not None):
        raise UsageError('Option "[replica-assignment]" can\'t be used with option "[partitions],'
                         '[replication-factor]"')
    if args.if_exists and not (args.alter or args.describe or args.delete):
        raise UsageError('Option "[if-exists]" can only be used with option "[alter],[describe],[delete]"')
    if args.topics_with_overrides and not args.describe:
        raise UsageError('Option "[topics-with-overrides]" can only be used with option "[describe]"')
    if args.topics_with_overrides and args.data_dir is None:
        raise UsageError("--topics-with-overrides needs --data-dir: the brokers have no DescribeConfigs API yet,"
                         " so the overrides are read from ZooKeeper")
    if args.topics_with_overrides and (args.under_replicated_partitions or args.unavailable_partitions):
        raise UsageError('Option "[topics-with-overrides]" can\'t be used with option'
                         ' "[under-replicated-partitions],[unavailable-partitions]"')
    if (args.under_replicated_partitions or args.unavailable_partitions) and not args.describe:
        raise UsageError('Option "[under-replicated-partitions],[unavailable-partitions]" can only be used with'
                         ' option "[describe]"')


# ---------------------------------------------------------------------- create


def _create(admin: Admin, args: argparse.Namespace) -> None:
    topic = args.topic
    if "." in topic or "_" in topic:
        print(_COLLISION_WARNING)
    if args.replication_factor is not None and not 1 <= args.replication_factor <= _MAX_REPLICATION_FACTOR:
        raise TopicCommandError(f"The replication factor must be between 1 and {_MAX_REPLICATION_FACTOR} inclusive")
    if args.partitions is not None and args.partitions < 1:
        raise TopicCommandError("The partitions must be greater than 0")
    new_topic = NewTopic(
        topic,
        num_partitions=-1 if args.partitions is None else args.partitions,
        replication_factor=-1 if args.replication_factor is None else args.replication_factor,
        replica_assignments=None if args.replica_assignment is None else parse_replica_assignment(
            args.replica_assignment),
        topic_configs=_parse_topic_configs(args.config),
    )
    try:
        admin.create_topics([new_topic])
    except KafkaError as e:
        if e.code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
            return
        raise
    print(f"Created topic {topic}.")


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """TopicCommand.parseReplicaAssignment: partition i gets the i-th colon-separated broker list."""
    assignment: dict[int, list[int]] = {}
    for partition, replicas in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in replicas.split(":")]
        except ValueError:
            raise TopicCommandError(f"Invalid replica assignment {text!r}: broker ids must be integers") from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise TopicCommandError("Partition replica lists may not contain duplicate entries: "
                                    + ",".join(map(str, duplicates)))
        assignment[partition] = brokers
        if len(brokers) != len(assignment[0]):
            raise TopicCommandError(f"Partition {partition} has different replication factor: "
                                    + ",".join(map(str, brokers)))
    return assignment


def _parse_topic_configs(items: list[str]) -> dict[str, str]:
    configs = {}
    for item in items:
        parts = re.split(r"\s*=\s*", item)
        if len(parts) != 2:
            raise TopicCommandError('Invalid topic config: all configs to be added must be in the format "key=val".')
        configs[parts[0].strip()] = parts[1].strip()
    return configs


# ---------------------------------------------------------------------- alter


def _alter(admin: Admin, args: argparse.Namespace) -> None:
    """TopicService.alterTopic: every topic matching --topic grows to --partitions; with --replica-assignment,
    the entries past a topic's current partitions place the new ones."""
    topics = _existing_topics(admin, args)
    if not topics:
        return
    assignment = None if args.replica_assignment is None else parse_replica_assignment(args.replica_assignment)
    current = {d.name: len(d.partitions) for d in admin.describe_topics(topics)}
    admin.create_partitions({
        topic: NewPartitions(args.partitions, None if assignment is None else [
            assignment[p] for p in sorted(assignment) if p >= current[topic]])
        for topic in topics
    })


# ---------------------------------------------------------------------- list / describe / delete


def _topics(admin: Admin, args: argparse.Namespace) -> list[str]:
    """The cluster's topics matching --topic (a regular expression matching the whole name, as Kafka's
    IncludeList does), all of them without it."""
    topics = admin.list_topics()
    if args.exclude_internal:
        internal = {d.name for d in admin.describe_topics(topics) if d.is_internal}
        topics = [t for t in topics if t not in internal]
    if args.topic is None:
        return topics
    try:
        pattern = re.compile(args.topic)
    except re.error as e:
        raise TopicCommandError(f"Invalid topic regular expression {args.topic!r}: {e}") from None
    return [t for t in topics if pattern.fullmatch(t)]


def _existing_topics(admin: Admin, args: argparse.Namespace) -> list[str]:
    """TopicCommand.ensureTopicExists: naming a topic that matches nothing is an error, unless --if-exists."""
    topics = _topics(admin, args)
    if args.topic is not None and not topics and not args.if_exists:
        raise TopicCommandError(f"Topic '{args.topic}' does not exist as expected")
    return topics


def _describe(admin: Admin, args: argparse.Namespace) -> Iterator[str]:
    topics = _existing_topics(admin, args)
    if not topics:
        return
    live_brokers = {b.node_id for b in admin.describe_cluster().brokers}
    configs = _topic_configs(args, topics)
    report_only = args.under_replicated_partitions or args.unavailable_partitions
    for description in admin.describe_topics(topics):
        partitions = sorted(description.partitions)
        topic_configs = configs.get(description.name, {})
        # DescribeOptions: --topics-with-overrides prints the topic lines of topics with overrides, no partitions.
        if not report_only and (topic_configs or not args.topics_with_overrides):
            yield _topic_line(description, topic_configs)
        if args.topics_with_overrides:
            continue
        for p in partitions:
            if not report_only \
                    or (args.under_replicated_partitions and len(p.isr) < len(p.replicas)) \
                    or (args.unavailable_partitions and p.leader not in live_brokers):
                yield _partition_line(description.name, p)


def _topic_line(description: TopicDescription, configs: dict[str, str]) -> str:
    partitions = description.partitions
    replication_factor = len(partitions[0].replicas) if partitions else 0
    config_text = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
    return (f"Topic: {description.name}\tPartitionCount: {len(partitions)}\tReplicationFactor: {replication_factor}"
            f"\tConfigs: {config_text}")


def _partition_line(topic: str, p: PartitionInfo) -> str:
    leader = str(p.leader) if p.leader >= 0 else "none"
    return (f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}"
            f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")


def _topic_configs(args: argparse.Namespace, topics: list[str]) -> dict[str, dict[str, str]]:
    """Each topic's config overrides (/config/topics/<topic>), when --data-dir says where ZooKeeper is."""
    if args.data_dir is None:
        return {}
    with connect_zookeeper(cluster_info(args).zookeeper.connect, security=zookeeper_security(args)) as zk:
        return {topic: zk.get_topic_config(topic) for topic in topics}


def _message(error: Exception) -> str:
    # A KafkaError's str() leads with its code's name; Kafka prints the exception's message alone.
    return error.message if isinstance(error, KafkaError) else str(error)

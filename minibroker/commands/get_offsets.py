"""`minibroker get-offsets`: Kafka's kafka-get-offsets.sh (GetOffsetShell).

    minibroker get-offsets (--bootstrap-server H:P | --data-dir D) [--topic REGEX] [--partitions 0,1]
                           [--time -1|latest|-2|earliest|TIMESTAMP] [--exclude-internal-topics]

Prints `topic:partition:offset` for each matching partition, sorted as Kafka
sorts them (by `topic-partition` text): with --time -1 (the default) the
offset after the last committed record, with -2 the log start offset (which
DeleteRecords and retention move), with a timestamp in ms the first offset
whose record is at least that recent (partitions with none are left out).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable

import grpc

from client import Admin, Consumer, KafkaError, TopicPartition
from minibroker.commands.client_options import UsageError, add_cluster_options, bootstrap_servers, client_security

_NAMED_TIMES = {"latest": -1, "earliest": -2}


class TerseError(Exception):
    """Kafka's TerseException: `Error occurred: <message>`, exit 1."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("get-offsets", help="print partitions' offsets at a time (kafka-get-offsets.sh)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cluster_options(parser)
    parser.add_argument("--topic", help="The topic to get the offsets for. It also accepts a regular expression."
                                        " If not present, all topics are queried.")
    parser.add_argument("--partitions", metavar="0,1,...",
                        help="Comma separated list of partition ids to get the offsets for. If not present, all"
                             " partitions of the topics are queried.")
    parser.add_argument("--time", default="latest", metavar="TIMESTAMP",
                        help="timestamp of the offsets before that: -1 or latest (default), -2 or earliest, or a"
                             " timestamp in ms.")
    parser.add_argument("--exclude-internal-topics", action="store_true",
                        help="By default, internal topics are included. If specified, internal topics are excluded.")
    parser.set_defaults(func=run)


def parse_time(text: str) -> int:
    """GetOffsetShell.parseOffsetSpec, for the specs the brokers answer: latest, earliest, a timestamp."""
    if text in _NAMED_TIMES:
        return _NAMED_TIMES[text]
    try:
        value = int(text)
    except ValueError:
        value = -3
    if value < -2:
        raise TerseError(f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest, or a specified"
                          " long format timestamp")
    return value


def parse_partitions(text: str | None) -> set[int]:
    if not text:
        return set()
    try:
        return {int(p) for p in text.split(",")}
    except ValueError:
        raise TerseError(f"--partitions expects a comma separated list of numeric partition ids, but received:"
                          f" {text}") from None


def run(args: argparse.Namespace) -> int:
    try:
        timestamp = parse_time(args.time)
        wanted = parse_partitions(args.partitions)
        try:
            pattern = re.compile(args.topic or ".*")
        except re.error as e:
            raise TerseError(f"Invalid topic regular expression {args.topic!r}: {e}") from None
        servers = bootstrap_servers(args)
        channel_factory = client_security(args).channel_factory
        with Admin(servers, client_id="GetOffsetShell", channel_factory=channel_factory) as admin:
            descriptions = admin.describe_topics(None)
        partitions = [TopicPartition(d.name, p.partition) for d in descriptions
                      if pattern.fullmatch(d.name) and not (args.exclude_internal_topics and d.is_internal)
                      for p in d.partitions if not wanted or p.partition in wanted]
        if not partitions:
            raise TerseError("Could not match any topic-partitions with the specified filters")
        found = _offsets(servers, partitions, timestamp, channel_factory)
        for tp, offset in sorted(found.items(), key=lambda item: str(item[0])):
            print(f"{tp.topic}:{tp.partition}:{offset}")
    except (TerseError, UsageError, KafkaError) as e:
        print(f"Error occurred: {e}", file=sys.stderr)
        return 1
    return 0


def _offsets(servers: str, partitions: list[TopicPartition], timestamp: int,
             channel_factory: Callable[..., grpc.aio.Channel]) -> dict[TopicPartition, int]:
    """Each partition's offset; one that fails is reported and skipped, as Kafka's tool does."""
    consumer = Consumer(bootstrap_servers=servers, client_id="GetOffsetShell", enable_auto_commit=False,
                        channel_factory=channel_factory)
    try:
        try:
            found = consumer.offsets_for_times({tp: timestamp for tp in partitions})
        except KafkaError:
            # One partition's error fails the whole call: ask one by one to say which.
            found = {}
            for tp in partitions:
                try:
                    found.update(consumer.offsets_for_times({tp: timestamp}))
                except KafkaError as e:
                    print(f"Skip getting offsets for topic-partition {tp} due to error: {e}",
                          file=sys.stderr)
        return {tp: o.offset for tp, o in found.items() if o is not None}
    finally:
        consumer.close(autocommit=False)

"""`minibroker console-consumer`: Kafka's kafka-console-consumer.sh, records to standard output.

    minibroker console-consumer (--topic T | --include REGEX) (--bootstrap-server H:P | --data-dir D)
        [--from-beginning] [--max-messages N] [--timeout-ms N] [--partition P [--offset O|earliest|latest]]
        [--group G] [--isolation-level read_committed|read_uncommitted]
        [--property print.key=true --property print.timestamp=true --property key.separator=: ...]

Lines are Kafka's DefaultMessageFormatter's: timestamp, partition, offset,
headers, key, value - those asked for, in that order, joined by key.separator
(`CreateTime:1700000000000\tPartition:0\tOffset:5\tkey\tvalue`). At the end
`Processed a total of N messages` goes to stderr. --timeout-ms ends the run
(exit code 0, as in Kafka) when no record came for that long; --max-messages
-1 (or none) means no limit. Before reading, the topic's metadata is fetched
within --timeout-ms (no message then: exit code 0, as Kafka's poll includes
that wait) or else default.api.timeout.ms (60 s; --consumer-property to
change it): an unreachable cluster, an invalid topic name or a partition the
topic does not have ends the run with an ERROR line and exit code 1. An --offset outside the
partition's log is said on stderr, then auto.offset.reset applies (latest,
unless --consumer-property auto.offset.reset=none makes it an error), as the
Java consumer does. --include subscribes to the topics that exist and whose
names match the regular expression in full (Kafka 3's --include, formerly
--whitelist). With --group the consumer is a member of that consumer group:
several console consumers of one group split the partitions between them,
start from the group's committed offsets, and hand their partitions over when
they stop (Ctrl-C leaves the group at once). --isolation-level read_committed
prints only committed transactions' records and stops at the partition's last
stable offset (an open transaction holds it there); read_uncommitted, the
default, prints every record up to the high watermark. Given, it wins over an
isolation.level consumer property, as in Kafka.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from client import Consumer, ConsumerRecord, ErrorCode, KafkaError, KafkaTimeoutError, TopicPartition
from minibroker.commands.client_options import (
    UsageError,
    add_cluster_options,
    bootstrap_servers,
    client_kwargs,
    client_security,
    load_config_file,
    parse_key_values,
)

_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
DEFAULT_FORMATTER = "kafka.tools.DefaultMessageFormatter"
# Its names in Kafka 2 and in Kafka 3.5+ (moved to the tools module), and the short one.
_FORMATTERS = {DEFAULT_FORMATTER, "org.apache.kafka.tools.consumer.DefaultMessageFormatter", "DefaultMessageFormatter"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("console-consumer", help="print records of a topic",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cluster_options(parser)
    topics = parser.add_mutually_exclusive_group(required=True)
    topics.add_argument("--topic", help="The topic to consume on.")
    topics.add_argument("--include", "--whitelist", dest="include", metavar="REGEX",
                        help="Regular expression of the topics to consume (--whitelist is its old name).")
    parser.add_argument("--partition", type=int, help="The partition to consume from; all of them if not given.")
    parser.add_argument("--offset", help="With --partition: the offset to start from, a number, 'earliest' or"
                                         " 'latest' (default: latest, or earliest with --from-beginning).")
    parser.add_argument("--from-beginning", action="store_true",
                        help="Without a committed offset, start with the earliest record instead of the latest.")
    parser.add_argument("--max-messages", type=int, default=-1, metavar="N",
                        help="The number of messages to consume before exiting; without it (or -1), consume for ever.")
    parser.add_argument("--timeout-ms", type=int, metavar="MS",
                        help="Exit if no message is available for consumption for this long.")
    parser.add_argument("--group", help="The consumer group to join: its members share the topic's partitions,"
                        " and each commits what it read (enable.auto.commit).")
    parser.add_argument("--isolation-level", metavar="LEVEL",
                        help="Set to read_committed in order to filter out transactional messages which are not"
                             " committed. Set to read_uncommitted to read all messages. (default: read_uncommitted)")
    parser.add_argument("--formatter", default=DEFAULT_FORMATTER, metavar="CLASS",
                        help="The message formatter: Kafka's DefaultMessageFormatter, the only one (configured with"
                             " --property).")
    parser.add_argument("--property", action="append", default=[], metavar="PROP=VALUE",
                        help="Formatter properties: print.timestamp, print.partition, print.offset, print.headers,"
                             " print.key, print.value (true/false), key.separator, line.separator,"
                             " headers.separator, headers.key.separator, null.literal.")
    parser.add_argument("--consumer-property", action="append", default=[], metavar="PROP=VALUE",
                        help="A consumer config, Kafka's name (fetch.min.bytes=1, ...); repeatable.")
    parser.add_argument("--consumer.config", dest="consumer_config", type=Path, metavar="FILE",
                        help="Consumer config properties file; --consumer-property wins over it.")
    parser.set_defaults(func=run)


def _check_args(args: argparse.Namespace) -> None:
    if args.partition is not None and args.topic is None:
        raise UsageError("The topic is required when partition is specified.")
    if args.include is not None:
        try:
            re.compile(args.include)
        except re.error as e:
            raise UsageError(f"--include {args.include!r} is not a regular expression: {e}") from None
    if args.formatter not in _FORMATTERS:
        raise UsageError(f"formatter {args.formatter} is not available: only {DEFAULT_FORMATTER}")
    if args.offset is not None and args.partition is None:
        raise UsageError("The partition is required when offset is specified.")
    if args.partition is not None and args.group is not None:
        raise UsageError("Options group and partition cannot be specified together.")
    if args.offset is not None and args.from_beginning:
        raise UsageError("Options from-beginning and offset cannot be specified together.")
    if args.offset not in (None, "earliest", "latest") and not (args.offset.isdigit()):
        raise UsageError(f"The offset must be a non-negative number, 'earliest' or 'latest', not {args.offset!r}")


def consumer_props(args: argparse.Namespace) -> dict[str, str]:
    props = load_config_file(args.consumer_config) | parse_key_values(args.consumer_property)
    props.setdefault("client.id", "console-consumer")
    if args.group is not None:
        props["group.id"] = args.group
    if args.isolation_level is not None:
        props["isolation.level"] = args.isolation_level
    if args.from_beginning:
        props["auto.offset.reset"] = "earliest"
    else:
        props.setdefault("auto.offset.reset", "latest")
    return props


def run(args: argparse.Namespace) -> int:
    try:
        _check_args(args)
        formatter = DefaultMessageFormatter(parse_key_values(args.property))
        props = consumer_props(args)
        consumer = Consumer(bootstrap_servers=bootstrap_servers(args, props), **client_kwargs(Consumer, props),
                            channel_factory=client_security(args, props).channel_factory)
    except (UsageError, ValueError) as e:
        print(f"minibroker console-consumer: {e}", file=sys.stderr)
        return 1
    processed = 0
    out = sys.stdout.buffer
    no_message = (f"ERROR Error processing message, terminating consumer process: TimeoutException: no message"
                  f" for {args.timeout_ms} ms (--timeout-ms)")
    try:
        try:
            _assign(consumer, args, props.get("auto.offset.reset", "latest"), args.timeout_ms)
        except KafkaTimeoutError:
            if args.timeout_ms is None:
                raise
            # Kafka's poll(--timeout-ms) includes the wait for metadata: no broker answered, so no message came.
            print(no_message, file=sys.stderr)
            return 0
        poll_timeout_ms = float("inf") if args.timeout_ms is None else args.timeout_ms
        while args.max_messages < 0 or processed < args.max_messages:
            wanted = None if args.max_messages < 0 else args.max_messages - processed
            batches = consumer.poll(timeout_ms=poll_timeout_ms, max_records=wanted)
            if not batches:
                print(no_message, file=sys.stderr)
                break
            for records in batches.values():
                for record in records:
                    out.write(formatter.format(record))
                processed += len(records)
            out.flush()
    except KafkaError as e:
        print(f"ERROR Error processing message, terminating consumer process: {e}", file=sys.stderr)
        return 1
    finally:
        consumer.close()
        print(f"Processed a total of {processed} messages", file=sys.stderr)
    return 0


def _assign(consumer: Consumer, args: argparse.Namespace, reset: str, timeout_ms: int | None) -> None:
    """Subscribe or assign as ConsoleConsumer's ConsumerWrapper does, after checking the topic exists
    (within --timeout-ms if given, else default.api.timeout.ms: an unreachable cluster must not leave the
    tool waiting for ever; KafkaTimeoutError then)."""
    if args.include is not None:
        pattern = re.compile(args.include)
        matched = sorted(t for t in consumer.topics(timeout_ms) if pattern.fullmatch(t))
        if not matched:
            print(f"WARN No topic matches --include {args.include!r}", file=sys.stderr)
        consumer.subscribe(matched)
        return
    partitions = consumer.partitions_for_topic(args.topic, timeout_ms)
    if partitions is None:
        print(f"WARN Topic {args.topic!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION)", file=sys.stderr)
    if args.partition is None:
        consumer.subscribe([args.topic])
        return
    if partitions is None or args.partition not in partitions:
        count = 0 if partitions is None else len(partitions)
        raise KafkaError(f"partition {args.partition} of topic {args.topic!r} does not exist (it has {count}"
                         " partitions)", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    tp = TopicPartition(args.topic, args.partition)
    consumer.assign([tp])
    offset = args.offset or ("earliest" if args.from_beginning else "latest")
    if offset == "earliest":
        consumer.seek_to_beginning(tp)
    elif offset == "latest":
        consumer.seek_to_end(tp)
    else:
        _seek(consumer, tp, int(offset), reset)


def _seek(consumer: Consumer, tp: TopicPartition, offset: int, reset: str) -> None:
    """Seek, saying so when the offset is outside the log: the first fetch would quietly reset it."""
    start = consumer.beginning_offsets([tp])[tp]
    end = consumer.end_offsets([tp])[tp]
    if not start <= offset <= end:
        print(f"WARN Fetch position offset={offset} is out of range for partition {tp.topic}-{tp.partition}"
              f" (log start offset {start}, log end offset {end}), resetting offset per auto.offset.reset={reset}",
              file=sys.stderr, flush=True)
    consumer.seek(tp, offset)


class DefaultMessageFormatter:
    """Kafka's DefaultMessageFormatter, for the console consumer's --property options."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str, default: bool = False) -> bool:
            return props.get(name, str(default)).strip().lower() == "true"

        self.print_timestamp = flag("print.timestamp")
        self.print_partition = flag("print.partition")
        self.print_offset = flag("print.offset")
        self.print_headers = flag("print.headers")
        self.print_key = flag("print.key")
        self.print_value = flag("print.value", True)
        self.key_separator = props.get("key.separator", "\t").encode()
        self.line_separator = props.get("line.separator", "\n").encode()
        self.headers_separator = props.get("headers.separator", ",").encode()
        self.headers_key_separator = props.get("headers.key.separator", ":").encode()
        self.null_literal = props.get("null.literal", "null").encode()

    def format(self, record: ConsumerRecord) -> bytes:
        columns = []
        if self.print_timestamp:
            kind = _TIMESTAMP_TYPES.get(record.timestamp_type)
            columns.append(f"{kind}:{record.timestamp}".encode() if kind else b"NO_TIMESTAMP")
        if self.print_partition:
            columns.append(f"Partition:{record.partition}".encode())
        if self.print_offset:
            columns.append(f"Offset:{record.offset}".encode())
        if self.print_headers:
            columns.append(self.headers_separator.join(
                key.encode() + self.headers_key_separator + self._bytes(value) for key, value in record.headers)
                if record.headers else b"NO_HEADERS")
        if self.print_key:
            columns.append(self._bytes(record.key))
        if self.print_value:
            columns.append(self._bytes(record.value))
        return self.key_separator.join(columns) + self.line_separator

    def _bytes(self, data: bytes | None) -> bytes:
        return self.null_literal if data is None else data

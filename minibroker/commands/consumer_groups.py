"""`minibroker consumer-groups`: Kafka's kafka-consumer-groups.sh (ConsumerGroupCommand).

    minibroker consumer-groups --list [--state]
    minibroker consumer-groups --describe (--group G ... | --all-groups) [--offsets | --members [--verbose] | --state]
    minibroker consumer-groups --reset-offsets --group G (--topic T[:0,1] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-datetime YYYY-MM-DDTHH:mm:SS.sss)
        [--dry-run | --execute]
    minibroker consumer-groups --delete --group G ...
    minibroker consumer-groups --delete-offsets --group G --topic T[:0,1] ...

each with --bootstrap-server H:P[,H:P] or --data-dir D, and --timeout MS
(5000) for each call to the cluster. Tables, messages and errors are Kafka's:
describe prints GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
CONSUMER-ID HOST CLIENT-ID, one row per partition a member holds and one per
partition only committed to (its member columns `-`). Offsets are reset only
for an inactive group (Empty, or Dead: none), as Kafka refuses to move them
under running members; a new offset is kept between the log start and the
log end. Without --execute, a reset is only shown (--dry-run is the default).
--delete-offsets (KIP-496's OffsetDelete) deletes an Empty group's offsets of
the partitions named (a topic alone: all its partitions), or a live group's
offsets of topics none of its members subscribes to, and prints each
partition's status.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from client import Admin, Consumer, KafkaError, OffsetAndMetadata, TopicPartition
from client.group_admin import ConsumerGroupDescription
from minibroker.commands.client_options import UsageError, add_cluster_options, bootstrap_servers
from proto.errors import ErrorCode

MISSING = "-"
RESET_SPECS = ("to_earliest", "to_latest", "to_offset", "shift_by", "to_datetime")
# Kafka's Errors messages, as its AdminClient's exceptions carry them.
_ERROR_TEXTS = {ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
                ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
                ErrorCode.INVALID_GROUP_ID: "The configured groupId is invalid.",
                ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
                ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
                ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "Deleting offsets of a topic is forbidden while the consumer"
                                                     " group is actively subscribed to it."}
# ConsumerGroupService.deleteOffsets' first line for the request's error (a partition's, if the group had none).
_DELETE_OFFSETS_ERRORS = {
    ErrorCode.INVALID_GROUP_ID: "'{group}' is not valid.",
    ErrorCode.GROUP_ID_NOT_FOUND: "'{group}' does not exist.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Access to '{group}' is not authorized.",
    ErrorCode.NON_EMPTY_GROUP: "Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty.",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "Encounter some partition level error, see the follow-up details:",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Encounter some partition level error, see the follow-up details:",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "Encounter some partition level error, see the follow-up details:",
}
_NO_EXECUTE = ("WARN: No action will be performed as the --execute option is missing.In a future major release, the"
               " default behavior of this command will be to prompt the user before executing the reset rather than"
               " doing a dry run. You should add the --dry-run option explicitly if you are scripting this command"
               " and want to keep the current default behavior without prompting.")


class GroupCommandError(Exception):
    """Kafka's printError: `Error: <message>`, exit 1."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("consumer-groups", help="list, describe, reset and delete consumer groups"
                                   " (kafka-consumer-groups.sh)", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cluster_options(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="List all consumer groups.")
    action.add_argument("--describe", action="store_true", help="Describe consumer group and list offset lag"
                        " (number of messages not yet processed) related to given group.")
    action.add_argument("--reset-offsets", action="store_true", help="Reset offsets of consumer group. Supports one"
                        " consumer group at the time, and instances should be inactive.")
    action.add_argument("--delete", action="store_true", help="Pass in groups to delete topic partition offsets and"
                        " ownership information over the entire consumer group.")
    action.add_argument("--delete-offsets", action="store_true", help="Delete offsets of consumer group. Supports one"
                        " consumer group at the time, and multiple topics.")
    parser.add_argument("--group", action="append", default=[], metavar="GROUP",
                        help="The consumer group we wish to act on.")
    parser.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="Describe the group and list all topic partitions in"
                      " the group along with their offset lag. This is the default sub-action.")
    view.add_argument("--members", action="store_true", help="Describe members of the group.")
    view.add_argument("--state", action="store_true", help="Describe the group state (with --list: list groups"
                      " with their state).")
    parser.add_argument("--verbose", action="store_true", help="Provide additional information, if any, when"
                        " describing the group (with --members: each member's assignment).")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                        help="The topic whose consumer group information should be deleted or topic whose should"
                             " be included in the reset offset process, optionally with partitions: topic1:0,1,2")
    parser.add_argument("--all-topics", action="store_true", help="Consider all topics assigned to a group in the"
                        " reset-offsets process.")
    spec = parser.add_mutually_exclusive_group()
    spec.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    spec.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    spec.add_argument("--to-offset", type=int, metavar="N", help="Reset offsets to a specific offset.")
    spec.add_argument("--shift-by", type=int, metavar="N", help="Reset offsets shifting current offset by 'n',"
                      " where 'n' can be positive or negative.")
    spec.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                      help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'")
    run_mode = parser.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="Only show results without executing changes on"
                          " Consumer Groups.")
    run_mode.add_argument("--execute", action="store_true", help="Execute operation.")
    parser.add_argument("--timeout", type=int, default=5000, metavar="MS",
                        help="The timeout for each call to the cluster (default 5000).")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        _check_args(args)
        servers = bootstrap_servers(args)
        with Admin(servers, client_id="minibroker-consumer-groups", request_timeout_ms=args.timeout,
                   default_api_timeout_ms=args.timeout) as admin:
            if args.list:
                _list(admin, args)
            elif args.describe:
                _describe(admin, servers, args)
            elif args.reset_offsets:
                _reset(admin, servers, args)
            elif args.delete_offsets:
                return _delete_offsets(admin, args.group[0], args.topic)
            else:
                return _delete(admin, args.group, args.timeout)
    except GroupCommandError as e:
        print(f"\nError: {e}")
        return 1
    except UsageError as e:
        print(f"minibroker consumer-groups: {e}", file=sys.stderr)
        return 1
    except KafkaError as e:
        print(f"\nError: Executing consumer group command failed due to {e}", file=sys.stderr)
        return 1
    return 0


def _check_args(args: argparse.Namespace) -> None:
    """ConsumerGroupCommandOptions.checkArgs."""
    groups_needed = args.describe or args.reset_offsets or args.delete
    if args.delete_offsets and not (args.group and args.topic):
        raise UsageError('Option "[delete-offsets]" takes the following options: "[group]", "[topic]"')
    if groups_needed and not args.group and not (args.all_groups and args.describe):
        raise UsageError('Option "[describe]" / "[reset-offsets]" / "[delete]" takes one of these options:'
                         ' "[all-groups]", "[group]"' if args.describe else 'Missing required argument "[group]"')
    if args.reset_offsets:
        if len(args.group) > 1:
            raise UsageError("--reset-offsets supports one consumer group at the time")
        if bool(args.topic) == args.all_topics:
            raise UsageError('Option "[reset-offsets]" takes one of these options: "[all-topics]", "[topic]"')
        if not any(getattr(args, s) not in (None, False) for s in RESET_SPECS):
            raise UsageError('Option "[reset-offsets]" takes one of these options: "[to-datetime]", "[shift-by]",'
                             ' "[to-earliest]", "[to-latest]", "[to-offset]"')
    elif args.all_topics or args.dry_run or args.execute or any(
            getattr(args, s) not in (None, False) for s in RESET_SPECS):
        raise UsageError('Options "[all-topics]", "[dry-run]", "[execute]" and the reset specs can only be used with'
                         ' option "[reset-offsets]"')
    elif args.topic and not args.delete_offsets:
        raise UsageError('Option "[topic]" can only be used with options "[reset-offsets]" or "[delete-offsets]"')
    if (args.members or args.offsets) and not args.describe:
        raise UsageError('Option "[members]" / "[offsets]" can only be used with option "[describe]"')
    if args.state and not (args.describe or args.list):
        raise UsageError('Option "[state]" can only be used with options "[describe]" or "[list]"')
    if args.verbose and not args.members:
        raise UsageError('Option "[verbose]" can only be used with option "[describe] [members]"')


# ---------------------------------------------------------------------- list


def _list(admin: Admin, args: argparse.Namespace) -> None:
    listings = admin.list_consumer_groups()
    if not args.state:
        for listing in listings:
            print(listing.group_id)
        return
    print(format_state_list([(g.group_id, g.state) for g in listings]))


def format_state_list(groups: Sequence[tuple[str, str]]) -> str:
    width = max([15, *(len(g) for g, _ in groups)])
    lines = [f"{'GROUP':<{width}} STATE"] + [f"{g:<{width}} {state}" for g, state in groups]
    return "\n".join(lines)


# ---------------------------------------------------------------------- describe


@dataclass(frozen=True)
class PartitionRow:
    """Kafka's PartitionAssignmentState: one row of --describe --offsets."""

    group: str
    topic: str | None
    partition: int | None
    offset: int | None
    log_end_offset: int | None
    consumer_id: str
    host: str
    client_id: str

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.offset


def _describe(admin: Admin, servers: str, args: argparse.Namespace) -> None:
    groups = [g.group_id for g in admin.list_consumer_groups()] if args.all_groups else args.group
    for description in admin.describe_consumer_groups(groups):
        if args.state:
            out = format_state(description)
        elif args.members:
            out = format_members(description, args.verbose)
        else:
            committed = ({} if description.state == "Dead"
                         else admin.list_consumer_group_offsets(description.group_id))
            wanted = set(committed).union(*(m.assignment for m in description.members))
            rows = offset_rows(description, committed, _log_end_offsets(servers, wanted, args.timeout))
            out = format_offsets(description.group_id, description.state, rows)
        _print_parts(out)


def _print_parts(parts: tuple[str, str]) -> None:
    """(stderr text, stdout text): Kafka says a live group's state on stderr, and the table (or that the group
    does not exist) on stdout."""
    err, out = parts
    if err:
        print(err, file=sys.stderr)
    if out:
        print(out)


def _log_end_offsets(servers: str, partitions: set[TopicPartition], timeout_ms: int) -> dict[TopicPartition, int]:
    if not partitions:
        return {}
    consumer = Consumer(bootstrap_servers=servers, client_id="minibroker-consumer-groups", enable_auto_commit=False,
                        request_timeout_ms=timeout_ms, default_api_timeout_ms=timeout_ms)
    try:
        return consumer.end_offsets(sorted(partitions))
    finally:
        consumer.close(autocommit=False)


def offset_rows(description: ConsumerGroupDescription, committed: Mapping[TopicPartition, OffsetAndMetadata],
                log_end_offsets: Mapping[TopicPartition, int]) -> list[PartitionRow]:
    """Kafka's collectGroupOffsets: members with partitions (most partitions first), each partition in order,
    then the partitions only committed to."""
    rows: list[PartitionRow] = []
    assigned: set[TopicPartition] = set()
    group = description.group_id
    for member in sorted((m for m in description.members if m.assignment), key=lambda m: -len(m.assignment)):
        assigned.update(member.assignment)
        for tp in sorted(member.assignment, key=lambda tp: (tp.partition, tp.topic)):
            offset = committed.get(tp)
            rows.append(PartitionRow(group, tp.topic, tp.partition, offset.offset if offset else None,
                                     log_end_offsets.get(tp), member.member_id, member.host, member.client_id))
    for tp in sorted((tp for tp in committed if tp not in assigned), key=lambda tp: (tp.partition, tp.topic)):
        rows.append(PartitionRow(group, tp.topic, tp.partition, committed[tp].offset, log_end_offsets.get(tp),
                                 MISSING, MISSING, MISSING))
    return rows


def _state_notice(group: str, state: str, rows: int) -> tuple[str, bool]:
    """Kafka's shouldPrintMemberState: (what to say, whether to print the table). Only a Dead group's
    notice is the output itself (Kafka's printError, on stdout)."""
    if state == "Dead":
        return f"\nError: Consumer group '{group}' does not exist.", False
    if state == "Empty":
        return f"\nConsumer group '{group}' has no active members.", rows > 0
    if state in ("PreparingRebalance", "CompletingRebalance"):
        return f"\nWarning: Consumer group '{group}' is rebalancing.", rows > 0
    return "", rows > 0


def _unshown(state: str, notice: str) -> tuple[str, str]:
    return ("", notice) if state == "Dead" else (notice, "")


def _cell(value: object) -> str:
    return MISSING if value is None else str(value)


def format_offsets(group: str, state: str, rows: Sequence[PartitionRow]) -> tuple[str, str]:
    notice, show = _state_notice(group, state, len(rows))
    if not show:
        return _unshown(state, notice)
    group_w = max([15, *(len(r.group) for r in rows)])
    topic_w = max([15, *(len(_cell(r.topic)) for r in rows)])
    consumer_w = max([15, *(len(r.consumer_id) for r in rows)])
    host_w = max([15, *(len(r.host) for r in rows)])

    def line(*cells: object) -> str:
        g, t, p, o, e, lag, c, h, client = (_cell(x) for x in cells)
        return (f"{g:<{group_w}} {t:<{topic_w}} {p:<10} {o:<15} {e:<15} {lag:<15} {c:<{consumer_w}} {h:<{host_w}}"
                f" {client}")

    lines = ["", line("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                      "CLIENT-ID")]
    lines += [line(r.group, r.topic, r.partition, r.offset, r.log_end_offset, r.lag, r.consumer_id, r.host,
                   r.client_id) for r in rows]
    return notice, "\n".join(lines) + "\n"


def format_members(description: ConsumerGroupDescription, verbose: bool) -> tuple[str, str]:
    members = description.members
    notice, show = _state_notice(description.group_id, description.state, len(members))
    if not show:
        return _unshown(description.state, notice)
    group = description.group_id
    with_instance = any(m.group_instance_id for m in members)
    widths = [max([15, len(group)]), max([15, *(len(m.member_id) for m in members)]),
              max([17, *(len(m.group_instance_id or "") for m in members)]),
              max([15, *(len(m.host) for m in members)]), max([15, *(len(m.client_id) for m in members)])]
    if not with_instance:
        del widths[2]

    def line(cells: list[str], last: str) -> str:
        return " ".join(f"{c:<{w}}" for c, w in zip(cells, widths)) + f" {last:<15} "

    header = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID"]
    if not with_instance:
        del header[2]
    lines = ["", line(header, "#PARTITIONS") + ("ASSIGNMENT" if verbose else "")]
    for m in members:
        cells = [group, m.member_id, m.group_instance_id or "", m.host, m.client_id]
        if not with_instance:
            del cells[2]
        lines.append(line(cells, str(len(m.assignment))) + (format_assignment(m.assignment) if verbose else ""))
    return notice, "\n".join(lines) + "\n"


def format_assignment(partitions: Iterable[TopicPartition]) -> str:
    """`t1(0,1), t2(3)` as --members --verbose shows it; `-` for none."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return MISSING
    return ", ".join(sorted(f"{t}({','.join(str(p) for p in sorted(ps))})" for t, ps in by_topic.items()))


def format_state(description: ConsumerGroupDescription) -> tuple[str, str]:
    notice, show = _state_notice(description.group_id, description.state, 1)
    if not show:
        return _unshown(description.state, notice)
    c = description.coordinator
    coordinator = f"{c.host}:{c.port} ({c.node_id})"
    width = max(25, len(coordinator))

    def line(*cells: object) -> str:
        g, co, strategy, state, count = (str(x) for x in cells)
        return f"{g:<{width}} {co:<25} {strategy:<20} {state:<15} {count}"

    return notice, "\n".join(["", line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                              line(description.group_id, coordinator, description.partition_assignor,
                                   description.state, len(description.members))]) + "\n"


# ---------------------------------------------------------------------- reset


def parse_topic_arguments(items: Sequence[str]) -> list[tuple[str, list[int]]]:
    """--topic t or t:0,1,2 (Kafka's parseTopicPartitionsToReset)."""
    parsed = []
    for item in items:
        topic, sep, parts = item.partition(":")
        if not topic:
            raise UsageError(f"Invalid --topic value {item!r}")
        try:
            parsed.append((topic, [int(p) for p in parts.split(",")] if sep else []))
        except ValueError:
            raise UsageError(f"Invalid partitions in --topic {item!r}: a comma separated list of numbers") from None
    return parsed


def parse_datetime_ms(text: str) -> int:
    """Kafka's Utils.getDateTime: 'YYYY-MM-DDTHH:mm:SS.sss', optionally with a zone (Z, +hh:mm); local time
    when it has none."""
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?)(Z|[+-]\d{2}:?\d{2})?", text)
    if match is None:
        raise UsageError(f"Error parsing timestamp. It does not contain a 'T' according to ISO8601 format: {text}"
                         if "T" not in text else f"Unparseable date: \"{text}\"")
    when = datetime.datetime.fromisoformat(match.group(1) + (match.group(2) or "").replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def new_offset(spec: str, value: int | None, *, current: int | None, earliest: int, latest: int,
               found: int | None = None) -> int:
    """One partition's new offset for a reset spec, kept within [earliest, latest] (Kafka's checkOffsetRange)."""
    if spec == "to_earliest":
        return earliest
    if spec == "to_latest":
        return latest
    if spec == "to_datetime":
        return latest if found is None else found
    if spec == "shift_by":
        if current is None:
            raise GroupCommandError("Cannot shift offset since there is no current committed offset")
        assert value is not None
        target = current + value
    else:
        assert value is not None
        target = value
    return min(max(target, earliest), latest)


def format_reset(group: str, offsets: Mapping[TopicPartition, int]) -> str:
    if not offsets:
        return ""
    line = "{:<30} {:<30} {:<10} {:<15}".format
    return "\n".join(["", line("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
                     + [line(group, tp.topic, tp.partition, offset) for tp, offset in
                        sorted(offsets.items(), key=lambda item: (item[0].topic, item[0].partition))])


def _reset(admin: Admin, servers: str, args: argparse.Namespace) -> None:
    group = args.group[0]
    (description,) = admin.describe_consumer_groups([group])
    if description.state not in ("Empty", "Dead"):
        raise GroupCommandError(f"Assignments can only be reset if the group '{group}' is inactive, but the current"
                                f" state is {description.state}.")
    committed = {} if description.state == "Dead" else admin.list_consumer_group_offsets(group)
    partitions = _partitions_to_reset(admin, args, committed)
    spec = next(s for s in RESET_SPECS if getattr(args, s) not in (None, False))
    consumer = Consumer(bootstrap_servers=servers, client_id="minibroker-consumer-groups", enable_auto_commit=False,
                        request_timeout_ms=args.timeout, default_api_timeout_ms=args.timeout)
    try:
        earliest = consumer.beginning_offsets(partitions)
        latest = consumer.end_offsets(partitions)
        found: dict[TopicPartition, int | None] = {}
        if spec == "to_datetime":
            at = parse_datetime_ms(args.to_datetime)
            found = {tp: (o.offset if o else None) for tp, o in consumer.offsets_for_times(
                dict.fromkeys(partitions, at)).items()}
    finally:
        consumer.close(autocommit=False)
    value = getattr(args, spec) if spec in ("to_offset", "shift_by") else None
    offsets = {}
    for tp in partitions:
        current = committed.get(tp)
        try:
            offsets[tp] = new_offset(spec, value, current=current.offset if current else None,
                                     earliest=earliest[tp], latest=latest[tp], found=found.get(tp))
        except GroupCommandError as e:
            raise GroupCommandError(f"{e} for partition {tp.topic}-{tp.partition}") from None
    if args.execute:
        admin.alter_consumer_group_offsets(group, {tp: OffsetAndMetadata(o) for tp, o in offsets.items()})
    elif not args.dry_run:
        print(_NO_EXECUTE)
    print(format_reset(group, offsets))


def _partitions_to_reset(admin: Admin, args: argparse.Namespace,
                         committed: Mapping[TopicPartition, OffsetAndMetadata]) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    topics = parse_topic_arguments(args.topic)
    described = {d.name: d for d in admin.describe_topics([t for t, parts in topics if not parts])} \
        if any(not parts for _, parts in topics) else {}
    partitions = []
    for topic, parts in topics:
        if parts:
            partitions += [TopicPartition(topic, p) for p in parts]
        elif topic in described:
            partitions += [TopicPartition(topic, p.partition) for p in described[topic].partitions]
        else:
            raise GroupCommandError(f"The topic {topic} does not exist")
    return partitions


# ---------------------------------------------------------------------- delete


def _delete(admin: Admin, groups: Sequence[str], timeout_ms: int) -> int:
    results = admin.delete_consumer_groups(groups, timeout_ms)
    print(format_delete(results))
    return 0 if all(code is ErrorCode.NONE for code in results.values()) else 1


def format_delete(results: Mapping[str, ErrorCode]) -> str:
    ok = [g for g, code in results.items() if code is ErrorCode.NONE]
    failed = {g: code for g, code in results.items() if code is not ErrorCode.NONE}
    if not failed:
        return f"Deletion of requested consumer groups ({_quoted(ok)}) was successful."
    lines = ["", "Error: Deletion of some consumer groups failed:"]
    lines += [f"* Group '{g}' could not be deleted due to: {code.name}: {_ERROR_TEXTS.get(code, code.name)}"
              for g, code in failed.items()]
    if ok:
        lines += ["", f"These consumer groups were deleted successfully: {_quoted(ok)}"]
    return "\n".join(lines)


def _quoted(groups: Iterable[str]) -> str:
    return ", ".join(f"'{g}'" for g in groups)


# ---------------------------------------------------------------------- delete offsets


def _delete_offsets(admin: Admin, group: str, topic_args: Sequence[str]) -> int:
    """ConsumerGroupService.deleteOffsets: a topic named without partitions stands for all of them (a topic
    that cannot be described gets a row of its own, partition "Not Provided")."""
    statuses: dict[TopicPartition, str | None] = {}  # None: deleted
    partitions: list[TopicPartition] = []
    for topic, parts in parse_topic_arguments(topic_args):
        if parts:
            partitions += [TopicPartition(topic, p) for p in parts]
            continue
        try:
            (described,) = admin.describe_topics([topic])
        except KafkaError as e:
            statuses[TopicPartition(topic, -1)] = f"{e.code.name}: Topic {topic} not found." \
                if e.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else _error_text(e.code)
        else:
            partitions += [TopicPartition(topic, p.partition) for p in described.partitions]
    try:
        errors = admin.delete_consumer_group_offsets(group, partitions)
        # As Java's DeleteConsumerGroupOffsetsResult.all(): the first partition that failed.
        error = next((errors[tp] for tp in partitions if errors.get(tp, ErrorCode.NONE) is not ErrorCode.NONE),
                     ErrorCode.NONE)
    except KafkaError as e:  # a group error: every partition failed with it
        error, errors = e.code, dict.fromkeys(partitions, e.code)
    statuses.update({tp: None if code is ErrorCode.NONE else _error_text(code) for tp, code in errors.items()})
    print(format_delete_offsets(group, topic_args, error, statuses))
    return 0 if error is ErrorCode.NONE and all(s is None for s in statuses.values()) else 1


def _error_text(code: ErrorCode) -> str:
    return f"{code.name}: {_ERROR_TEXTS.get(code, code.name)}"


def format_delete_offsets(group: str, topics: Sequence[str], error: ErrorCode,
                          statuses: Mapping[TopicPartition, str | None]) -> str:
    """The request's outcome, then TOPIC PARTITION STATUS per partition ("Successful" or "Error: ...")."""
    if error is ErrorCode.NONE:
        lines = [f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}"]
    else:
        lines = ["", "Error: " + _DELETE_OFFSETS_ERRORS.get(error, "Encounter some unknown error: {error}").format(
            group=group, error=error.name)]
    row = "{:<30} {:<15} {:<15}".format
    lines += ["", row("TOPIC", "PARTITION", "STATUS")]
    # Kafka sorts on the topic and the partition's digits as one string.
    for tp, status in sorted(statuses.items(), key=lambda item: item[0].topic + str(item[0].partition)):
        lines.append(row(tp.topic, tp.partition if tp.partition >= 0 else "Not Provided",
                         "Successful" if status is None else f"Error: {status}"))
    return "\n".join(lines)

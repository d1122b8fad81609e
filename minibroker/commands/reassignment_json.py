"""What `minibroker reassign-partitions` reads, checks and prints (Kafka's ReassignPartitionsCommand, 2.6+ texts).
Pure functions: the command does the ZooKeeper I/O.

The reassignment file is Kafka's: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]},
optionally with "log_dirs" per partition, of which only "any" can be honoured here (the brokers have one log
directory each). Bad input raises KafkaError with Kafka's message and the matching error code.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from common.assignment import assign_replicas_to_brokers
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from zk.paths import NO_LEADER, ReplicaAssignment

EARLIEST_VERSION = 1
ANY_LOG_DIR = "any"

PartitionReassignments = dict[TopicPartition, tuple[int, ...]]


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise KafkaError("The input string is not a valid JSON", ErrorCode.INVALID_REQUEST)
    version = value.get("version", EARLIEST_VERSION)
    if version != EARLIEST_VERSION:
        raise KafkaError(f"Not supported version field value {version}", ErrorCode.INVALID_REQUEST)
    return value


def _list(value: object, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise KafkaError(f"{what} must be a JSON array, not {json.dumps(value)}", ErrorCode.INVALID_REQUEST)
    return value


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise KafkaError(f"{what} must be an integer, not {json.dumps(value)}", ErrorCode.INVALID_REQUEST)
    return value


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise KafkaError(f"{what} must be a string, not {json.dumps(value)}", ErrorCode.INVALID_REQUEST)
    return value


def parse_partition_reassignment_data(text: str) -> list[tuple[TopicPartition, tuple[int, ...]]]:
    """The file's partitions in its order, duplicates kept so that they can be reported."""
    entries = []
    for entry in _list(_json_object(text).get("partitions", []), '"partitions"'):
        if not isinstance(entry, dict):
            raise KafkaError(f"a partition must be a JSON object, not {json.dumps(entry)}", ErrorCode.INVALID_REQUEST)
        try:
            tp = TopicPartition(_str(entry["topic"], '"topic"'), _int(entry["partition"], '"partition"'))
            replicas = tuple(_int(r, "a replica") for r in _list(entry["replicas"], '"replicas"'))
        except KeyError as e:
            message = f"a partition has no {e.args[0]!r}: {json.dumps(entry)}"
            raise KafkaError(message, ErrorCode.INVALID_REQUEST) from None
        log_dirs = _list(entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas)), '"log_dirs"')
        if len(log_dirs) != len(replicas):
            raise KafkaError(
                f"Size of replicas list {list(replicas)} is different from size of log dirs list {log_dirs} for "
                f"partition {tp}",
                ErrorCode.INVALID_REQUEST,
            )
        if any(d != ANY_LOG_DIR for d in log_dirs):
            raise KafkaError(
                f"Moving replicas between log directories is not supported: the log_dirs of {tp} must be "
                f'"{ANY_LOG_DIR}"',
                ErrorCode.INVALID_REQUEST,
            )
        entries.append((tp, replicas))
    return entries


def _duplicates(items: Iterable[Any]) -> list[Any]:
    return [item for item, count in Counter(items).items() if count > 1]


def validated_reassignments(entries: Sequence[tuple[TopicPartition, tuple[int, ...]]]) -> PartitionReassignments:
    """Kafka's parseExecuteAssignmentArgs checks."""
    if not entries:
        raise KafkaError("Partition reassignment list cannot be empty", ErrorCode.INVALID_REQUEST)
    if any(not replicas for _, replicas in entries):
        raise KafkaError("Partition replica list cannot be empty", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    duplicate_partitions = _duplicates(tp for tp, _ in entries)
    if duplicate_partitions:
        raise KafkaError(
            f"Partition reassignment contains duplicate topic partitions: {','.join(map(str, duplicate_partitions))}",
            ErrorCode.INVALID_REQUEST,
        )
    duplicate_replicas = [(tp, _duplicates(replicas)) for tp, replicas in entries if _duplicates(replicas)]
    if duplicate_replicas:
        text = ". ".join(
            f"{tp} contains multiple entries for {','.join(map(str, d))}" for tp, d in duplicate_replicas
        )
        raise KafkaError(
            f"Partition replica lists may not contain duplicate entries: {text}", ErrorCode.INVALID_REPLICA_ASSIGNMENT
        )
    return dict(entries)


def verify_replicas_and_brokers(
    proposed: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
    broker_ids: Iterable[int],
) -> None:
    """Kafka's verifyReplicasAndBrokersInAssignment: ZooKeeper itself checks nothing. The brokers are the
    registered ones: a reassignment onto a broker that is down is refused here (the controller would wait)."""
    missing = [tp for tp in proposed if tp not in current]
    if missing:
        raise KafkaError(
            f"The proposed assignment contains non-existent partitions: {','.join(map(str, missing))}",
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        )
    registered = set(broker_ids)
    unknown = sorted({b for replicas in proposed.values() for b in replicas} - registered)
    if unknown:
        raise KafkaError(
            f"The proposed assignment contains non-existent brokerIDs: {','.join(map(str, unknown))}",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )


def format_as_reassignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, partitions by topic then partition, "log_dirs" all "any"."""
    partitions = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas),
         "log_dirs": [ANY_LOG_DIR] * len(replicas)}
        for tp, replicas in sorted(assignment.items())
    ]
    return json.dumps({"version": EARLIEST_VERSION, "partitions": partitions}, separators=(",", ":"))


def current_assignment_text(
    proposed: Mapping[TopicPartition, Sequence[int]], current: Mapping[TopicPartition, Sequence[int]]
) -> str:
    """What --execute prints before it starts: the rollback file."""
    rollback = {tp: replicas for tp, replicas in current.items() if tp in proposed}
    return (
        f"Current partition replica assignment\n\n{format_as_reassignment_json(rollback)}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback"
    )


def started_text(proposed: Iterable[TopicPartition]) -> str:
    partitions = sorted(proposed)
    plural = "" if len(partitions) == 1 else "s"
    return f"Successfully started partition reassignment{plural} for {','.join(map(str, partitions))}"


@dataclass(frozen=True)
class PartitionReassignmentState:
    """Kafka's PartitionReassignmentState: the replicas now, the ones asked for, and whether it is over."""

    current_replicas: tuple[int, ...]
    target_replicas: tuple[int, ...]
    done: bool


def find_partition_reassignment_states(
    targets: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
    in_progress: Iterable[TopicPartition],
) -> dict[TopicPartition, PartitionReassignmentState]:
    """A partition is done once it has left /admin/reassign_partitions (Kafka's ZooKeeper-based answer)."""
    running = set(in_progress)
    return {
        tp: PartitionReassignmentState(tuple(current.get(tp, ())), tuple(target), tp not in running)
        for tp, target in targets.items()
    }


def partition_reassignment_states_text(states: Mapping[TopicPartition, PartitionReassignmentState],
                                       reasons: Mapping[TopicPartition, str] | None = None) -> str:
    """Kafka's lines; a partition still in progress gets a second, indented line saying what it waits for."""
    lines = ["Status of partition reassignment:"]
    for tp, state in sorted(states.items()):
        if not state.done:
            lines.append(f"Reassignment of partition {tp} is still in progress.")
            if reasons and tp in reasons:
                lines.append(f"  {reasons[tp]}")
        elif state.current_replicas == state.target_replicas:
            lines.append(f"Reassignment of partition {tp} is complete.")
        else:
            lines.append(
                f"There is no active reassignment of partition {tp}, but replica set is "
                f"{','.join(map(str, state.current_replicas))} rather than {','.join(map(str, state.target_replicas))}."
            )
    return "\n".join(lines)


def waiting_reason(assignment: ReplicaAssignment | None, leader: int, isr: Sequence[int],
                   live_brokers: Collection[int]) -> str:
    """Why a reassignment the request znode still holds is not finished, from what ZooKeeper shows.

    The controller completes a reassignment once every target replica is in the ISR, so the answer names the
    target replicas outside it and, for each, whether its broker is down or alive but not caught up (then
    its fetches fail or lag: its own log says why). A paused broker counts as alive until its session expires.
    """
    if assignment is None:
        return "The topic's assignment is gone (was the topic deleted?)."
    if not assignment.is_being_reassigned:
        return "Not started by the controller yet (is a controller running?)."
    missing = [r for r in assignment.target_replicas if r not in isr]
    if not missing:
        return "Every target replica is in the ISR: the controller is completing it."
    why = []
    for replica in missing:
        if replica not in live_brokers:
            why.append(f"broker {replica} is not alive (not registered in ZooKeeper)")
        elif leader == NO_LEADER:
            why.append(f"broker {replica} is alive but the partition has no leader to fetch from")
        else:
            why.append(f"broker {replica} is alive but its replica has not caught up with leader {leader}"
                       f" (its fetches fail or lag: see broker {replica}'s log)")
    return (f"Waiting for target replica{'s' if len(missing) > 1 else ''} {','.join(map(str, missing))} to join the"
            f" ISR [{','.join(map(str, isr))}]: {'; '.join(why)}.")


# --- --cancel ---


def cancelled_text(cancelled: Iterable[TopicPartition]) -> str:
    partitions = sorted(cancelled)
    plural = "" if len(partitions) == 1 else "s"
    return f"Successfully cancelled partition reassignment{plural} for: {','.join(map(str, partitions))}"


def not_cancelled_error(partitions: Iterable[TopicPartition]) -> KafkaError:
    """Kafka's answer for partitions --cancel names that have no reassignment running."""
    tps = sorted(partitions)
    lines = "\n".join(f"{tp}: No reassignment in progress for partition {tp}." for tp in tps)
    return KafkaError(f"Error cancelling partition reassignment{'' if len(tps) == 1 else 's'} for:\n{lines}",
                      ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)


# --- --generate ---


def parse_topics_data(text: str) -> list[str]:
    """{"version":1,"topics":[{"topic":"foo"},{"topic":"foo1"}]}; duplicates are refused."""
    topics = []
    for entry in _list(_json_object(text).get("topics", []), '"topics"'):
        if not isinstance(entry, dict) or "topic" not in entry:
            raise KafkaError(f'a topic must be {{"topic": NAME}}, not {json.dumps(entry)}', ErrorCode.INVALID_REQUEST)
        topics.append(_str(entry["topic"], '"topic"'))
    duplicates = _duplicates(topics)
    if duplicates:
        raise KafkaError(
            f"List of topics to reassign contains duplicate entries: {','.join(duplicates)}", ErrorCode.INVALID_REQUEST
        )
    return topics


def parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",")]
    except ValueError:
        raise KafkaError(f"--broker-list must be broker ids separated by commas, not {text!r}",
                         ErrorCode.INVALID_REQUEST) from None
    duplicates = _duplicates(brokers)
    if duplicates:
        raise KafkaError(
            f"Broker list contains duplicate entries: {','.join(map(str, duplicates))}", ErrorCode.INVALID_REQUEST
        )
    return brokers


def calculate_assignment(
    current: Mapping[TopicPartition, Sequence[int]], broker_ids: Sequence[int], rng: random.Random | None = None
) -> PartitionReassignments:
    """Kafka's calculateAssignment: each topic's partitions spread over the brokers with its replication factor
    (that of its first partition), as topic creation spreads them (rack-unaware)."""
    proposed: PartitionReassignments = {}
    topics = sorted({tp.topic for tp in current})
    for topic in topics:
        partitions = sorted(tp for tp in current if tp.topic == topic)
        replication_factor = len(current[partitions[0]])
        assigned = assign_replicas_to_brokers(len(partitions), replication_factor, sorted(broker_ids), rng=rng)
        proposed.update({TopicPartition(topic, p): tuple(replicas) for p, replicas in assigned.items()})
    return proposed

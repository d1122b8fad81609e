"""`reassign-partitions` input, checks and output (Kafka's ReassignPartitionsCommand): Kafka's file formats and
messages, an error code for every refusal."""

from __future__ import annotations

import json
import random

import pytest

from minibroker.commands.reassignment_json import (
    PartitionReassignmentState,
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
from zk.paths import NO_LEADER, ReplicaAssignment

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
U0 = TopicPartition("u", 0)


def refused(code: ErrorCode, message: str) -> pytest.RaisesContext[KafkaError]:
    return pytest.raises(KafkaError, match=f"^{code.name}: {message}$")


def test_kafkas_file_is_read_in_order_with_duplicates_kept() -> None:
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 1, "replicas": [2, 3, 4]},
        {"topic": "t", "partition": 0, "replicas": [4, 3], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 1, "replicas": [1]},
    ]})
    assert parse_partition_reassignment_data(text) == [(T1, (2, 3, 4)), (T0, (4, 3)), (T1, (1,))]
    # The version may be left out (Kafka's EarliestVersion).
    assert parse_partition_reassignment_data('{"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}') == [
        (T0, (1,))
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "The input string is not a valid JSON"),
        ("[1]", "The input string is not a valid JSON"),
        ('{"version":2,"partitions":[]}', "Not supported version field value 2"),
        ('{"version":1,"partitions":[{"topic":"t","partition":0}]}',
         """a partition has no 'replicas': {"topic": "t", "partition": 0}"""),
        ('{"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}', '"partition" must be an integer, not "0"'),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
         r"Size of replicas list \[1, 2\] is different from size of log dirs list \['any'\] for partition t-0"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/data"]}]}',
         'Moving replicas between log directories is not supported: the log_dirs of t-0 must be "any"'),
    ],
)
def test_malformed_files_are_refused(text: str, message: str) -> None:
    with refused(ErrorCode.INVALID_REQUEST, message):
        parse_partition_reassignment_data(text)


@pytest.mark.parametrize(
    ("entries", "code", "message"),
    [
        ([], ErrorCode.INVALID_REQUEST, "Partition reassignment list cannot be empty"),
        ([(T0, ())], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partition replica list cannot be empty"),
        ([(T0, (1,)), (T1, (2,)), (T0, (3,))], ErrorCode.INVALID_REQUEST,
         "Partition reassignment contains duplicate topic partitions: t-0"),
        ([(T0, (1, 2, 1)), (T1, (2, 2, 3, 3))], ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1. "
         "t-1 contains multiple entries for 2,3"),
    ],
)
def test_execute_refuses_what_kafka_refuses(
    entries: list[tuple[TopicPartition, tuple[int, ...]]], code: ErrorCode, message: str
) -> None:
    with refused(code, message):
        validated_reassignments(entries)


def test_partitions_and_brokers_must_exist() -> None:
    current = {T0: (1, 2, 3), T1: (2, 3, 1)}
    verify_replicas_and_brokers({T0: (2, 3, 4)}, current, [1, 2, 3, 4])
    with refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The proposed assignment contains non-existent partitions: u-0"):
        verify_replicas_and_brokers({T0: (2, 3, 4), U0: (1,)}, current, [1, 2, 3, 4])
    with refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The proposed assignment contains non-existent brokerIDs: 5,7"):
        verify_replicas_and_brokers({T0: (7, 2, 5), T1: (5, 1, 2)}, current, [1, 2, 3, 4])


def test_execute_prints_the_rollback_file_and_what_started() -> None:
    text = current_assignment_text({T0: (2, 3, 4)}, {T0: (1, 2, 3), T1: (2, 3, 1)})
    assert text == (
        "Current partition replica assignment\n\n"
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}'
        "\n\nSave this to use as the --reassignment-json-file option during rollback"
    )
    # The rollback file is a valid reassignment file.
    rollback = text.split("\n\n")[1]
    assert parse_partition_reassignment_data(rollback) == [(T0, (1, 2, 3))]
    assert started_text([T0]) == "Successfully started partition reassignment for t-0"
    assert started_text([U0, T1, T0]) == "Successfully started partition reassignments for t-0,t-1,u-0"


def test_verify_reports_each_partition() -> None:
    states = find_partition_reassignment_states(
        {T0: (2, 3, 4), T1: (3, 4, 1), U0: (4,)},
        {T0: (2, 3, 4), T1: (3, 4, 1, 2), U0: (1,)},
        in_progress=[T1],
    )
    assert states[T1] == PartitionReassignmentState((3, 4, 1, 2), (3, 4, 1), done=False)
    assert partition_reassignment_states_text(states).splitlines() == [
        "Status of partition reassignment:",
        "Reassignment of partition t-0 is complete.",
        "Reassignment of partition t-1 is still in progress.",
        "There is no active reassignment of partition u-0, but replica set is 1 rather than 4.",
    ]


def test_generate_spreads_each_topic_over_the_brokers_with_its_replication_factor() -> None:
    assert parse_topics_data('{"topics":[{"topic":"t"},{"topic":"u"}],"version":1}') == ["t", "u"]
    with refused(ErrorCode.INVALID_REQUEST, "List of topics to reassign contains duplicate entries: t"):
        parse_topics_data('{"topics":[{"topic":"t"},{"topic":"t"}]}')
    assert parse_broker_list("4,2,3") == [4, 2, 3]
    with refused(ErrorCode.INVALID_REQUEST, "Broker list contains duplicate entries: 2"):
        parse_broker_list("2,3,2")
    with refused(ErrorCode.INVALID_REQUEST, "--broker-list must be broker ids separated by commas, not '2,x'"):
        parse_broker_list("2,x")

    current = {T0: (1, 2, 3), T1: (2, 3, 1), U0: (1,)}
    proposed = calculate_assignment(current, [4, 3, 2], rng=random.Random(7))
    assert sorted(proposed) == [T0, T1, U0]
    assert all(len(proposed[tp]) == len(current[tp]) and set(proposed[tp]) <= {2, 3, 4} for tp in proposed)
    assert all(len(set(replicas)) == len(replicas) for replicas in proposed.values())
    assert proposed[T0][0] != proposed[T1][0]  # leaders spread, as topic creation spreads them
    assert format_as_reassignment_json({U0: (3,)}) == (
        '{"version":1,"partitions":[{"topic":"u","partition":0,"replicas":[3],"log_dirs":["any"]}]}'
    )


def test_waiting_reason_names_the_target_replicas_outside_the_isr_and_why() -> None:
    moving = ReplicaAssignment((2, 3, 4, 5, 1), adding_replicas=(4, 5), removing_replicas=(1,))
    assert waiting_reason(moving, 1, (1, 2, 3), live_brokers={1, 2, 3, 5}) == (
        "Waiting for target replicas 4,5 to join the ISR [1,2,3]: broker 4 is not alive (not registered in"
        " ZooKeeper); broker 5 is alive but its replica has not caught up with leader 1 (its fetches fail or lag:"
        " see broker 5's log).")
    assert waiting_reason(moving, NO_LEADER, (), live_brokers={4, 5}).endswith(
        "broker 4 is alive but the partition has no leader to fetch from; broker 5 is alive but the partition has"
        " no leader to fetch from.")
    assert waiting_reason(moving, 1, (1, 2, 3, 4, 5), {1, 2, 3, 4, 5}).startswith("Every target replica is in")
    assert waiting_reason(ReplicaAssignment((1, 2)), 1, (1, 2), {1, 2}).startswith("Not started by the controller")
    assert waiting_reason(None, NO_LEADER, (), set()).startswith("The topic's assignment is gone")


def test_cancel_texts() -> None:
    assert cancelled_text([TopicPartition("b", 0), TopicPartition("a", 1)]) == (
        "Successfully cancelled partition reassignments for: a-1,b-0")
    error = not_cancelled_error([TopicPartition("a", 1)])
    assert error.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert error.message == "Error cancelling partition reassignment for:\na-1: No reassignment in progress for" \
                            " partition a-1."

"""`minibroker consumer-groups` prints Kafka's ConsumerGroupCommand tables and messages, and computes reset offsets
as Kafka does (pure functions; the command against a cluster is
tests/integration/groups/test_client_consumer_groups.py)."""

from __future__ import annotations

import datetime

import pytest

from client.group_admin import ConsumerGroupDescription, MemberDescription
from client.structs import BrokerMetadata, OffsetAndMetadata
from minibroker.commands.client_options import UsageError
from minibroker.commands.consumer_groups import (
    GroupCommandError,
    format_assignment,
    format_delete,
    format_delete_offsets,
    format_members,
    format_offsets,
    format_reset,
    format_state,
    format_state_list,
    new_offset,
    offset_rows,
    parse_datetime_ms,
    parse_topic_arguments,
)
from proto.errors import ErrorCode
from proto.types import TopicPartition

COORDINATOR = BrokerMetadata(2, "127.0.0.1", 9192)
T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def group(state: str = "Stable", members: tuple[MemberDescription, ...] = ()) -> ConsumerGroupDescription:
    return ConsumerGroupDescription("g", False, members, "range" if members else "", state, COORDINATOR)


A = MemberDescription("consumer-a-1234", None, "consumer-a", "/127.0.0.1", (T1, T0))


def test_describe_offsets_is_kafkas_table_with_member_rows_then_committed_only_rows() -> None:
    rows = offset_rows(group(members=(A,)), {T0: OffsetAndMetadata(3), U0: OffsetAndMetadata(9)}, {T0: 5, T1: 8, U0: 9})
    err, out = format_offsets("g", "Stable", rows)
    assert err == ""
    assert out.split("\n") == [
        "",
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID    "
        " HOST            CLIENT-ID",
        "g               t               0          3               5               2               consumer-a-1234"
        " /127.0.0.1      consumer-a",
        "g               t               1          -               8               -               consumer-a-1234"
        " /127.0.0.1      consumer-a",
        "g               u               0          9               9               0               -              "
        " -               -",
        "",
    ]


def test_columns_widen_to_the_longest_value() -> None:
    long = MemberDescription("m" * 20, None, "c", "/10.0.0.1", (TopicPartition("a-very-long-topic-name", 0),))
    _, out = format_offsets("g", "Stable", offset_rows(group(members=(long,)), {}, {}))
    header, row = out.split("\n")[1:3]
    assert header.index("PARTITION") == row.index(" 0 ") + 1 == len("GROUP           a-very-long-topic-name ")


@pytest.mark.parametrize(("state", "stderr"), [
    ("Empty", "\nConsumer group 'g' has no active members."),
    ("PreparingRebalance", "\nWarning: Consumer group 'g' is rebalancing."),
    ("CompletingRebalance", "\nWarning: Consumer group 'g' is rebalancing."),
])
def test_a_group_not_stable_is_said_on_stderr(state: str, stderr: str) -> None:
    rows = offset_rows(group(state), {T0: OffsetAndMetadata(1)}, {T0: 1})
    err, out = format_offsets("g", state, rows)
    assert err == stderr and "GROUP" in out


def test_a_dead_group_does_not_exist_on_stdout() -> None:
    assert format_offsets("g", "Dead", []) == ("", "\nError: Consumer group 'g' does not exist.")
    assert format_members(group("Dead"), verbose=False) == ("", "\nError: Consumer group 'g' does not exist.")
    assert format_state(group("Dead")) == ("", "\nError: Consumer group 'g' does not exist.")


def test_an_empty_group_without_offsets_prints_no_table() -> None:
    assert format_offsets("g", "Empty", []) == ("\nConsumer group 'g' has no active members.", "")


def test_members_verbose_lists_each_members_partitions() -> None:
    b = MemberDescription("consumer-b-5678", None, "consumer-b", "/127.0.0.1", ())
    _, out = format_members(group(members=(A, b)), verbose=True)
    assert out.split("\n")[1:4] == [
        "GROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     ASSIGNMENT",
        "g               consumer-a-1234 /127.0.0.1      consumer-a      2               t(0,1)",
        "g               consumer-b-5678 /127.0.0.1      consumer-b      0               -",
    ]


def test_members_shows_group_instance_ids_when_a_member_has_one() -> None:
    static = MemberDescription("i-1-abc", "instance-1", "c", "/h", (T0,))
    _, out = format_members(group(members=(static,)), verbose=False)
    assert out.split("\n")[1].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                                          "#PARTITIONS"]
    assert out.split("\n")[2].split() == ["g", "i-1-abc", "instance-1", "/h", "c", "1"]


def test_state_names_the_coordinator_strategy_and_member_count() -> None:
    _, out = format_state(group(members=(A,)))
    assert out.split("\n")[1:3] == [
        "GROUP                     COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS",
        "g                         127.0.0.1:9192 (2)        range                Stable          1",
    ]


def test_list_with_state() -> None:
    assert format_state_list([("g", "Stable"), ("other", "Empty")]).split("\n") == [
        "GROUP           STATE", "g               Stable", "other           Empty"]


def test_assignment_text_groups_by_topic_sorted() -> None:
    assert format_assignment([U0, T1, T0]) == "t(0,1), u(0)"
    assert format_assignment([]) == "-"


def test_reset_offsets_table() -> None:
    assert format_reset("g", {T1: 4, T0: 7}).split("\n") == [
        "",
        "GROUP                          TOPIC                          PARTITION  NEW-OFFSET     ",
        "g                              t                              0          7              ",
        "g                              t                              1          4              ",
    ]


@pytest.mark.parametrize(("spec", "value", "current", "found", "expected"), [
    ("to_earliest", None, 50, None, 10),
    ("to_latest", None, 50, None, 100),
    ("to_offset", 60, None, None, 60),
    ("to_offset", 500, None, None, 100),  # past the end: the log end
    ("to_offset", 2, None, None, 10),  # below the start: the log start
    ("shift_by", -5, 50, None, 45),
    ("shift_by", -100, 50, None, 10),
    ("shift_by", 80, 50, None, 100),
    ("to_datetime", None, None, 42, 42),
    ("to_datetime", None, None, None, 100),  # no record that recent: the log end
])
def test_new_offsets_stay_within_the_log(spec: str, value: int | None, current: int | None, found: int | None,
                                         expected: int) -> None:
    assert new_offset(spec, value, current=current, earliest=10, latest=100, found=found) == expected


def test_shift_by_needs_a_committed_offset() -> None:
    with pytest.raises(GroupCommandError, match="no current committed offset"):
        new_offset("shift_by", 1, current=None, earliest=0, latest=10)


def test_topic_arguments_with_and_without_partitions() -> None:
    assert parse_topic_arguments(["t", "u:0,2"]) == [("t", []), ("u", [0, 2])]
    with pytest.raises(UsageError):
        parse_topic_arguments(["u:x"])


def test_datetimes_as_kafka_reads_them() -> None:
    assert parse_datetime_ms("2024-01-02T03:04:05.678Z") == int(datetime.datetime(
        2024, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC).timestamp() * 1000)
    assert parse_datetime_ms("2024-01-02T03:04:05.000+02:00") == parse_datetime_ms("2024-01-02T01:04:05Z")
    with pytest.raises(UsageError, match="does not contain a 'T'"):
        parse_datetime_ms("2024-01-02 03:04:05")


def test_delete_reports_each_group() -> None:
    assert format_delete({"a": ErrorCode.NONE, "b": ErrorCode.NONE}) == \
        "Deletion of requested consumer groups ('a', 'b') was successful."
    assert format_delete({"a": ErrorCode.NONE, "b": ErrorCode.NON_EMPTY_GROUP}).split("\n") == [
        "",
        "Error: Deletion of some consumer groups failed:",
        "* Group 'b' could not be deleted due to: NON_EMPTY_GROUP: The group is not empty.",
        "",
        "These consumer groups were deleted successfully: 'a'",
    ]


def test_delete_offsets_reports_the_request_then_each_partition() -> None:
    ok = format_delete_offsets("g", ["orders:0,1", "events"], ErrorCode.NONE, {
        TopicPartition("orders", 1): None, TopicPartition("orders", 0): None, TopicPartition("events", 0): None})
    assert ok.split("\n") == [
        "Request succeed for deleting offsets with topic orders:0,1, events group g",
        "",
        f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}",
        f"{'events':<30} {'0':<15} {'Successful':<15}",
        f"{'orders':<30} {'0':<15} {'Successful':<15}",
        f"{'orders':<30} {'1':<15} {'Successful':<15}",
    ]
    subscribed = "GROUP_SUBSCRIBED_TO_TOPIC: Deleting offsets of a topic is forbidden while the consumer group is" \
                 " actively subscribed to it."
    partly = format_delete_offsets("g", ["orders", "gone"], ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, {
        TopicPartition("orders", 0): subscribed, TopicPartition("gone", -1): "UNKNOWN_TOPIC_OR_PARTITION: Topic gone"
                                                                              " not found."})
    assert [line.rstrip() for line in partly.split("\n")] == [
        "",
        "Error: Encounter some partition level error, see the follow-up details:",
        "",
        f"{'TOPIC':<30} {'PARTITION':<15} STATUS",
        f"{'gone':<30} {'Not Provided':<15} Error: UNKNOWN_TOPIC_OR_PARTITION: Topic gone not found.",
        f"{'orders':<30} {'0':<15} Error: {subscribed}",
    ]
    for error, first in [(ErrorCode.GROUP_ID_NOT_FOUND, "Error: 'g' does not exist."),
                         (ErrorCode.NON_EMPTY_GROUP, "Error: Deleting offsets of a consumer group 'g' is forbidden"
                                                     " if the group is not empty."),
                         (ErrorCode.GROUP_AUTHORIZATION_FAILED, "Error: Access to 'g' is not authorized."),
                         (ErrorCode.REQUEST_TIMED_OUT, "Error: Encounter some unknown error: REQUEST_TIMED_OUT")]:
        assert format_delete_offsets("g", ["orders"], error, {}).split("\n")[1] == first

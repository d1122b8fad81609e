"""Which offsets the `minibroker` source plans to read: the JVM connector's rules, without Spark or a cluster."""

from __future__ import annotations

import pytest

from spark_jobs.kafka_planning import (
    OffsetRange,
    cap,
    from_json,
    never_back,
    offset_ranges,
    rate_limit,
    resolve_offsets,
    split_ranges,
    to_json,
)

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def test_offsets_round_trip_through_the_connectors_json() -> None:
    offsets = {A1: 7, A0: 3, B0: 0}
    assert to_json(offsets) == {"a": {"0": 3, "1": 7}, "b": {"0": 0}}
    assert from_json(to_json(offsets)) == offsets


def test_resolve_earliest_latest_and_specific_offsets_with_sentinels() -> None:
    earliest, latest = {A0: 5, A1: 0}, {A0: 50, A1: 40}
    assert resolve_offsets("earliest", [A0, A1], earliest, latest, "startingOffsets") == earliest
    assert resolve_offsets("latest", [A0, A1], earliest, latest, "startingOffsets") == latest
    assert resolve_offsets({A0: -2, A1: -1}, [A0, A1], earliest, latest, "startingOffsets") == {A0: 5, A1: 40}
    assert resolve_offsets({A0: 9, A1: -2}, [A0, A1], earliest, latest, "startingOffsets") == {A0: 9, A1: 0}


def test_specific_offsets_must_name_every_partition() -> None:
    with pytest.raises(ValueError, match="you must specify all TopicPartitions"):
        resolve_offsets({A0: 1}, [A0, A1], {A0: 0, A1: 0}, {A0: 9, A1: 9}, "startingOffsets")


def test_ranges_from_start_to_end_and_new_partitions_from_their_earliest() -> None:
    ranges, losses = offset_ranges({A0: 3}, {A0: 10, A1: 4}, {A1: 0})
    assert ranges == [OffsetRange("a", 0, 3, 10), OffsetRange("a", 1, 0, 4)]
    assert losses == []


def test_planning_reports_a_new_partition_not_starting_at_zero_a_gone_one_and_offsets_going_back() -> None:
    ranges, losses = offset_ranges({A0: 30, B0: 5}, {A0: 10, A1: 8}, {A1: 2})
    assert ranges == [OffsetRange("a", 1, 2, 8)]
    assert losses == ["Added partition a-1 starts from 2 instead of 0. Some data may have been missed",
                      "b-0 are gone. Some data may have been missed",
                      "Partition a-0's offset was changed from 30 to 10, some data may have been missed"]


def test_min_partitions_splits_large_ranges_in_proportion() -> None:
    ranges = [OffsetRange("a", 0, 0, 100), OffsetRange("a", 1, 0, 20), OffsetRange("b", 0, 5, 5)]
    split = split_ranges(ranges, 6)
    # a-0 holds 100/120 of the records: round(5.0) = 5 parts; a-1 round(1.0) = 1 part; the empty range none.
    assert split == [OffsetRange("a", 0, 0, 20), OffsetRange("a", 0, 20, 40), OffsetRange("a", 0, 40, 60),
                     OffsetRange("a", 0, 60, 80), OffsetRange("a", 0, 80, 100), OffsetRange("a", 1, 0, 20)]


def test_without_min_partitions_or_with_enough_ranges_one_task_per_non_empty_range() -> None:
    ranges = [OffsetRange("a", 0, 0, 100), OffsetRange("a", 1, 3, 3)]
    assert split_ranges(ranges, None) == [OffsetRange("a", 0, 0, 100)]
    assert split_ranges(ranges, 1) == [OffsetRange("a", 0, 0, 100)]


def test_split_parts_cover_the_range_exactly_when_it_does_not_divide() -> None:
    split = split_ranges([OffsetRange("a", 0, 7, 17)], 3)
    assert [(r.from_offset, r.until_offset) for r in split] == [(7, 10), (10, 13), (13, 17)]


def test_max_offsets_per_trigger_shares_the_limit_by_backlog() -> None:
    # a-0 is 60 behind, a-1 30, b-0 10: 20 records go 12 / 6 / 2.
    limited = rate_limit(20, {A0: 0, A1: 100, B0: 0}, {A0: 60, A1: 130, B0: 10}, {})
    assert limited == {A0: 12, A1: 106, B0: 2}
    assert sum(limited[tp] - start for tp, start in {A0: 0, A1: 100, B0: 0}.items()) == 20


def test_max_offsets_per_trigger_never_starves_a_small_partition_nor_passes_the_latest() -> None:
    # b-0's share is 0.1 of a record: rounded up to one; a partition with nothing new keeps its end.
    limited = rate_limit(10, {A0: 0, A1: 5, B0: 0}, {A0: 99, A1: 5, B0: 1}, {})
    assert limited == {A0: 9, A1: 5, B0: 1}
    assert rate_limit(1000, {A0: 0}, {A0: 7}, {}) == {A0: 7}


def test_max_offsets_per_trigger_counts_a_new_partition_from_its_earliest_offset() -> None:
    assert rate_limit(10, {A0: 0}, {A0: 10, A1: 10}, {A1: 0}) == {A0: 5, A1: 5}


def test_latest_never_goes_below_the_query_position_and_available_now_caps_it() -> None:
    assert never_back({A0: 10}, {A0: 8, A1: 3}) == {A0: 10, A1: 3}
    assert cap({A0: 50, A1: 9, B0: 4}, {A0: 20, A1: 30}) == {A0: 20, A1: 9}

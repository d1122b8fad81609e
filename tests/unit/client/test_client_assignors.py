"""The range and round-robin assignors give Kafka's answers (RangeAssignorTest, RoundRobinAssignorTest)."""

from __future__ import annotations

import pytest

from client.assignors import RangeAssignor, RoundRobinAssignor, resolve_assignors
from client.consumer_protocol import Subscription
from proto.types import TopicPartition


def tps(*pairs: tuple[str, int]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t, p in pairs]


def subs(**topics: tuple[str, ...]) -> dict[str, Subscription]:
    return {member: Subscription(t) for member, t in topics.items()}


def test_range_gives_the_first_members_one_partition_more() -> None:
    got = RangeAssignor().assign({"t": 5}, subs(c1=("t",), c2=("t",)))
    assert got == {"c1": tps(("t", 0), ("t", 1), ("t", 2)), "c2": tps(("t", 3), ("t", 4))}


def test_range_splits_each_topic_on_its_own() -> None:
    # Kafka's testTwoConsumersTwoTopicsSixPartitions: each topic's first partitions go to c1.
    got = RangeAssignor().assign({"t1": 3, "t2": 3}, subs(c1=("t1", "t2"), c2=("t1", "t2")))
    assert got == {"c1": tps(("t1", 0), ("t1", 1), ("t2", 0), ("t2", 1)), "c2": tps(("t1", 2), ("t2", 2))}


def test_range_only_among_the_members_subscribed_to_the_topic() -> None:
    got = RangeAssignor().assign({"t1": 3, "t2": 2}, subs(c1=("t1",), c2=("t1", "t2"), c3=("t2",)))
    assert got == {"c1": tps(("t1", 0), ("t1", 1)), "c2": tps(("t1", 2), ("t2", 0)), "c3": tps(("t2", 1))}


def test_more_members_than_partitions_leaves_some_empty() -> None:
    got = RangeAssignor().assign({"t": 1}, subs(a=("t",), b=("t",)))
    assert got == {"a": tps(("t", 0)), "b": []}


def test_a_topic_missing_from_metadata_is_not_assigned() -> None:
    assert RangeAssignor().assign({}, subs(a=("gone",))) == {"a": []}
    assert RoundRobinAssignor().assign({}, subs(a=("gone",))) == {"a": []}


def test_round_robin_deals_all_partitions_in_turn() -> None:
    # Kafka's testTwoConsumersTwoTopicsSixPartitions for round robin.
    got = RoundRobinAssignor().assign({"t1": 3, "t2": 3}, subs(c1=("t1", "t2"), c2=("t1", "t2")))
    assert got == {"c1": tps(("t1", 0), ("t1", 2), ("t2", 1)), "c2": tps(("t1", 1), ("t2", 0), ("t2", 2))}


def test_round_robin_skips_members_not_subscribed() -> None:
    # Kafka's testMultipleConsumersMixedTopics.
    got = RoundRobinAssignor().assign({"t1": 3, "t2": 2},
                                      subs(c0=("t1",), c1=("t1", "t2"), c2=("t1",)))
    assert got == {"c0": tps(("t1", 0)), "c1": tps(("t1", 1), ("t2", 0), ("t2", 1)), "c2": tps(("t1", 2))}


def test_members_are_ordered_by_member_id_not_by_arrival() -> None:
    first = RangeAssignor().assign({"t": 2}, {"b": Subscription(("t",)), "a": Subscription(("t",))})
    assert first == {"a": tps(("t", 0)), "b": tps(("t", 1))}


def test_every_partition_is_assigned_exactly_once() -> None:
    members = subs(**{f"m{i}": ("x", "y") for i in range(4)})
    for assignor in (RangeAssignor(), RoundRobinAssignor()):
        got = assignor.assign({"x": 7, "y": 5}, members)
        flat = [tp for parts in got.values() for tp in parts]
        assert sorted(flat) == sorted(tps(*[("x", p) for p in range(7)], *[("y", p) for p in range(5)]))
        sizes = sorted(len(parts) for parts in got.values())
        assert sizes[-1] - sizes[0] <= (1 if isinstance(assignor, RoundRobinAssignor) else 2)


def test_strategy_by_class_name_or_kafka_class_name_in_order() -> None:
    assert [a.name for a in resolve_assignors("roundrobin,range")] == ["roundrobin", "range"]
    assert [a.name for a in resolve_assignors([RangeAssignor, RoundRobinAssignor()])] == ["range", "roundrobin"]
    assert [a.name for a in resolve_assignors("org.apache.kafka.clients.consumer.RoundRobinAssignor")] == [
        "roundrobin"]
    with pytest.raises(ValueError, match=r"partition\.assignment\.strategy"):
        resolve_assignors("sticky")
    with pytest.raises(ValueError, match="twice"):
        resolve_assignors(["range", RangeAssignor])

"""Partition assignors: how a group's leader splits the subscribed topics' partitions among the members.

Kafka's RangeAssignor ("range") and RoundRobinAssignor ("roundrobin"), as plain
functions of the topics' partition counts and the members' subscriptions, so
they are unit-tested on their own and give the same answer a Java member would
(a group's leader may be any of its members). Members are ordered by member id
(Kafka's MemberInfo order for members without a group.instance.id; this client
has no static membership), which makes an assignment deterministic for a group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from client.consumer_protocol import Subscription
from proto.types import TopicPartition


class PartitionAssignor:
    """Kafka's ConsumerPartitionAssignor: `name` goes on the wire as the JoinGroup protocol name."""

    name: ClassVar[str]

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        """Every member's partitions (every member gets an entry, maybe empty). A topic missing from
        `partitions_per_topic` (not in metadata) is not assigned."""
        raise NotImplementedError

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        return None


def member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    return sorted(subscriptions)


class RangeAssignor(PartitionAssignor):
    """Per topic: the members subscribed to it, in order, take consecutive ranges; the first
    `partitions % members` take one partition more."""

    name = "range"

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        ordered = member_order(subscriptions)
        for topic in sorted({t for s in subscriptions.values() for t in s.topics}):
            count = partitions_per_topic.get(topic)
            if count is None:
                continue
            members = [m for m in ordered if topic in subscriptions[m].topics]
            per_member, extra = divmod(count, len(members))
            for i, member in enumerate(members):
                start = per_member * i + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                assignment[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return assignment


class RoundRobinAssignor(PartitionAssignor):
    """All subscribed partitions in (topic, partition) order, dealt to the members in turn, skipping a
    member not subscribed to the partition's topic."""

    name = "roundrobin"

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        members = member_order(subscriptions)
        if not members:
            return assignment
        topics = sorted({t for s in subscriptions.values() for t in s.topics} & set(partitions_per_topic))
        turn = 0
        for topic in topics:
            for partition in range(partitions_per_topic[topic]):
                while topic not in subscriptions[members[turn % len(members)]].topics:
                    turn += 1
                assignment[members[turn % len(members)]].append(TopicPartition(topic, partition))
                turn += 1
        return assignment


ASSIGNORS: dict[str, type[PartitionAssignor]] = {a.name: a for a in (RangeAssignor, RoundRobinAssignor)}
# Kafka's class names, as Java configs and kafka-python users write them.
_ALIASES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "RangePartitionAssignor": "range",
    "RoundRobinPartitionAssignor": "roundrobin",
}


def resolve_assignors(strategy: str | PartitionAssignor | type[PartitionAssignor]
                      | Sequence[str | PartitionAssignor | type[PartitionAssignor]]) -> list[PartitionAssignor]:
    """partition_assignment_strategy as kafka-python takes it (assignor classes) or as Kafka's config does
    (names, class names, comma-separated), in preference order."""
    items: Sequence[str | PartitionAssignor | type[PartitionAssignor]]
    if isinstance(strategy, str):
        items = [s.strip() for s in strategy.split(",") if s.strip()]
    elif isinstance(strategy, (PartitionAssignor, type)):
        items = [strategy]
    else:
        items = strategy
    found: list[PartitionAssignor] = []
    for item in items:
        if isinstance(item, PartitionAssignor):
            found.append(item)
        elif isinstance(item, type) and issubclass(item, PartitionAssignor):
            found.append(item())
        else:
            name = _ALIASES.get(str(item), str(item))
            if name not in ASSIGNORS:
                raise ValueError(f"Invalid value {item} for configuration partition.assignment.strategy:"
                                 f" not one of {', '.join(sorted(ASSIGNORS))}")
            found.append(ASSIGNORS[name]())
    if not found:
        raise ValueError("partition.assignment.strategy names no assignor")
    if len({a.name for a in found}) != len(found):
        raise ValueError("partition.assignment.strategy names an assignor twice")
    return found

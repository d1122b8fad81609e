"""Leader imbalance (Kafka's KafkaController.checkAndTriggerAutoLeaderRebalance, its decision only). Pure.

Each partition has a preferred leader, the first replica of its assignment;
topic creation spreads those evenly, so leadership is balanced when every
partition is led by its preferred replica. After a broker bounces, others lead
its partitions. A broker's imbalance ratio is the share of the partitions it is
preferred for that someone else leads; above leader.imbalance.per.broker.percentage
they are all moved back to it (when it is live) by a preferred replica election.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from proto.types import TopicPartition


@dataclass(frozen=True)
class BrokerImbalance:
    preferred_broker: int
    # Partitions whose preferred replica is this broker, led by another (or by nobody).
    not_led_by_preferred: tuple[TopicPartition, ...]
    # not_led_by_preferred / all partitions whose preferred replica is this broker.
    ratio: float


def leader_imbalance(
    assignments: Mapping[TopicPartition, Sequence[int]], leaders: Mapping[TopicPartition, int]
) -> dict[int, BrokerImbalance]:
    """Each preferred broker's imbalance, over the partitions that have a leadership state."""
    by_preferred: dict[int, list[TopicPartition]] = {}
    for tp, replicas in sorted(assignments.items()):
        if replicas and tp in leaders:
            by_preferred.setdefault(replicas[0], []).append(tp)
    imbalance = {}
    for broker, partitions in sorted(by_preferred.items()):
        not_led = tuple(tp for tp in partitions if leaders[tp] != broker)
        imbalance[broker] = BrokerImbalance(broker, not_led, len(not_led) / len(partitions))
    return imbalance


def partitions_to_rebalance(
    imbalance: Mapping[int, BrokerImbalance], imbalance_percentage: int, is_live: Callable[[int], bool]
) -> list[TopicPartition]:
    """The partitions to move back to their live preferred brokers whose ratio exceeds the threshold."""
    threshold = imbalance_percentage / 100
    return sorted(
        tp
        for broker in imbalance.values()
        if broker.ratio > threshold and is_live(broker.preferred_broker)
        for tp in broker.not_led_by_preferred
    )

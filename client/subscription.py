"""What a consumer reads and where it is: Kafka's SubscriptionState.

A consumer either subscribes to topics or to a pattern (and is then given
partitions: by its group's leader with a group_id, else every partition of the
topics as they appear in metadata), or is assigned partitions by hand. For each
partition it keeps the position (the offset of the next record to return),
a pending offset reset (seek_to_beginning / seek_to_end / auto_offset_reset)
and what the last fetch said about the log (high watermark, log start).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable

from client.structs import OffsetAndMetadata
from proto.types import TopicPartition


class OffsetResetStrategy(enum.IntEnum):
    """The ListOffsets timestamp each strategy asks for."""

    LATEST = -1
    EARLIEST = -2

    @classmethod
    def from_config(cls, auto_offset_reset: str) -> OffsetResetStrategy | None:
        """The strategy for auto_offset_reset ('earliest', 'latest'; kafka-python's 'smallest', 'largest');
        None for 'none'."""
        name = {"smallest": "earliest", "largest": "latest"}.get(auto_offset_reset, auto_offset_reset)
        if name == "none":
            return None
        if name not in ("earliest", "latest"):
            raise ValueError(f"Invalid value {auto_offset_reset} for configuration auto.offset.reset:"
                             " String must be one of: latest, earliest, none")
        return cls[name.upper()]


class ConsumerRebalanceListener:
    """Told when a group rebalance takes partitions away and hands them out (kafka-python's and Kafka's
    ConsumerRebalanceListener). Called from inside poll(), on the caller's thread: committing the
    revoked partitions' offsets in on_partitions_revoked is the usual use."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Before a rebalance: the member stops reading these (every partition it had, in the eager protocol)."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """After a rebalance: the member's partitions for this generation."""

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        """The member was dropped from the group (session timeout, max_poll_interval_ms exceeded) and these
        may already belong to another member: committing them would fail. Kafka's default: revoked."""
        self.on_partitions_revoked(lost)


class TopicPartitionState:
    __slots__ = ("high_watermark", "last_stable_offset", "log_start_offset", "next_retry_ms", "position",
                 "reset_strategy")

    def __init__(self) -> None:
        self.position: int | None = None
        self.reset_strategy: OffsetResetStrategy | None = None
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.next_retry_ms = 0.0  # no fetch for this partition before then (backoff after an error)


class SubscriptionState:
    def __init__(self, default_reset_strategy: OffsetResetStrategy | None) -> None:
        self.default_reset_strategy = default_reset_strategy
        self.subscription: frozenset[str] = frozenset()
        self.pattern: re.Pattern[str] | None = None
        self.listener = ConsumerRebalanceListener()
        # The group leader's: every topic some member subscribes to (its metadata must cover them all).
        self.group_subscription: frozenset[str] = frozenset()
        self.user_assigned = False
        self._assignment: dict[TopicPartition, TopicPartitionState] = {}

    def subscribe(self, topics: Iterable[str], listener: ConsumerRebalanceListener | None = None) -> None:
        if self.user_assigned:
            raise ValueError("subscribe() and assign() are mutually exclusive; unsubscribe() first")
        self.pattern = None
        self._set_subscription(topics, listener)

    def subscribe_pattern(self, pattern: str | re.Pattern[str],
                          listener: ConsumerRebalanceListener | None = None) -> None:
        """Every topic whose whole name matches; the topics are found in metadata (match_pattern)."""
        if self.user_assigned:
            raise ValueError("subscribe() and assign() are mutually exclusive; unsubscribe() first")
        self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        self._set_subscription((), listener)

    def match_pattern(self, topics: Iterable[str], internal_topics: Iterable[str] = ()) -> bool:
        """Subscribe to the topics matching the pattern (internal ones excluded, as exclude.internal.topics);
        True if that changed the subscription."""
        assert self.pattern is not None
        internal = set(internal_topics)
        matched = frozenset(t for t in topics if t not in internal and self.pattern.fullmatch(t))
        if matched == self.subscription:
            return False
        self._set_subscription(matched, self.listener)
        return True

    def _set_subscription(self, topics: Iterable[str], listener: ConsumerRebalanceListener | None) -> None:
        self.subscription = frozenset(topics)
        self.listener = listener or ConsumerRebalanceListener()
        self._retain(lambda tp: tp.topic in self.subscription)

    @property
    def partitions_auto_assigned(self) -> bool:
        return bool(self.subscription) or self.pattern is not None

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        if self.partitions_auto_assigned:
            raise ValueError("subscribe() and assign() are mutually exclusive; unsubscribe() first")
        wanted = list(dict.fromkeys(partitions))
        self.user_assigned = bool(wanted)
        self._set_assignment(wanted)

    def assign_from_subscribed(self, partitions: Iterable[TopicPartition]) -> None:
        """The partitions metadata shows for the subscribed topics; positions of those kept are kept."""
        self._set_assignment([tp for tp in partitions if tp.topic in self.subscription])

    def unsubscribe(self) -> None:
        self.subscription = frozenset()
        self.pattern = None
        self.group_subscription = frozenset()
        self.user_assigned = False
        self._assignment.clear()

    def _set_assignment(self, partitions: list[TopicPartition]) -> None:
        self._assignment = {tp: self._assignment.get(tp) or TopicPartitionState() for tp in partitions}

    def _retain(self, keep: Callable[[TopicPartition], bool]) -> None:
        self._assignment = {tp: s for tp, s in self._assignment.items() if keep(tp)}

    @property
    def topics(self) -> set[str]:
        """Topics the consumer needs metadata for."""
        return set(self.subscription) | self.group_subscription | {tp.topic for tp in self._assignment}

    def metadata_topics(self) -> set[str]:
        """What the consumer's metadata tracks; empty means every topic, which a pattern needs to see new
        topics appear."""
        return set() if self.pattern is not None else self.topics

    def assigned_partitions(self) -> list[TopicPartition]:
        return list(self._assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._assignment

    def state(self, tp: TopicPartition) -> TopicPartitionState:
        try:
            return self._assignment[tp]
        except KeyError:
            raise ValueError(f"{tp} is not assigned to this consumer") from None

    def seek(self, tp: TopicPartition, offset: int) -> None:
        state = self.state(tp)
        state.position = offset
        state.reset_strategy = None

    def request_offset_reset(self, tp: TopicPartition, strategy: OffsetResetStrategy) -> None:
        state = self.state(tp)
        state.reset_strategy = strategy
        state.position = None

    def position(self, tp: TopicPartition) -> int | None:
        return self.state(tp).position

    def partitions_needing_position(self) -> list[TopicPartition]:
        """Partitions with neither a position nor a reset requested: look up their committed offset first."""
        return [tp for tp, s in self._assignment.items() if s.position is None and s.reset_strategy is None]

    def partitions_needing_reset(self, now_ms: float) -> list[TopicPartition]:
        return [tp for tp, s in self._assignment.items()
                if s.reset_strategy is not None and s.next_retry_ms <= now_ms]

    def fetchable_partitions(self, now_ms: float) -> list[TopicPartition]:
        return [tp for tp, s in self._assignment.items() if s.position is not None and s.next_retry_ms <= now_ms]

    def all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Positions to commit: every assigned partition that has one."""
        return {tp: OffsetAndMetadata(s.position) for tp, s in self._assignment.items() if s.position is not None}

"""What a consumer reads and where it is: Kafka's SubscriptionState, without group rebalancing.

A consumer either subscribes to topics (and then reads every partition of
them, as they appear in metadata) or is assigned partitions by hand. For each
partition it keeps the position (the offset of the next record to return),
a pending offset reset (seek_to_beginning / seek_to_end / auto_offset_reset)
and what the last fetch said about the log (high watermark, log start).
"""

from __future__ import annotations

import enum
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


class TopicPartitionState:
    __slots__ = ("high_watermark", "log_start_offset", "next_retry_ms", "position", "reset_strategy")

    def __init__(self) -> None:
        self.position: int | None = None
        self.reset_strategy: OffsetResetStrategy | None = None
        self.high_watermark = -1
        self.log_start_offset = -1
        self.next_retry_ms = 0.0  # no fetch for this partition before then (backoff after an error)


class SubscriptionState:
    def __init__(self, default_reset_strategy: OffsetResetStrategy | None) -> None:
        self.default_reset_strategy = default_reset_strategy
        self.subscription: frozenset[str] = frozenset()
        self.user_assigned = False
        self._assignment: dict[TopicPartition, TopicPartitionState] = {}

    def subscribe(self, topics: Iterable[str]) -> None:
        if self.user_assigned:
            raise ValueError("subscribe() and assign() are mutually exclusive; unsubscribe() first")
        self.subscription = frozenset(topics)
        self._retain(lambda tp: tp.topic in self.subscription)

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        if self.subscription:
            raise ValueError("subscribe() and assign() are mutually exclusive; unsubscribe() first")
        wanted = list(dict.fromkeys(partitions))
        self.user_assigned = bool(wanted)
        self._set_assignment(wanted)

    def assign_from_subscribed(self, partitions: Iterable[TopicPartition]) -> None:
        """The partitions metadata shows for the subscribed topics; positions of those kept are kept."""
        self._set_assignment([tp for tp in partitions if tp.topic in self.subscription])

    def unsubscribe(self) -> None:
        self.subscription = frozenset()
        self.user_assigned = False
        self._assignment.clear()

    def _set_assignment(self, partitions: list[TopicPartition]) -> None:
        self._assignment = {tp: self._assignment.get(tp) or TopicPartitionState() for tp in partitions}

    def _retain(self, keep: Callable[[TopicPartition], bool]) -> None:
        self._assignment = {tp: s for tp, s in self._assignment.items() if keep(tp)}

    @property
    def topics(self) -> set[str]:
        """Topics the consumer needs metadata for."""
        return set(self.subscription) | {tp.topic for tp in self._assignment}

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

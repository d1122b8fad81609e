"""A follower as its leader sees it (Kafka 2.x's kafka.cluster.Replica).

Everything here is learnt from the follower's own fetches: the offset it asks
for is its log end offset, and a fetch that reached the leader's log end at the
time of the previous one means it was caught up then. `last_caught_up_time_ms`
is what the ISR shrink rule (replica.lag.time.max.ms) measures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.log.log import LogOffsetMetadata
from broker.replication.offset_metadata import UNKNOWN_OFFSET, UNKNOWN_OFFSET_METADATA
from broker.replication.rules import caught_up_time_after_fetch


@dataclass(slots=True)
class Replica:
    broker_id: int
    log_end_offset_metadata: LogOffsetMetadata = field(default=UNKNOWN_OFFSET_METADATA)
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0

    @property
    def log_end_offset(self) -> int:
        return self.log_end_offset_metadata.message_offset

    def update_fetch_state(self, fetch_offset_metadata: LogOffsetMetadata, follower_start_offset: int,
                           fetch_time_ms: int, leader_end_offset: int) -> None:
        """Kafka's updateFetchState (the caught-up rule: broker/replication/rules.py)."""
        self.last_caught_up_time_ms = caught_up_time_after_fetch(
            self.last_caught_up_time_ms, fetch_offset_metadata.message_offset, fetch_time_ms, leader_end_offset,
            self.last_fetch_leader_log_end_offset, self.last_fetch_time_ms)
        self.log_start_offset = follower_start_offset
        self.log_end_offset_metadata = fetch_offset_metadata
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms

    def reset_last_caught_up_time(self, leader_end_offset: int, now_ms: int, last_caught_up_time_ms: int) -> None:
        """On becoming leader: ISR members count as caught up now, so none is dropped before it could fetch."""
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = now_ms
        self.last_caught_up_time_ms = last_caught_up_time_ms

    def forget_log_end_offset(self) -> None:
        """A new leader knows nothing of a follower's log until it fetches."""
        self.log_end_offset_metadata = UNKNOWN_OFFSET_METADATA
        self.log_start_offset = UNKNOWN_OFFSET

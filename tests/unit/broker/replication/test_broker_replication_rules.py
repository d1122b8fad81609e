"""The ISR and high watermark rules of broker/replication/rules.py as plain functions, without a Partition
(test_broker_isr.py checks them again through a real Partition and its log)."""

from __future__ import annotations

import pytest

from broker.log.log import LogOffsetMetadata
from broker.replication.offset_metadata import offset_only
from broker.replication.replica import Replica
from broker.replication.rules import (
    acks_all_append_allowed,
    acks_all_completion,
    caught_up_time_after_fetch,
    follower_high_watermark,
    leader_high_watermark,
    maximal_isr,
)
from proto.errors import ErrorCode


def at(offset: int, position: int = 0) -> LogOffsetMetadata:
    return LogOffsetMetadata(offset, 0, position)


@pytest.mark.parametrize(("fetch_offset", "expected"), [
    (20, 5_000),  # at the leader's log end now: caught up now
    (15, 4_000),  # past the leader's log end at the previous fetch: caught up then
    (10, 4_000),  # exactly at it
    (9, 1_000),  # behind both: unchanged
])
def test_caught_up_time_after_a_fetch(fetch_offset: int, expected: int) -> None:
    assert caught_up_time_after_fetch(1_000, fetch_offset, fetch_time_ms=5_000, leader_end_offset=20,
                                      last_fetch_leader_end_offset=10, last_fetch_time_ms=4_000) == expected


def test_caught_up_time_never_goes_back() -> None:
    assert caught_up_time_after_fetch(9_000, 20, 5_000, 20, 10, 4_000) == 9_000


def test_replica_update_fetch_state_applies_the_rule() -> None:
    replica = Replica(2, last_caught_up_time_ms=1_000, last_fetch_leader_log_end_offset=10, last_fetch_time_ms=4_000)
    replica.update_fetch_state(at(15), follower_start_offset=3, fetch_time_ms=5_000, leader_end_offset=20)
    assert (replica.last_caught_up_time_ms, replica.log_end_offset, replica.log_start_offset) == (4_000, 15, 3)
    assert (replica.last_fetch_leader_log_end_offset, replica.last_fetch_time_ms) == (20, 5_000)


def test_maximal_isr_adds_what_a_pending_write_adds() -> None:
    assert maximal_isr(frozenset({1, 2}), None) == {1, 2}
    assert maximal_isr(frozenset({1, 2}), frozenset({1, 2, 3})) == {1, 2, 3}
    # A pending shrink does not shrink it yet.
    assert maximal_isr(frozenset({1, 2, 3}), frozenset({1})) == {1, 2, 3}


def _replica(broker_id: int, leo: int) -> Replica:
    return Replica(broker_id, log_end_offset_metadata=at(leo, position=leo * 10))


def test_leader_high_watermark_is_min_leo_over_the_isr() -> None:
    replicas = [_replica(2, 7), _replica(3, 3)]
    assert leader_high_watermark(offset_only(0), at(10, 100), replicas, frozenset({1, 2})) == at(7, 70)
    # Replica 3 is outside the ISR until the write that adds it lands: then it holds the HW back.
    assert leader_high_watermark(offset_only(0), at(10, 100), replicas, frozenset({1, 2, 3})) == at(3, 30)
    # Alone in the ISR, the leader's own LEO.
    assert leader_high_watermark(offset_only(0), at(10, 100), replicas, frozenset({1})) == at(10, 100)


def test_leader_high_watermark_only_moves_forward() -> None:
    replicas = [_replica(2, 4)]
    assert leader_high_watermark(at(6, 60), at(10, 100), replicas, frozenset({1, 2})) is None
    assert leader_high_watermark(at(4, 40), at(10, 100), replicas, frozenset({1, 2})) is None


def test_leader_high_watermark_learns_its_position_at_the_same_offset() -> None:
    replicas = [_replica(2, 4)]
    assert leader_high_watermark(offset_only(4), at(10, 100), replicas, frozenset({1, 2})) == at(4, 40)


@pytest.mark.parametrize(("leader_hw", "leo", "expected"), [(5, 9, 5), (9, 5, 5), (7, 7, 7)])
def test_follower_high_watermark_never_passes_its_own_log_end(leader_hw: int, leo: int, expected: int) -> None:
    assert follower_high_watermark(leader_hw, leo) == expected


@pytest.mark.parametrize(("acks", "isr_size", "min_isr", "allowed"), [
    (-1, 2, 2, True),
    (-1, 1, 2, False),
    (1, 1, 2, True),  # only acks=all is held to min.insync.replicas
    (0, 1, 3, True),
])
def test_acks_all_append_needs_min_insync_replicas(acks: int, isr_size: int, min_isr: int, allowed: bool) -> None:
    assert acks_all_append_allowed(acks, isr_size, min_isr) is allowed


@pytest.mark.parametrize(("hw", "isr_size", "expected"), [
    (9, 3, (False, ErrorCode.NONE)),  # still waiting for the HW
    (10, 3, (True, ErrorCode.NONE)),
    (12, 2, (True, ErrorCode.NONE)),
    (10, 1, (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)),  # in, but the ISR shrank below min.isr
])
def test_acks_all_completion(hw: int, isr_size: int, expected: tuple[bool, ErrorCode]) -> None:
    assert acks_all_completion(hw, required_offset=10, isr_size=isr_size, min_insync_replicas=2) == expected

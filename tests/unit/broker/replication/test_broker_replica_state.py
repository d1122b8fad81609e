"""What `minibroker console` reads of a broker: Partition.replica_state (a leader's view of its followers, the epoch
cache) and the replication events its ISR changes and truncations record in the process's ring, with their
reasons; DescribeReplicaState's answer keeps to the topics the caller may describe."""

from __future__ import annotations

from pathlib import Path

from test_broker_isr import ASSIGNMENT, LAG_MS, Leader, no_checkpoint

from broker.api.replica_state import replica_state_response
from broker.log.log import AppendOrigin
from broker.replication.partition import FollowerState, ReplicaState
from common.event_ring import EVENTS, ISR_EXPAND, ISR_SHRINK, LEADER_EPOCH, TRUNCATION, Event, EventRing
from common.record import ControlRecordType, build_end_txn_marker
from proto.types import TopicPartition
from tests.unit.broker.broker_helpers import LOCAL, TP, batch, leader_state
from zk.paths import LeaderIsrAndControllerEpoch


def events_after(sequence: int) -> list[tuple[str, str, int]]:
    return [(e.kind, e.topic, e.partition) for e in EVENTS.since(sequence)]


def last_sequence() -> int:
    held = EVENTS.since(0)
    return held[-1].sequence if held else 0


def test_the_ring_is_bounded_and_pages_by_sequence() -> None:
    now = [1000]
    ring = EventRing(capacity=3, time_ms=lambda: now[0])
    for i in range(5):
        now[0] += 1
        ring.record(ISR_SHRINK, f"shrink {i}", "t", 0)
    assert [(e.sequence, e.time_ms, e.detail) for e in ring.since(0)] == [
        (3, 1003, "shrink 2"), (4, 1004, "shrink 3"), (5, 1005, "shrink 4")]
    assert [e.sequence for e in ring.since(4)] == [5]
    assert ring.since(5) == []


def test_a_shrink_is_recorded_with_who_lagged_how_long_once_zookeeper_took_it(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    before = last_sequence()
    leader.fetch(2)
    leader.fetch(3)
    leader.append(3)
    leader.clock.now += LAG_MS
    leader.fetch(2)
    leader.clock.now += 1
    assert leader.shrink()
    shrinks = [e for e in EVENTS.since(before) if e.kind == ISR_SHRINK]
    assert [(e.topic, e.partition) for e in shrinks] == [TP]
    assert shrinks[0].detail == (f"ISR 1,2,3 -> 1,2: 3 not caught up for {LAG_MS + 1} ms (endOffset 0) >"
                                 f" replica.lag.time.max.ms {LAG_MS}; leader endOffset 3")


def test_a_refused_shrink_is_not_an_event(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    leader.append(2)
    # Leadership moved on in ZooKeeper: the conditional write fails, the ISR stays.
    leader.store.states[TP] = LeaderIsrAndControllerEpoch(2, 1, (2, 3), 2, 6)
    before = last_sequence()
    leader.clock.now += LAG_MS + 1
    leader.shrink()
    assert events_after(before) == []


def test_an_expand_is_recorded_with_the_high_watermark_reached(tmp_path: Path) -> None:
    leader = Leader(tmp_path, isr=(LOCAL, 2))
    leader.append(2)
    leader.fetch(2)
    before = last_sequence()
    assert leader.fetch(3)
    leader.partition.maybe_expand_isr(3, leader.store)
    expands = [e for e in EVENTS.since(before) if e.kind == ISR_EXPAND]
    assert [e.detail for e in expands] == ["ISR 1,2 -> 1,2,3: 3 caught up to the high watermark 2"]


def test_a_new_leader_epoch_and_a_truncation_are_recorded(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    leader.append(2)
    leader.append(2)  # two batches: batches are truncated whole
    before = last_sequence()
    leader.partition.make_follower(leader_state(2, 1, (2, 3), ASSIGNMENT), no_checkpoint)
    leader.partition.truncate_to(1, 2)
    assert [(e.kind, e.detail) for e in EVENTS.since(before)] == [
        (LEADER_EPOCH, "broker 1 follows leader 2 in epoch 1"),
        (TRUNCATION, "follower 1 truncated from 4 to 2 (asked: 2, leader epoch 1)"),
    ]


def test_a_leaders_replica_state_has_its_followers_and_epochs(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    leader.append(3)
    leader.clock.now += 5
    leader.fetch(2)
    state = leader.partition.replica_state()
    assert state is not None
    assert (state.leader, state.leader_epoch, state.log_start_offset, state.log_end_offset, state.isr) == (
        LOCAL, 0, 0, 3, ASSIGNMENT)
    assert state.high_watermark == 0  # replica 3 has not fetched
    assert state.followers == (
        FollowerState(2, 3, 0, leader.clock.now, leader.clock.now),
        FollowerState(3, -1, -1, leader.clock.now - 5, leader.clock.now - 5),
    )
    assert [tuple(e) for e in state.epoch_entries] == [(0, 0)]


def test_a_replicas_state_has_its_last_stable_offset(tmp_path: Path) -> None:
    leader = Leader(tmp_path, isr=(LOCAL,))  # alone in the ISR: the high watermark follows each append
    leader.append(2)  # 0..1
    leader.partition.append_records_to_leader(
        batch(2, producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True), required_acks=1)  # 2..3
    leader.append(1)  # 4
    state = leader.partition.replica_state()
    assert state is not None and (state.high_watermark, state.last_stable_offset) == (5, 2)  # the open transaction
    leader.partition.append_records_to_leader(build_end_txn_marker(7, 0, ControlRecordType.COMMIT, 0, 1_000), 1,
                                              AppendOrigin.COORDINATOR)  # 5
    state = leader.partition.replica_state()
    assert state is not None and (state.high_watermark, state.last_stable_offset) == (6, 6)


def test_a_followers_replica_state_has_no_isr_nor_followers(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    leader.partition.make_follower(leader_state(2, 1, (2, 3), ASSIGNMENT), no_checkpoint)
    state = leader.partition.replica_state()
    assert state is not None and (state.leader, state.leader_epoch, state.isr, state.followers) == (2, 1, (), ())


def test_the_answer_keeps_to_the_describable_topics() -> None:
    def state(topic: str) -> ReplicaState:
        return ReplicaState(TopicPartition(topic, 0), 1, 4, 0, 10, 8, 6, (1, 2), (FollowerState(2, 8, 0, 90, 95),),
                            ())

    events = [Event(1, 100, ISR_SHRINK, "secret", 0, "x"), Event(2, 101, ISR_SHRINK, "open", 0, "y"),
              Event(3, 102, "BrokerFailure", "", -1, "z")]
    response = replica_state_response(1, 1000, LAG_MS, [state("secret"), state("open")], events, {"open"})
    assert [(p.topic, p.high_watermark, p.last_stable_offset, list(p.isr)) for p in response.partitions] == [
        ("open", 8, 6, [1, 2])]
    assert [(f.broker_id, f.log_end_offset, f.last_caught_up_time_ms) for f in response.partitions[0].followers] == [
        (2, 8, 90)]
    assert [e.sequence for e in response.events] == [2, 3]
    assert (response.broker_id, response.now_ms, response.replica_lag_time_max_ms) == (1, 1000, LAG_MS)

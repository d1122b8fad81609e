"""The leader's ISR and high watermark rules on a real Partition with a manual clock and an in-memory state
znode: shrink after replica.lag.time.max.ms, not right after an election, expand only past the HW and the
epoch's start (KAFKA-7128), conditional writes that never clobber, a monotonic HW, min.insync.replicas."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.manager import LogManager
from broker.replication.isr_change_propagation import IsrChangePropagationConfig, IsrChangePropagator
from broker.replication.partition import Partition
from broker.replication.partition_state_store import IsrUpdateResult
from broker.replication.replica import Replica
from broker.replication.rules import any_isr_follower_behind, is_follower_in_sync, out_of_sync_replicas
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from tests.fakes import FakeClock, FakeStateStore
from tests.unit.broker.broker_helpers import LOCAL, TP, batch, leader_state, topic_config
from zk.paths import LeaderIsrAndControllerEpoch

LAG_MS = 10_000
ASSIGNMENT = (LOCAL, 2, 3)


def no_checkpoint(_: TopicPartition) -> int | None:
    return None


class Leader:
    """A leader Partition of ASSIGNMENT with its clock and state znode."""

    def __init__(self, tmp_path: Path, isr: tuple[int, ...] = ASSIGNMENT, min_isr: int = 1, epoch: int = 0) -> None:
        self.clock = FakeClock()
        self.log_manager = LogManager([tmp_path / "logs"], topic_config().log, broker_id=LOCAL, time_ms=self.clock)
        self.log_manager.startup()
        self.store = FakeStateStore()
        # The ReplicaManager's set of leaders the isr-expiration task looks at.
        self.behind: set[Partition] = set()
        self.partition = Partition(TP, local_broker_id=LOCAL, log_manager=self.log_manager,
                                   topic_config=topic_config(**{"min.insync.replicas": str(min_isr)}),
                                   time_ms=self.clock, followers_behind=self.behind)
        self.partition.make_leader(leader_state(LOCAL, epoch, isr, ASSIGNMENT), no_checkpoint)

    def append(self, records: int = 1) -> None:
        self.partition.append_records_to_leader(batch(records), required_acks=1)

    def fetch(self, replica_id: int, offset: int | None = None) -> bool:
        """A follower fetch at `offset` (default: the leader's log end); True if it may rejoin the ISR."""
        log = self.partition.log
        assert log is not None
        at = log.log_end_offset if offset is None else offset
        metadata = log.read(at, 1, min_one_message=False).fetch_offset_metadata
        return self.partition.update_follower_fetch_state(replica_id, metadata, 0, self.clock.now,
                                                          log.log_end_offset).needs_isr_expand

    def shrink(self) -> bool:
        return self.shrink_with(self.store)

    def shrink_with(self, store: FakeStateStore) -> bool:
        return self.partition.maybe_shrink_isr(LAG_MS, store)

    @property
    def isr(self) -> tuple[int, ...]:
        return tuple(sorted(self.partition.in_sync_replica_ids))


# ------------------------------------------------------------------ pure rules


def test_out_of_sync_is_measured_from_the_last_time_caught_up() -> None:
    caught_up = Replica(2, last_caught_up_time_ms=1_000)
    at_log_end = Replica(3, last_caught_up_time_ms=0)
    at_log_end.update_fetch_state(at_log_end.log_end_offset_metadata._replace(message_offset=5), 0, 0, 5)
    replicas = {2: caught_up, 3: at_log_end}
    assert out_of_sync_replicas((1, 2, 3), 1, replicas, 5, now_ms=1_000 + LAG_MS, max_lag_ms=LAG_MS) == frozenset()
    # Replica 3 sits at the leader's log end: idle, not lagging, however long ago it caught up.
    assert out_of_sync_replicas((1, 2, 3), 1, replicas, 5, now_ms=1_001 + LAG_MS, max_lag_ms=LAG_MS) == {2}


def test_only_an_isr_follower_behind_the_log_end_can_make_the_isr_shrink() -> None:
    at_end = Replica(2)
    at_end.update_fetch_state(at_end.log_end_offset_metadata._replace(message_offset=5), 0, 0, 5)
    behind, unknown = Replica(3), Replica(4)
    behind.update_fetch_state(behind.log_end_offset_metadata._replace(message_offset=4), 0, 0, 5)
    replicas = {2: at_end, 3: behind, 4: unknown}
    assert not any_isr_follower_behind((1, 2), 1, replicas, 5)
    assert any_isr_follower_behind((1, 2, 3), 1, replicas, 5)
    assert any_isr_follower_behind((1, 4), 1, replicas, 5)  # a new leader's follower that never fetched
    assert not any_isr_follower_behind((1,), 1, replicas, 5)  # the leader itself never is
    assert not any_isr_follower_behind((1, 5), 1, replicas, 5)  # nor a broker not assigned


@pytest.mark.parametrize(("fetch_offset", "hw", "epoch_start", "in_sync"), [
    (10, 10, 10, True),
    (9, 10, 5, False),  # below the high watermark
    (10, 10, 12, False),  # KAFKA-7128: past the HW but below the epoch's start
    (12, 10, 12, True),
    (10, 10, None, False),  # not leader
])
def test_in_sync_needs_the_high_watermark_and_the_epoch_start(fetch_offset: int, hw: int, epoch_start: int | None,
                                                              in_sync: bool) -> None:
    assert is_follower_in_sync(fetch_offset, hw, epoch_start) is in_sync


# ------------------------------------------------------------------ shrink


def test_lagging_follower_is_dropped_after_the_lag_time(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    leader = Leader(tmp_path)
    leader.fetch(2)
    leader.fetch(3)
    leader.append(3)
    leader.clock.now += LAG_MS
    assert not leader.shrink() and leader.isr == ASSIGNMENT  # exactly the lag time: still in
    leader.fetch(2)  # replica 2 keeps up, replica 3 does not
    leader.clock.now += 1
    caplog.set_level("INFO")
    assert leader.shrink()  # HW moves: replica 3 held it back
    assert leader.isr == (LOCAL, 2)
    assert leader.partition.high_watermark == 3
    assert leader.store.writes == [("shrink", LeaderIsrAndControllerEpoch(LOCAL, 0, (LOCAL, 2), 1, 0))]
    assert leader.partition.zk_version == 1
    assert ("Shrinking ISR from 1,2,3 to 1,2. Leader: (highWatermark: 0, endOffset: 3). Out of sync replicas:"
            " (brokerId: 3, endOffset: 0).") in caplog.text


def test_no_shrink_right_after_election(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    leader.append(5)
    # New leader: the ISR members count as caught up now, though none has fetched from it yet.
    leader.clock.now += LAG_MS
    assert not leader.shrink() and leader.isr == ASSIGNMENT
    leader.clock.now += 1
    leader.shrink()
    assert leader.isr == (LOCAL,)


def test_a_refused_write_adopts_zookeepers_state_instead_of_clobbering_it(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    leader.append(2)
    # The controller rewrote the znode (still this leader and epoch) since the LeaderAndIsr.
    leader.store.states[TP] = LeaderIsrAndControllerEpoch(LOCAL, 0, (LOCAL, 2), 2, 5)
    leader.clock.now += LAG_MS + 1
    leader.shrink()
    assert leader.store.writes == []
    assert leader.isr == (LOCAL, 2) and leader.partition.zk_version == 5
    # Leadership moved on in ZooKeeper: nothing is adopted, the LeaderAndIsr will come.
    leader.store.states[TP] = LeaderIsrAndControllerEpoch(2, 1, (2, 3), 2, 6)
    leader.clock.now += LAG_MS + 1
    leader.shrink()
    assert leader.isr == (LOCAL, 2) and leader.partition.zk_version == 5


def test_a_leader_and_isr_during_the_write_wins(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    leader.append(2)
    leader.clock.now += LAG_MS + 1

    class SlowStore(FakeStateStore):
        def shrink_isr(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> IsrUpdateResult:
            # The controller elects again while the write is in flight.
            leader.partition.make_leader(leader_state(LOCAL, 1, ASSIGNMENT, ASSIGNMENT), no_checkpoint)
            return super().shrink_isr(tp, state)

    assert not leader.partition.maybe_shrink_isr(LAG_MS, SlowStore())
    assert leader.isr == ASSIGNMENT and leader.partition.leader_epoch == 1


# ------------------------------------------------------------------ expand


def test_expand_only_after_reaching_the_high_watermark_and_the_epoch_start(tmp_path: Path) -> None:
    """KAFKA-7128: epoch 1's leader starts at offset 4 with HW 2; a follower at 3 is past the HW but may still
    hold epoch-0 records this leader never had, so it stays out until it fetches from 4."""
    leader = Leader(tmp_path, isr=(LOCAL,))
    leader.append(4)
    leader.partition.make_leader(leader_state(LOCAL, 1, (LOCAL,), ASSIGNMENT, controller_epoch=1), no_checkpoint)
    assert leader.partition.leader_epoch_start_offset == 4
    leader.append(2)
    assert leader.partition.high_watermark == 6  # ISR is the leader alone
    assert not leader.fetch(2, offset=3)
    assert not leader.partition.maybe_expand_isr(2, leader.store) and leader.isr == (LOCAL,)
    assert not leader.fetch(2, offset=5)  # past the epoch start, below the HW
    assert leader.fetch(2, offset=6)
    leader.partition.maybe_expand_isr(2, leader.store)
    assert leader.isr == (LOCAL, 2)
    assert leader.store.writes == [("expand", LeaderIsrAndControllerEpoch(LOCAL, 1, (LOCAL, 2), 1, 0))]


def test_high_watermark_counts_a_member_being_added(tmp_path: Path) -> None:
    leader = Leader(tmp_path, isr=(LOCAL,))
    leader.append(2)
    assert leader.fetch(2)

    class AppendingStore(FakeStateStore):
        def expand_isr(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> IsrUpdateResult:
            leader.append(3)  # replica 2 does not have these yet
            return super().expand_isr(tp, state)

    store = AppendingStore()
    leader.partition.maybe_expand_isr(2, store)
    assert leader.isr == (LOCAL, 2)
    assert leader.partition.high_watermark == 2
    # Replica 2 joined behind the log end (the append came while its write was in flight): where the
    # isr-expiration task looks, so it still goes if it stops fetching there.
    assert leader.behind == {leader.partition}
    leader.clock.now += LAG_MS + 1
    assert leader.shrink_with(store) and leader.isr == (LOCAL,)


# ------------------------------------------------------------------ high watermark and min.insync.replicas


def test_high_watermark_never_goes_back(tmp_path: Path) -> None:
    leader = Leader(tmp_path, isr=(LOCAL, 2))
    leader.append(4)
    leader.fetch(2)
    assert leader.partition.high_watermark == 4
    # A new leadership resets followers' log ends to unknown: the HW stays where it was.
    leader.partition.make_leader(leader_state(LOCAL, 1, (LOCAL, 2), ASSIGNMENT), no_checkpoint)
    assert leader.partition.high_watermark == 4
    leader.append(1)
    leader.fetch(2, offset=2)  # a follower that truncated reports a lower offset
    assert leader.partition.high_watermark == 4


def test_min_insync_replicas_before_and_after_the_append(tmp_path: Path) -> None:
    leader = Leader(tmp_path, isr=(LOCAL, 2), min_isr=2)
    leader.append(2)
    done, error = leader.partition.check_enough_replicas_reach_offset(2)
    assert (done, error) == (False, ErrorCode.NONE)
    leader.clock.now += LAG_MS + 1
    assert leader.shrink()  # down to the leader: the HW jumps to its log end
    # The records are in, but fewer replicas than min.insync.replicas have them.
    assert leader.partition.check_enough_replicas_reach_offset(2) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    with pytest.raises(KafkaError) as refused:
        leader.partition.append_records_to_leader(batch(1), required_acks=-1)
    assert refused.value.code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.partition.is_under_min_isr and leader.partition.is_under_replicated


# ------------------------------------------------------------------ ISR-change propagation


def test_isr_changes_are_propagated_in_batches() -> None:
    clock = FakeClock(0)
    written: list[list[TopicPartition]] = []
    propagator = IsrChangePropagator(lambda tps: written.append(list(tps)), clock,
                                     IsrChangePropagationConfig(check_interval_ms=100, blackout_ms=500,
                                                                max_delay_ms=2_000))
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assert not propagator.maybe_propagate_isr_changes()  # nothing to say
    propagator.record_isr_change(a)
    clock.now = 500
    assert not propagator.maybe_propagate_isr_changes()  # still in the blackout after the change
    propagator.record_isr_change(b)
    clock.now = 1_001
    assert propagator.maybe_propagate_isr_changes()
    assert written == [[a, b]]
    # A change every 400 ms never leaves a quiet blackout: the max delay gets it through.
    while clock.now <= 1_001 + 2_000:
        propagator.record_isr_change(a)
        assert not propagator.maybe_propagate_isr_changes()
        clock.now += 400
    propagator.record_isr_change(a)
    assert propagator.maybe_propagate_isr_changes()
    assert written == [[a, b], [a]]


def test_a_failed_isr_write_does_not_block_later_changes(tmp_path: Path) -> None:
    """A write that raises (ZooKeeper session expired) clears the pending change: the next shrink is tried."""
    leader = Leader(tmp_path)
    leader.append(2)
    leader.clock.now += LAG_MS + 1

    class ExpiredStore(FakeStateStore):
        def shrink_isr(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> IsrUpdateResult:
            raise ConnectionError("session expired")

    with pytest.raises(ConnectionError):
        leader.shrink_with(ExpiredStore())
    assert leader.partition.maximal_isr == frozenset(ASSIGNMENT)
    assert leader.behind == {leader.partition}  # still looked at by the next round
    assert leader.shrink() and leader.isr == (LOCAL,)


def test_a_new_leader_epoch_forgets_followers_positions_even_without_a_role_change(tmp_path: Path) -> None:
    """Leader of epoch 0, paused through epoch 1 (another leader; followers truncated), handed epoch 2 directly
    (Kafka 3.x's isNewLeaderEpoch): positions learnt in epoch 0 must not count, or the HW passes offsets a
    follower no longer holds and an acks=all write is acknowledged without being replicated."""
    leader = Leader(tmp_path)
    leader.append(7)
    leader.fetch(2)  # replica 2 at 7 in epoch 0 ...
    leader.fetch(3, offset=4)  # ... replica 3 at 4 holds the HW back
    assert leader.partition.high_watermark == 4
    # Epoch 1 was led by replica 3 (replica 2 truncated to 4); epoch 2 hands leadership back with ISR {1, 2}.
    leader.partition.make_leader(leader_state(LOCAL, 2, (LOCAL, 2), ASSIGNMENT), no_checkpoint)
    assert leader.partition.remote_replicas[2].log_end_offset < 0
    assert leader.partition.high_watermark == 4
    leader.fetch(2, offset=4)  # what replica 2 really holds now
    assert leader.partition.high_watermark == 4


# ------------------------------------------------------------------ the leaders the isr-expiration task looks at


def test_a_partition_is_looked_at_exactly_while_an_isr_follower_is_behind(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    # A new leader knows no follower's log end: both could be silent, so the task must look.
    assert leader.behind == {leader.partition}
    leader.fetch(2)
    assert leader.behind == {leader.partition}
    leader.fetch(3)
    assert leader.behind == set()
    leader.append(2)
    assert leader.behind == {leader.partition}
    leader.fetch(2)
    leader.fetch(3)
    assert leader.behind == set()
    # A fetch that brought nothing new (the session's unchanged entries) changes nothing.
    leader.clock.now += 10 * LAG_MS
    leader.partition.follower_fetched_unchanged(2, leader.clock.now)
    assert leader.behind == set()
    leader.append(1)
    leader.clock.now += LAG_MS + 1
    assert leader.shrink() and leader.isr == (LOCAL,)
    # The ISR is the leader alone: nothing can shrink further.
    assert leader.behind == set()


def test_a_follower_or_deleted_replica_is_not_looked_at(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    leader.append(1)
    assert leader.behind == {leader.partition}
    leader.partition.make_follower(leader_state(2, 1, ASSIGNMENT, ASSIGNMENT), no_checkpoint)
    assert leader.behind == set()
    leader.partition.make_leader(leader_state(LOCAL, 2, ASSIGNMENT, ASSIGNMENT), no_checkpoint)
    assert leader.behind == {leader.partition}
    leader.partition.delete()
    assert leader.behind == set()

"""The follower side: fetcher ids as Kafka hashes them, truncation decisions (KIP-101, KIP-279, the
UNDEFINED fallback, out of range), and a fetcher thread replicating from a leader Partition in this process
(real logs on both sides, no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.fetcher.manager import ReplicaFetcherManager, fetcher_id
from broker.fetcher.protocol import (
    BrokerEndPoint,
    EpochEndOffset,
    EpochRequest,
    FetchPartitions,
    FetchResponsePartition,
    InitialFetchState,
    ReplicaFetcherConfig,
)
from broker.fetcher.thread import FetchState, PartitionLookup, ReplicaFetcherThread
from broker.fetcher.truncation import (
    EndOffsetForEpoch,
    OffsetTruncationState,
    OutOfRangeAction,
    OutOfRangeReset,
    offset_truncation_state,
    out_of_range_reset,
)
from broker.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from broker.log.manager import LogManager
from broker.replication.partition import FetchIsolation, Partition
from common.java_hash import java_string_hash
from common.record import ProducerRecord, build_batch
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from tests.fakes import FakeClock
from tests.unit.broker.broker_helpers import LOCAL, TP, leader_state, topic_config

LEADER = 2
LEADER_END_POINT = BrokerEndPoint(LEADER, "127.0.0.1", 9002)
CONFIG = ReplicaFetcherConfig(fetch_backoff_ms=0)


def no_checkpoint(_: TopicPartition) -> int | None:
    return None


# ------------------------------------------------------------------ fetcher ids


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0),
    ("abc", 96354),
    ("hello", 99162322),
    ("Hello", 69609650),
    ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE
    ("\U0001f600", 0xD83D * 31 + 0xDE00),  # a surrogate pair: two UTF-16 code units, as Java counts
])
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_fetcher_id_is_kafkas_hash() -> None:
    # 31 * "hello".hashCode() + 3 = 3074031985 overflows a Java int to -1220935311; abs, then modulo.
    assert fetcher_id(TopicPartition("hello", 3), 1) == 0
    assert fetcher_id(TopicPartition("hello", 3), 7) == 1220935311 % 7 == 1
    # 31 * MIN_VALUE overflows back to MIN_VALUE, which Utils.abs maps to 0.
    assert fetcher_id(TopicPartition("polygenelubricants", 0), 5) == 0
    negative = TopicPartition("orders", 0)
    n = (31 * java_string_hash("orders")) & 0xFFFFFFFF
    signed = n - 2**32 if n >= 2**31 else n
    assert fetcher_id(negative, 3) == abs(signed) % 3


# ------------------------------------------------------------------ truncation decisions


def follower_epochs(*entries: tuple[int, int]) -> EndOffsetForEpoch:
    """A follower's Log.endOffsetForEpoch over (epoch, start offset) entries ending at log end 100."""

    def end_offset_for(epoch: int) -> tuple[int, int] | None:
        known = [e for e in entries if e[0] <= epoch]
        if not known:
            return None
        found = known[-1]
        later = [e for e in entries if e[0] > found[0]]
        return found[0], later[0][1] if later else 100

    return end_offset_for


def test_kip_101_truncates_to_the_leaders_answer_not_the_high_watermark() -> None:
    # Scenario 1 (HW truncation loses data): the follower's HW (1) lags its log (2); the leader's epoch 0 ends at
    # 2: keep both records, where a HW-based truncation would drop the acknowledged one.
    decision = offset_truncation_state(TP, 0, 2, initial_fetch_offset=1, replica_end_offset=2,
                                       end_offset_for_epoch=follower_epochs((0, 0)))
    assert decision == OffsetTruncationState(2, truncation_completed=True)
    # Scenario 2 (divergence): the follower wrote offset 1 in epoch 0 that the new leader (epoch 1) never had.
    decision = offset_truncation_state(TP, 0, 1, initial_fetch_offset=1, replica_end_offset=2,
                                       end_offset_for_epoch=follower_epochs((0, 0)))
    assert decision == OffsetTruncationState(1, truncation_completed=True)


def test_kip_279_an_unknown_epoch_means_another_round() -> None:
    # The leader answers epoch 1, which the follower never had: cut to where its epoch 0 ends, ask again.
    first = offset_truncation_state(TP, 1, 4, initial_fetch_offset=0, replica_end_offset=5,
                                    end_offset_for_epoch=follower_epochs((0, 0), (2, 3)))
    assert first == OffsetTruncationState(3, truncation_completed=False)


def test_undefined_answers_fall_back_as_kafka_2() -> None:
    assert offset_truncation_state(TP, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, 7, 10,
                                   follower_epochs((3, 0))) == OffsetTruncationState(7, True)
    assert offset_truncation_state(TP, UNDEFINED_EPOCH, 5, 7, 10,
                                   follower_epochs((3, 0))) == OffsetTruncationState(5, True)
    # The leader's epoch is below all the follower tracks: trust the leader's offset.
    assert offset_truncation_state(TP, 1, 4, 0, 10, follower_epochs((3, 0))) == OffsetTruncationState(4, True)
    # Never past the follower's own log end.
    assert offset_truncation_state(TP, 3, 50, 0, 10, follower_epochs((3, 0))) == OffsetTruncationState(10, True)


@pytest.mark.parametrize(("replica_end", "leader_end", "leader_start", "expected"), [
    (10, 8, 0, OutOfRangeReset(OutOfRangeAction.TRUNCATE_TO, 8)),
    (3, 20, 6, OutOfRangeReset(OutOfRangeAction.TRUNCATE_FULLY_AND_START_AT, 6)),
    (8, 20, 6, OutOfRangeReset(OutOfRangeAction.FETCH_FROM, 8)),
])
def test_out_of_range(replica_end: int, leader_end: int, leader_start: int, expected: OutOfRangeReset) -> None:
    assert out_of_range_reset(replica_end, leader_end, leader_start) == expected


# ------------------------------------------------------------------ a fetcher thread against a local leader


class LocalLeader:
    """LeaderEndPoint served by a leader Partition in this process, as KafkaApis would serve it."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        self.epoch_requests: list[dict[TopicPartition, EpochRequest]] = []

    def fetch(self, partitions: FetchPartitions) -> dict[TopicPartition, FetchResponsePartition]:
        answers = {}
        for p in partitions.entries.values():
            try:
                read = self.partition.read_records(p.fetch_offset, p.current_leader_epoch, p.max_bytes,
                                                   FetchIsolation.LOG_END, True, True)
            except KafkaError as e:
                answers[p.topic_partition] = FetchResponsePartition(e.code)
                continue
            records = read.fetched_data.records
            answers[p.topic_partition] = FetchResponsePartition(
                ErrorCode.NONE, read.high_watermark, read.log_start_offset, records.read() if records.size else b"")
        return answers

    def offsets_for_leader_epoch(self, partitions: dict[TopicPartition, EpochRequest]
                                 ) -> dict[TopicPartition, EpochEndOffset]:
        self.epoch_requests.append(dict(partitions))
        answers = {}
        for tp, request in partitions.items():
            try:
                epoch, end = self.partition.last_offset_for_leader_epoch(request.current_leader_epoch,
                                                                         request.leader_epoch)
                answers[tp] = EpochEndOffset(ErrorCode.NONE, epoch, end)
            except KafkaError as e:
                answers[tp] = EpochEndOffset(e.code)
        return answers

    def list_offset(self, tp: TopicPartition, current_leader_epoch: int, timestamp: int) -> int:
        found = self.partition.fetch_offset_for_timestamp(timestamp, None, current_leader_epoch)
        assert found is not None
        return found.offset

    def close(self) -> None:
        pass


def records(*values: str) -> bytes:
    return build_batch([ProducerRecord(v.encode(), timestamp=1_000) for v in values])


class Replicas:
    """A leader (broker 2) and a follower (broker 1) of TP, each with its own log dir."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = FakeClock()
        self.managers = {}
        for broker_id in (LOCAL, LEADER):
            manager = LogManager([tmp_path / f"broker-{broker_id}"], topic_config().log, broker_id=broker_id,
                                 time_ms=self.clock)
            manager.startup()
            self.managers[broker_id] = manager
        self.leader = self._partition(LEADER)
        self.leader_end_point = LocalLeader(self.leader)
        self.follower = self._partition(LOCAL)
        self.failed: list[TopicPartition] = []

    def _partition(self, broker_id: int) -> Partition:
        return Partition(TP, local_broker_id=broker_id, log_manager=self.managers[broker_id],
                         topic_config=topic_config(), time_ms=self.clock)

    def write(self, broker_id: int, epoch: int, *values: str) -> None:
        """Records written by a past leader in `epoch` (both logs start as leader logs of the past)."""
        self.managers[broker_id].get_or_create_log(TP).append_as_leader(records(*values), epoch)

    def lead(self, epoch: int) -> None:
        self.leader.make_leader(leader_state(LEADER, epoch, (LEADER, LOCAL)), no_checkpoint)

    def follow(self, epoch: int) -> ReplicaFetcherThread:
        self.follower.make_follower(leader_state(LEADER, epoch, (LEADER, LOCAL)), no_checkpoint)
        lookup: PartitionLookup = {TP: self.follower}.get
        thread = ReplicaFetcherThread("ReplicaFetcherThread-0-2", LOCAL, 0, LEADER_END_POINT, self.leader_end_point,
                                      lookup, CONFIG, self.failed.append, time_ms=self.clock)
        thread.add_partitions({TP: InitialFetchState(LEADER_END_POINT, epoch, self.follower.high_watermark)})
        return thread

    def segment(self, broker_id: int) -> bytes:
        log = self.managers[broker_id].get_log(TP)
        assert log is not None
        return b"".join((log.dir / f"{s.base_offset:020d}.log").read_bytes() for s in log.segments)


def test_diverged_follower_truncates_over_two_rounds_then_matches_the_leader(tmp_path: Path) -> None:
    """KIP-279: leader epochs (0@0, 1@2, 3@4); the follower has (0@0, 2@3): epoch 0 went one record further
    there, and epoch 2 never reached the leader."""
    r = Replicas(tmp_path)
    r.write(LEADER, 0, "a", "b")
    r.write(LEADER, 1, "c", "d")
    r.write(LOCAL, 0, "a", "b", "x")
    r.write(LOCAL, 2, "y", "z")
    r.lead(3)
    r.leader.append_records_to_leader(records("e", "f"), required_acks=1)
    thread = r.follow(3)
    leader = r.leader_end_point

    thread.do_work()  # round 1: asks for epoch 2, the leader answers epoch 1 -> cut to 3, ask again
    state = thread.partition_states()[TP]
    assert (state.state, state.fetch_offset) == (FetchState.TRUNCATING, 3)
    thread.do_work()  # round 2: asks for epoch 0, which ends at 2 on the leader -> cut to 2, fetch from there
    assert [request[TP].leader_epoch for request in leader.epoch_requests] == [2, 0]
    assert r.segment(LOCAL) == r.segment(LEADER)
    assert r.follower.high_watermark == 0  # the leader's: the follower's own fetches move it
    assert not r.failed


def test_a_follower_without_epochs_truncates_to_its_high_watermark_then_fetches(tmp_path: Path) -> None:
    r = Replicas(tmp_path)
    r.lead(0)
    r.leader.append_records_to_leader(records("a", "b", "c"), required_acks=1)
    thread = r.follow(0)
    thread.do_work()
    thread.do_work()
    assert r.segment(LOCAL) == r.segment(LEADER)
    assert thread.partition_states()[TP].fetch_offset == 3


def test_out_of_range_below_the_leaders_log_start_starts_over_there(tmp_path: Path) -> None:
    r = Replicas(tmp_path)
    r.lead(0)
    for i in range(5):
        r.leader.append_records_to_leader(records(f"r{i}"), required_acks=1)
    log = r.leader.log
    assert log is not None
    log.maybe_increment_log_start_offset(3)
    thread = r.follow(0)
    thread.do_work()  # truncate (no epochs), fetch at 0: OFFSET_OUT_OF_RANGE, reset to the leader's start
    state = thread.partition_states()[TP]
    assert (state.state, state.fetch_offset) == (FetchState.FETCHING, 3)
    thread.do_work()
    assert r.follower.log is not None
    assert (r.follower.log.log_start_offset, r.follower.log.log_end_offset) == (3, 5)


def test_a_fenced_partition_is_marked_failed_and_waits_for_leader_and_isr(tmp_path: Path) -> None:
    r = Replicas(tmp_path)
    r.write(LOCAL, 0, "a")
    r.lead(5)  # the leader is already in epoch 5; this follower was told epoch 4
    thread = r.follow(4)
    thread.do_work()
    assert r.failed == [TP] and thread.partition_count == 0
    # The next LeaderAndIsr re-adds it in the new epoch.
    thread.add_partitions({TP: InitialFetchState(LEADER_END_POINT, 5, 0)})
    r.follower.make_follower(leader_state(LEADER, 5, (LEADER, LOCAL)), no_checkpoint)
    thread.do_work()
    assert thread.partition_states()[TP].state is FetchState.FETCHING


def test_a_storage_error_fails_only_its_partition(tmp_path: Path) -> None:
    r = Replicas(tmp_path)
    r.lead(0)
    r.leader.append_records_to_leader(records("a"), required_acks=1)
    thread = r.follow(0)
    thread.do_work()  # truncated, fetching
    other = TopicPartition("other", 0)

    class BrokenDisk:
        def latest_epoch(self, leader_epoch: int) -> int | None:
            raise OSError("disk gone")

    thread._partitions = {TP: r.follower, other: BrokenDisk()}.get  # type: ignore[assignment]
    thread.add_partitions({other: InitialFetchState(LEADER_END_POINT, 0, 0)})
    thread.do_work()
    assert r.failed == [other]
    assert r.segment(LOCAL) == r.segment(LEADER)


# ------------------------------------------------------------------ the manager


class IdleThread(ReplicaFetcherThread):
    """Fetches nothing: the manager's bookkeeping is under test, not replication."""

    def run(self) -> None:
        while self._running:
            self._sleep(20)


class NoLeader:
    def close(self) -> None:
        pass


def test_manager_assigns_threads_by_leader_and_fetcher_id(tmp_path: Path) -> None:
    manager = ReplicaFetcherManager(LOCAL, ReplicaFetcherConfig(num_replica_fetchers=2),
                                    lambda leader: NoLeader(),  # type: ignore[arg-type,return-value]
                                    lambda tp: None, create_thread=IdleThread)
    leader3 = BrokerEndPoint(3, "127.0.0.1", 9003)
    tps = [TopicPartition("t", p) for p in range(4)]
    try:
        manager.add_fetcher_for_partitions({tp: InitialFetchState(LEADER_END_POINT, 0, 0) for tp in tps[:3]}
                                           | {tps[3]: InitialFetchState(leader3, 0, 0)})
        threads = manager.fetcher_threads()
        expected = {(LEADER, fetcher_id(tp, 2)) for tp in tps[:3]} | {(3, fetcher_id(tps[3], 2))}
        assert set(threads) == expected
        assert {t.name for t in threads.values()} == {f"ReplicaFetcherThread-{f}-{b}" for b, f in expected}
        # The leader of t-3 moves to broker 2: become-follower removes, then adds for the new leader.
        manager.remove_fetcher_for_partitions([tps[3]])
        manager.add_fetcher_for_partitions({tps[3]: InitialFetchState(LEADER_END_POINT, 1, 0)})
        manager.shutdown_idle_fetcher_threads()
        assert all(b == LEADER for b, _ in manager.fetcher_threads())
        old = threads[(3, fetcher_id(tps[3], 2))]
        old.join(5)
        assert not old.is_alive()
        manager.remove_fetcher_for_partitions(tps)
        manager.shutdown_idle_fetcher_threads()
        assert manager.fetcher_threads() == {}
    finally:
        manager.shutdown()


def test_num_replica_fetchers_changed_live_moves_partitions_with_their_positions(tmp_path: Path) -> None:
    """Kafka's resizeThreadPool: each partition goes to the thread its new fetcher id names, from its offset."""
    manager = ReplicaFetcherManager(LOCAL, ReplicaFetcherConfig(num_replica_fetchers=1),
                                    lambda leader: NoLeader(),  # type: ignore[arg-type,return-value]
                                    lambda tp: None, create_thread=IdleThread)
    tps = [TopicPartition("t", p) for p in range(6)]
    try:
        manager.add_fetcher_for_partitions({tp: InitialFetchState(LEADER_END_POINT, 4, 10 * i)
                                            for i, tp in enumerate(tps)})
        assert set(manager.fetcher_threads()) == {(LEADER, 0)}
        manager.resize_thread_pool(3)
        threads = manager.fetcher_threads()
        assert set(threads) == {(LEADER, fetcher_id(tp, 3)) for tp in tps}
        moved = {tp: (s.fetch_offset, s.current_leader_epoch)
                 for thread in threads.values() for tp, s in thread.partition_states().items()}
        assert moved == {tp: (10 * i, 4) for i, tp in enumerate(tps)}
        for (_, fid), thread in threads.items():
            assert all(fetcher_id(tp, 3) == fid for tp in thread.partition_states())
        manager.resize_thread_pool(1)
        assert set(manager.fetcher_threads()) == {(LEADER, 0)}
    finally:
        manager.shutdown()


def test_failed_partitions_count_until_a_fetcher_takes_them_again(tmp_path: Path) -> None:
    """Kafka's FailedPartitionsCount: a partition a thread gave up on counts until become-follower re-adds it."""
    manager = ReplicaFetcherManager(LOCAL, ReplicaFetcherConfig(num_replica_fetchers=1),
                                    lambda leader: NoLeader(),  # type: ignore[arg-type,return-value]
                                    lambda tp: None, create_thread=IdleThread)
    tps = [TopicPartition("t", p) for p in range(2)]
    try:
        manager.add_fetcher_for_partitions({tp: InitialFetchState(LEADER_END_POINT, 0, 0) for tp in tps})
        thread = manager.fetcher_threads()[(LEADER, 0)]
        with thread._cond:
            thread._fail(tps[0])
        assert manager.failed_partitions_count() == 1 and thread.partition_count == 1
        manager.add_fetcher_for_partitions({tps[0]: InitialFetchState(LEADER_END_POINT, 1, 0)})
        assert manager.failed_partitions_count() == 0
    finally:
        manager.shutdown()

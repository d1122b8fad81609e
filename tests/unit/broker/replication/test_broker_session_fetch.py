"""A follower's fetches in a fetch session, through the ReplicaManager over real logs (a mock timer and a fake
clock): what an incremental fetch reads, what wakes it, the high watermark's way to the follower, the ISR."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.replication.delayed_fetch import FetchParams, FetchResults, LogReadResult, PartitionFetchInfo
from broker.replication.fetch_session import INITIAL_EPOCH, FetchAnswer, FetchSessionRequest
from broker.replication.partition import FetchIsolation
from broker.replication.partition_state_store import IsrUpdateResult
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.unit.broker.broker_helpers import TP, Answers, Harness, batch, produce
from zk.paths import LeaderIsrAndControllerEpoch

FOLLOWER = 2
OTHER = TopicPartition("orders", 1)
LAG_MS = 10_000


class Follower:
    """Broker 2's fetches of TP and OTHER as its fetcher thread makes them, in one session."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.offsets = {TP: 0, OTHER: 0}
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.reads: list[list[TopicPartition]] = []
        read = h.replica_manager.read_from_local_log

        def counted(params: FetchParams, infos: list[PartitionFetchInfo]) -> FetchResults:
            self.reads.append([i.topic_partition for i in infos])
            return read(params, infos)

        h.replica_manager.read_from_local_log = counted  # type: ignore[method-assign]

    def send(self, *named: TopicPartition, max_wait_ms: int = 500) -> Answers:
        """A fetch naming `named` (every partition when the session is new); its answer comes to the Answers
        as a FetchAnswer, now or when the parked fetch completes."""
        tps = list(self.offsets) if self.epoch == INITIAL_EPOCH else list(named)
        request = FetchSessionRequest(self.session_id, self.epoch,
                                      [PartitionFetchInfo(tp, self.offsets[tp], 0, 1 << 20, 0) for tp in tps],
                                      replica_id=FOLLOWER)
        context = self.h.replica_manager.fetch_session_cache.new_context(request)
        answers = Answers()
        params = FetchParams(FOLLOWER, max_wait_ms, 1, 1 << 20, FetchIsolation.LOG_END, True)

        def answered(results: FetchResults) -> None:
            answer = context.answer(results)
            assert answer.error is ErrorCode.NONE
            self.session_id = answer.session_id
            self.epoch = 1 if self.epoch == INITIAL_EPOCH else self.epoch + 1
            answers(answer)

        self.h.replica_manager.fetch_messages(params, context.partitions_to_read(), answered, context)
        return answers

    def fetch(self, *named: TopicPartition) -> dict[TopicPartition, tuple[int, int]]:
        """One immediate fetch: each answered partition's (high watermark, bytes); appends move the offsets."""
        answer: FetchAnswer = self.send(*named, max_wait_ms=0).value
        return {i.topic_partition: (r.high_watermark, r.size) for i, r in answer.results}


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    h = Harness(tmp_path, replica_lag_time_max_ms=LAG_MS)
    for tp in (TP, OTHER):
        h.lead(tp, isr=(1, FOLLOWER))
    return h


def test_an_idle_followers_fetch_reads_no_partition_and_answers_none(h: Harness) -> None:
    follower = Follower(h)
    assert set(follower.fetch()) == {TP, OTHER}  # the full fetch: every partition, the session opened
    follower.reads.clear()
    parked = follower.send()
    assert not parked.calls
    h.timer.advance(500)
    assert parked.value.results == [] and parked.value.session_id == follower.session_id
    assert follower.reads == [[], []]  # the first read and the one at expiry: neither touched a partition


def test_a_followers_first_fetch_is_answered_at_once_and_read_once(h: Harness) -> None:
    """Beyond Kafka: nothing to read, yet not parked. The follower learns every partition's high watermark now,
    and the leader reads its partitions once, not again at the wait's expiry (thousands, at scale)."""
    follower = Follower(h)
    first = follower.send()
    assert {i.topic_partition for i, _ in first.value.results} == {TP, OTHER}
    assert follower.reads == [[TP, OTHER]] and h.timer.pending == 0
    # The session's next fetch brings nothing new and waits as a long poll should.
    assert not follower.send().calls


def test_an_incremental_fetch_naming_a_partition_new_to_its_session_is_answered_at_once(h: Harness) -> None:
    follower = Follower(h)
    del follower.offsets[OTHER]
    follower.fetch()  # a session of TP alone
    follower.offsets[OTHER] = 0
    follower.reads.clear()
    added = follower.send(OTHER)
    assert [i.topic_partition for i, _ in added.value.results] == [OTHER]
    assert follower.reads == [[OTHER]] and h.timer.pending == 0
    # Named again, it is no longer new: the fetch waits for data.
    assert not follower.send(OTHER).calls


def test_an_append_wakes_the_parked_fetch_through_the_session(h: Harness) -> None:
    follower = Follower(h)
    follower.fetch()
    parked = follower.send()
    produce(h, batch(3), acks=1, tp=OTHER)
    answer: FetchAnswer = parked.value
    assert [(i.topic_partition, r.size > 0) for i, r in answer.results] == [(OTHER, True)]
    assert h.timer.pending == 0


def test_the_high_watermark_reaches_the_follower_in_the_answer_to_its_next_offset(h: Harness) -> None:
    follower = Follower(h)
    follower.fetch()
    produce(h, batch(3), acks=1)
    assert follower.fetch()[TP][1] > 0  # the records, with the HW still 0
    follower.offsets[TP] = 3
    # The fetch naming offset 3 moves the leader's HW; the parked answer carries it without a new record.
    parked = follower.send(TP)
    h.timer.advance(500)
    assert {i.topic_partition: r.high_watermark for i, r in parked.value.results} == {TP: 3}
    assert h.replica_manager.high_watermark(TP) == 3
    # Sent once: the next idle fetch has nothing to say.
    assert follower.fetch() == {}


def test_an_idle_caught_up_follower_stays_in_the_isr_through_an_append(h: Harness) -> None:
    """Kafka reads every session partition at every fetch, so a follower at the log end is caught up as of its
    last fetch. Here no idle partition is read: its first change must still credit the session's last fetch,
    or the ISR shrink task, running between an append and the follower's next fetch, drops it."""
    follower = Follower(h)
    follower.fetch()
    for _ in range(2 * LAG_MS // 500):
        h.clock.advance(500)
        follower.fetch()
    produce(h, batch(3), acks=1)
    h.clock.advance(100)
    h.replica_manager.maybe_shrink_isr()
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and partition.in_sync_replica_ids == {1, FOLLOWER}


def test_a_stuck_follower_still_leaves_the_isr(h: Harness) -> None:
    follower = Follower(h)
    follower.fetch()
    produce(h, batch(3), acks=1)
    h.clock.advance(LAG_MS + 1)  # no fetch at all since the append
    h.replica_manager.maybe_shrink_isr()
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and partition.in_sync_replica_ids == {1}


def test_losing_leadership_is_answered_to_the_session(h: Harness) -> None:
    follower = Follower(h)
    follower.fetch()
    parked = follower.send()
    h.replica_manager.stop_replicas(0, 1, True, [TP])
    answer: FetchAnswer = parked.value
    assert [(i.topic_partition, r.error) for i, r in answer.results] == [(TP, ErrorCode.NOT_LEADER_OR_FOLLOWER)]


def test_a_caught_up_follower_dropped_from_the_isr_rejoins_at_its_next_fetch(h: Harness) -> None:
    """Kafka reads every session partition at every fetch, so a follower dropped from the ISR while its fetch
    reached the log end rejoins at its next fetch. Here its fetch at the log end came while the shrink was
    being written (so it still counted as in the ISR, and its offset moved the high watermark then), and that
    parked fetch was answered at its max wait: the follower has nothing new to name. Unless a partition whose
    follower is out of its ISR is read at each of its fetches, it never rejoins while the partition is idle
    (the paused followers of test_replication.py, their ISR writes racing their fetches)."""
    follower = Follower(h)
    follower.fetch()
    produce(h, batch(3), acks=1)
    assert follower.fetch()[TP][1] > 0
    follower.offsets[TP] = 3  # the follower appended the records; it says so at its next fetch
    shrink = h.state_store.shrink_isr
    parked: list[Answers] = []

    def fetched_meanwhile(tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> IsrUpdateResult:
        parked.append(follower.send(TP))  # at the log end: it parks
        return shrink(tp, state)

    h.state_store.shrink_isr = fetched_meanwhile  # type: ignore[method-assign]
    h.clock.advance(LAG_MS + 1)
    h.replica_manager.maybe_shrink_isr()
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and partition.in_sync_replica_ids == {1}
    h.timer.advance(500)
    # The parked fetch is answered the high watermark its own offset moved: the follower has nothing new to name.
    assert {i.topic_partition: r.high_watermark for i, r in parked[0].value.results} == {TP: 3}
    follower.fetch()
    assert partition.in_sync_replica_ids == {1, FOLLOWER}


def test_delete_records_tells_the_session_the_new_log_start(h: Harness) -> None:
    """DeleteRecords moves the leader's log start offset and waits until every in-sync follower's low watermark
    follows (Kafka's DelayedDeleteRecords). A follower learns it from a fetch answer, and an incremental answer
    names only changed partitions: unless the move marks the partition, the follower never hears of it and the
    DeleteRecords times out (kafka-delete-records.sh against three brokers did)."""
    follower = Follower(h)
    follower.fetch()
    produce(h, batch(3), acks=1)
    follower.fetch()
    follower.offsets[TP] = 3
    follower.fetch(TP)  # the follower has every record; the high watermark is 3
    assert h.replica_manager.high_watermark(TP) == 3
    assert follower.fetch() == {TP: (3, 0)}  # the high watermark told
    assert follower.fetch() == {}  # nothing changed since
    answers = Answers()
    h.replica_manager.delete_records(1000, {TP: 2}, answers)
    assert not answers.calls  # waits for the follower's low watermark
    assert {tp: r.log_start_offset for tp, r in _answered(follower.send(max_wait_ms=0))} == {TP: 2}


def _answered(answers: Answers) -> list[tuple[TopicPartition, LogReadResult]]:
    return [(i.topic_partition, r) for i, r in answers.value.results]


def test_a_log_start_moved_by_retention_reaches_the_fetcher_too(h: Harness) -> None:
    """On a follower, the moved log start goes to the leader in this broker's next fetch, for the leader's low
    watermark; the fetcher builds a partition's entry only when told it changed (its rounds do per-change work)."""
    h.replica_manager.log_start_offset_moved(TP)
    assert h.fetcher_manager.log_start_moves == [TP]

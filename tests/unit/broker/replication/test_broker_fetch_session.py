"""The leader's fetch session rules (broker/replication/fetch_session.py), on a fake clock."""

from __future__ import annotations

from typing import cast

import pytest

from broker.log.file_slice import FileSlice, SharedFile
from broker.replication.delayed_fetch import FetchResults, LogReadResult, PartitionFetchInfo
from broker.replication.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchContext,
    FetchSessionCache,
    FetchSessionRequest,
    SessionKey,
    next_epoch,
)
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.fakes import FakeClock

TPS = [TopicPartition("t", p) for p in range(4)]
EVICTION_MS = 120_000
FOLLOWER = 2


def info(tp: TopicPartition, offset: int = 10, epoch: int = 3) -> PartitionFetchInfo:
    return PartitionFetchInfo(tp, offset, 0, 1024, epoch)


def result(hw: int = 10, log_start: int = 0, size: int = 0, error: ErrorCode = ErrorCode.NONE) -> LogReadResult:
    records = FileSlice(cast(SharedFile, None), 0, size) if size else None
    return LogReadResult(error, records, hw, log_start)


def read_all(context: FetchContext, **results: LogReadResult) -> FetchResults:
    """What the ReplicaManager would read: each partition's result (by 'p<n>', else nothing new)."""
    return [(i, results.get(f"p{i.topic_partition.partition}", result())) for i in context.partitions_to_read()]


def full(cache: FetchSessionCache, *tps: TopicPartition, follower: bool = True, session_id: int = 0) -> int:
    context = cache.new_context(FetchSessionRequest(session_id, INITIAL_EPOCH, [info(tp) for tp in tps],
                                                    replica_id=FOLLOWER if follower else -1))
    answer = context.answer(read_all(context))
    assert answer.error is ErrorCode.NONE and [i.topic_partition for i, _ in answer.results] == list(tps)
    return answer.session_id


def incremental(cache: FetchSessionCache, session_id: int, epoch: int, *named: PartitionFetchInfo,
                forgotten: tuple[TopicPartition, ...] = ()) -> FetchContext:
    return cache.new_context(FetchSessionRequest(session_id, epoch, list(named), forgotten, FOLLOWER))


def read_tps(context: FetchContext) -> list[TopicPartition]:
    return [i.topic_partition for i in context.partitions_to_read()]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cache(clock: FakeClock) -> FetchSessionCache:
    return FetchSessionCache(max_slots=2, time_ms=clock, eviction_ms=EVICTION_MS)


def test_a_full_fetch_creates_a_session_at_epoch_one_holding_every_partition(cache: FetchSessionCache) -> None:
    session_id = full(cache, *TPS)
    assert session_id != INVALID_SESSION_ID
    session = cache.get(session_id)
    assert session is not None and session.epoch == 1 and list(session.partitions) == TPS
    assert len(cache) == 1 and cache.total_partitions() == 4


def test_an_idle_incremental_fetch_reads_nothing_and_answers_nothing(cache: FetchSessionCache) -> None:
    session_id = full(cache, *TPS)
    context = incremental(cache, session_id, 1)
    assert context.error is ErrorCode.NONE and context.partitions_to_read() == []
    answer = context.answer([])
    assert (answer.error, answer.session_id, answer.results) == (ErrorCode.NONE, session_id, [])
    assert cache.get(session_id).epoch == 2  # type: ignore[union-attr]


def test_a_changed_partition_is_read_and_answered_only_with_a_new_hw_log_start_records_or_error(
        cache: FetchSessionCache) -> None:
    session_id = full(cache, *TPS)
    assert [c.key for c in cache.mark_changed(TPS[1])] == [SessionKey(session_id)]
    cache.mark_changed(TPS[2])
    context = incremental(cache, session_id, 1)
    assert sorted(read_tps(context)) == [TPS[1], TPS[2]]
    # p1's high watermark moved; p2's read shows nothing new (the change was, say, a follower's offset).
    answer = context.answer(read_all(context, p1=result(hw=11)))
    assert [i.topic_partition for i, _ in answer.results] == [TPS[1]]
    # The HW was sent: the same HW again is not news.
    cache.mark_changed(TPS[1])
    context = incremental(cache, session_id, 2)
    assert context.answer(read_all(context, p1=result(hw=11))).results == []
    news = [result(log_start=5), result(size=100), result(error=ErrorCode.NOT_LEADER_OR_FOLLOWER)]
    for epoch, new in enumerate(news, start=3):
        cache.mark_changed(TPS[1])
        context = incremental(cache, session_id, epoch)
        assert [i.topic_partition for i, _ in context.answer(read_all(context, p1=new)).results] == [TPS[1]]


def test_an_error_makes_the_partition_news_again_once_it_clears(cache: FetchSessionCache) -> None:
    session_id = full(cache, TPS[0])
    cache.mark_changed(TPS[0])
    context = incremental(cache, session_id, 1)
    context.answer(read_all(context, p0=result(error=ErrorCode.NOT_LEADER_OR_FOLLOWER)))
    cache.mark_changed(TPS[0])
    context = incremental(cache, session_id, 2)
    # Same HW as before the error, but the follower last saw an error: it must hear the partition is fine.
    assert len(context.answer(read_all(context, p0=result(hw=10))).results) == 1


def test_named_partitions_update_the_session_and_are_read_first(cache: FetchSessionCache) -> None:
    session_id = full(cache, *TPS)
    cache.mark_changed(TPS[3])
    context = incremental(cache, session_id, 1, info(TPS[0], offset=12))
    assert read_tps(context) == [TPS[0], TPS[3]]
    session = cache.get(session_id)
    assert session is not None and session.partitions[TPS[0]].fetch_offset == 12
    # An answered partition goes to the back of the session (the next read's byte budget to the others).
    context.answer(read_all(context, p0=result(size=10)))
    assert list(session.partitions) == [TPS[1], TPS[2], TPS[3], TPS[0]]


def test_a_named_partition_new_to_the_session_is_added(cache: FetchSessionCache) -> None:
    session_id = full(cache, TPS[0])
    context = incremental(cache, session_id, 1, info(TPS[1]))
    assert read_tps(context) == [TPS[1]]
    assert [c.key for c in cache.mark_changed(TPS[1])] == [SessionKey(session_id)]


def test_forgotten_partitions_leave_the_session_and_its_index(cache: FetchSessionCache) -> None:
    session_id = full(cache, *TPS[:2])
    cache.mark_changed(TPS[1])
    context = incremental(cache, session_id, 1, forgotten=(TPS[1],))
    assert read_tps(context) == []
    assert cache.mark_changed(TPS[1]) == []
    # Forgetting the last one ends the session: the fetch is answered without one.
    context = incremental(cache, session_id, 2, forgotten=(TPS[0],))
    assert context.answer([]).session_id == INVALID_SESSION_ID
    assert cache.get(session_id) is None and cache.mark_changed(TPS[0]) == []


def test_an_unknown_session_and_a_wrong_epoch_are_refused_with_kafkas_codes(cache: FetchSessionCache) -> None:
    session_id = full(cache, TPS[0])
    unknown = incremental(cache, session_id + 1, 1)
    assert unknown.error is ErrorCode.FETCH_SESSION_ID_NOT_FOUND and unknown.partitions_to_read() == []
    stale = incremental(cache, session_id, 5)
    assert stale.partitions_to_read() == []
    assert stale.answer([]).error is ErrorCode.INVALID_FETCH_SESSION_EPOCH
    # The refused fetch did not move the session on.
    assert incremental(cache, session_id, 1).error is ErrorCode.NONE


def test_a_fetch_overtaken_in_its_session_is_answered_invalid_epoch(cache: FetchSessionCache) -> None:
    """Kafka's check at response time: a duplicate request moved the epoch on while this one waited."""
    session_id = full(cache, TPS[0])
    first = incremental(cache, session_id, 1)
    cache.remove(session_id)
    session_id = full(cache, TPS[0])
    assert first.answer([]).error is ErrorCode.INVALID_FETCH_SESSION_EPOCH
    second = incremental(cache, session_id, 1)
    incremental(cache, session_id, 2)
    assert second.answer([]).error is ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_a_full_fetch_closes_the_session_it_names_and_final_epoch_creates_none(cache: FetchSessionCache) -> None:
    old = full(cache, TPS[0])
    new = full(cache, TPS[0], session_id=old)
    assert new != old and cache.get(old) is None and len(cache) == 1
    context = cache.new_context(FetchSessionRequest(new, FINAL_EPOCH, [info(TPS[0])]))
    assert context.answer(read_all(context)).session_id == INVALID_SESSION_ID
    assert len(cache) == 0


def test_partitions_changed_while_the_fetch_waits_are_taken_once(cache: FetchSessionCache) -> None:
    session_id = full(cache, *TPS)
    context = incremental(cache, session_id, 1)
    cache.mark_changed(TPS[2])
    assert [i.topic_partition for i in context.take_changed()] == [TPS[2]]
    assert context.take_changed() == []
    assert context.wake_key == SessionKey(session_id)


def test_a_partitions_first_change_says_when_the_follower_last_fetched_it_unchanged(
        cache: FetchSessionCache, clock: FakeClock) -> None:
    """What the ISR's caught-up rule would have learnt from Kafka's read of the partition at that fetch."""
    session_id = full(cache, *TPS[:2])
    clock.advance(500)
    incremental(cache, session_id, 1)
    last_fetch = clock.now
    clock.advance(300)
    first, = cache.mark_changed(TPS[1])
    assert (first.key, first.replica_id, first.unchanged_at_ms) == (SessionKey(session_id), FOLLOWER, last_fetch)
    # A second change before the partition is read again says nothing more: it was not unchanged since.
    again, = cache.mark_changed(TPS[1])
    assert again.unchanged_at_ms is None
    clock.advance(200)
    context = incremental(cache, session_id, 2)
    assert read_tps(context) == [TPS[1]]
    first, = cache.mark_changed(TPS[1])
    assert first.unchanged_at_ms == clock.now


def test_slots_a_followers_session_evicts_a_consumers(cache: FetchSessionCache) -> None:
    consumer = full(cache, TPS[0], follower=False)
    full(cache, TPS[1])
    follower = full(cache, TPS[2])
    assert follower != INVALID_SESSION_ID and cache.get(consumer) is None and cache.evictions == 1


def test_slots_a_consumer_cannot_evict_a_recent_session(cache: FetchSessionCache, clock: FakeClock) -> None:
    full(cache, TPS[0])
    full(cache, TPS[1], follower=False)
    assert full(cache, TPS[2], TPS[3], follower=False) == INVALID_SESSION_ID
    assert cache.evictions == 0


def test_slots_a_session_unused_for_the_eviction_time_goes_first(cache: FetchSessionCache, clock: FakeClock) -> None:
    stale = full(cache, TPS[0])
    clock.advance(EVICTION_MS / 2)
    kept = full(cache, TPS[1])
    clock.advance(EVICTION_MS / 2 + 1)
    assert full(cache, TPS[2], follower=False) != INVALID_SESSION_ID
    assert cache.get(stale) is None and cache.get(kept) is not None


def test_slots_an_old_session_is_evicted_by_a_larger_one(cache: FetchSessionCache, clock: FakeClock) -> None:
    small = full(cache, TPS[0])
    big = full(cache, *TPS[:3])
    clock.advance(EVICTION_MS / 2)
    incremental(cache, small, 1)
    incremental(cache, big, 1)
    clock.advance(EVICTION_MS / 2 + 1)  # both created over eviction_ms ago, both used since
    assert full(cache, TPS[0], follower=False) == INVALID_SESSION_ID  # not larger than either
    assert full(cache, *TPS[:2]) != INVALID_SESSION_ID
    assert cache.get(small) is None and cache.get(big) is not None


def test_no_slots_means_sessionless_answers(clock: FakeClock) -> None:
    cache = FetchSessionCache(max_slots=0, time_ms=clock)
    assert full(cache, TPS[0]) == INVALID_SESSION_ID


def test_next_epoch_wraps_to_one_and_final_stays_final() -> None:
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_a_partition_answered_with_an_error_is_read_again_at_the_next_fetch(cache: FetchSessionCache) -> None:
    """The follower names nothing new (its fetch state is the same) and nothing marks the cure (say, this broker
    becoming the leader after the follower's first fetch): the error itself keeps the partition read."""
    context = cache.new_context(FetchSessionRequest(0, INITIAL_EPOCH, [info(tp) for tp in TPS[:2]],
                                                    replica_id=FOLLOWER))
    session_id = context.answer(read_all(context, p0=result(error=ErrorCode.NOT_LEADER_OR_FOLLOWER))).session_id
    context = incremental(cache, session_id, 1)
    assert read_tps(context) == [TPS[0]]
    assert len(context.answer(read_all(context, p0=result(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))).results) == 1
    context = incremental(cache, session_id, 2)
    assert read_tps(context) == [TPS[0]]
    assert [i.topic_partition for i, _ in context.answer(read_all(context)).results] == [TPS[0]]  # cured: news
    assert read_tps(incremental(cache, session_id, 3)) == []

"""DelayedFetch.try_complete: a follower's long poll names every partition it follows, and each append to any
of them checks it; the check stops at the partition that brings it to min_bytes instead of asking every other,
and a check woken by a partition's key looks at that partition alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from broker.log.log import LogOffsetMetadata
from broker.replication.delayed_fetch import (
    DelayedFetch,
    FetchParams,
    FetchResponseCallback,
    FetchResults,
    PartitionFetchInfo,
)
from broker.replication.partition import FetchIsolation, LogOffsetSnapshot, Partition
from proto.types import TopicPartition

PARTITIONS = 1000


class Source:
    """Partitions at offset 0, except those in `appended`, which hold 100 bytes; counts what it was asked."""

    def __init__(self, appended: set[int]) -> None:
        self.appended = appended
        self.asked: list[TopicPartition] = []
        self.read: list[Sequence[PartitionFetchInfo]] = []

    def get_partition_or_error(self, tp: TopicPartition) -> Partition:
        self.asked.append(tp)
        end = LogOffsetMetadata(1, 0, 100) if tp.partition in self.appended else LogOffsetMetadata(0, 0, 0)
        snapshot = LogOffsetSnapshot(0, end, end, end)
        return cast(Partition, cast(Any, type("P", (), {"fetch_offset_snapshot": lambda *_: snapshot}))())

    def read_from_local_log(self, params: FetchParams, infos: Sequence[PartitionFetchInfo]) -> FetchResults:
        self.read.append(infos)
        return []

    def read_and_answer(self, params: FetchParams, infos: Sequence[PartitionFetchInfo],
                        response_callback: FetchResponseCallback) -> None:
        response_callback(self.read_from_local_log(params, infos))


def follower_fetch(source: Source) -> DelayedFetch:
    params = FetchParams(replica_id=2, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
                         isolation=FetchIsolation.LOG_END, fetch_only_from_leader=True)
    status = [(PartitionFetchInfo(TopicPartition("wide", p), 0, 0, 1 << 20, 0), LogOffsetMetadata(0, 0, 0))
              for p in range(PARTITIONS)]
    return DelayedFetch(params, status, source, lambda _: None)


def test_the_check_stops_at_the_partition_that_reaches_min_bytes() -> None:
    source = Source(appended={3})
    fetch = follower_fetch(source)
    assert fetch.try_complete()
    assert [tp.partition for tp in source.asked] == [0, 1, 2, 3]
    assert len(source.read) == 1 and len(source.read[0]) == PARTITIONS  # the answer still reads them all


def test_nothing_readable_asks_every_partition_and_waits() -> None:
    source = Source(appended=set())
    fetch = follower_fetch(source)
    assert not fetch.try_complete() and not fetch.is_completed
    assert len(source.asked) == PARTITIONS and source.read == []


def test_a_woken_check_looks_only_at_the_woken_partition() -> None:
    """Records spread thin: every partition of the poll is appended to once, one after the other, and each
    append wakes the poll by that partition's key. Each check looks at that partition alone (the whole poll
    at every append before: quadratic)."""
    source = Source(appended=set())
    fetch = follower_fetch(source)
    assert not fetch.try_complete()  # the first check looks at every partition
    source.asked.clear()
    woken = TopicPartition("wide", 700)
    fetch.wake(woken)
    assert not fetch.try_complete()  # nothing readable there yet
    assert source.asked == [woken]
    source.appended.add(700)
    fetch.wake(woken)
    assert fetch.try_complete()
    assert source.asked == [woken, woken]
    assert len(source.read) == 1 and len(source.read[0]) == PARTITIONS


def test_bytes_seen_at_earlier_checks_count_towards_min_bytes() -> None:
    """A consumer's fetch.min.bytes over two partitions, each 100 bytes readable, woken one at a time."""
    source = Source(appended={1, 2})
    params = FetchParams(replica_id=-1, max_wait_ms=500, min_bytes=150, max_bytes=1 << 20,
                         isolation=FetchIsolation.LOG_END, fetch_only_from_leader=True)
    status = [(PartitionFetchInfo(TopicPartition("wide", p), 0, -1, 1 << 20, 0), LogOffsetMetadata(0, 0, 0))
              for p in (1, 2)]
    fetch = DelayedFetch(params, status, source, lambda _: None)
    source.appended = {1}
    assert not fetch.try_complete()  # 100 bytes of 150
    source.appended = {1, 2}
    fetch.wake(TopicPartition("wide", 2))
    assert fetch.try_complete()  # partition 1's 100 from the first look, partition 2's 100 now
    assert source.asked[-1] == TopicPartition("wide", 2)


def test_anything_may_have_changed_looks_at_every_partition_again() -> None:
    """The purgatory's check after watching (wake(None)): an append between the first check and the watch
    found no watcher to wake the poll by its key."""
    source = Source(appended=set())
    fetch = follower_fetch(source)
    assert not fetch.try_complete()
    source.appended.add(999)
    fetch.wake(None)
    assert fetch.try_complete()

"""A fetch's read of many partitions in chunks (broker/replication/local_log_read.py): the chunking rule by a
fake clock, the same answer as one read (max_bytes and KIP-74 across chunk boundaries), and the event loop
running other callbacks between chunks, for a fetch's first read and for a parked fetch's completion."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from broker.log.file_slice import FileSlice
from broker.replication.delayed_fetch import FetchParams, FetchResults, LogReadResult, PartitionFetchInfo
from broker.replication.local_log_read import ChunkedReader, LocalLogRead
from broker.replication.partition import FetchIsolation
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.fakes import FakeClock
from tests.unit.broker.broker_helpers import Answers, Harness, batch, produce

PARAMS = FetchParams(2, 500, 1, 330, FetchIsolation.LOG_END, True)
INFOS = [PartitionFetchInfo(TopicPartition("wide", p), 0, 0, 100, 0) for p in range(10)]


class SlowLog:
    """Each partition's read takes 3 ms of the fake clock and finds a 40-byte batch, or a 300-byte one for
    partition 0 (bigger than its max_bytes); records the limits it was read with."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.asked: list[tuple[int, int, bool]] = []

    def __call__(self, params: FetchParams, info: PartitionFetchInfo, limit: int, min_one: bool) -> LogReadResult:
        self.clock.advance(0.003)
        self.asked.append((info.topic_partition.partition, limit, min_one))
        size = 300 if info.topic_partition.partition == 0 else 40
        got = size if min_one or size <= min(limit, info.max_bytes) else 0
        return LogReadResult(ErrorCode.NONE, cast(FileSlice, SimpleNamespace(size=got)))


def test_a_chunk_reads_until_its_time_is_up_then_the_next_goes_on_where_it_stopped() -> None:
    clock = FakeClock(0)
    log = SlowLog(clock)
    read = LocalLogRead(PARAMS, INFOS, log)
    chunks = []
    while True:
        before = len(read.results)
        done = read.read_for(clock, 0.010)
        chunks.append(len(read.results) - before)
        if done:
            break
    # 3 ms a partition, 10 ms a chunk: the fourth partition's read passes the deadline and ends the chunk.
    assert chunks == [4, 4, 2]
    assert [info for info, _ in read.results] == INFOS


def test_a_read_in_chunks_keeps_the_limits_of_a_read_in_one_go() -> None:
    clock = FakeClock(0)
    whole, chunked = SlowLog(clock), SlowLog(clock)
    LocalLogRead(PARAMS, INFOS, whole).read_all()
    read = LocalLogRead(PARAMS, INFOS, chunked)
    while not read.read_for(clock, 0.001):  # one partition per chunk
        pass
    # KIP-74's whole first batch, then what is left of max_bytes, carried across every chunk boundary.
    assert chunked.asked == whole.asked
    assert chunked.asked[:4] == [(0, 330, True), (1, 30, False), (2, 30, False), (3, 30, False)]


def test_a_chunk_reads_at_least_one_partition_and_an_empty_read_is_done() -> None:
    clock = FakeClock(0)
    read = LocalLogRead(PARAMS, INFOS, SlowLog(clock))
    assert not read.read_for(clock, 0)
    assert len(read.results) == 1
    assert LocalLogRead(PARAMS, [], SlowLog(clock)).read_for(clock, 0)


def ticking() -> Callable[[], float]:
    """A clock one second further at each look: a chunk of N s reads N partitions per callback."""
    counter = itertools.count()
    return lambda: float(next(counter))


def test_the_reader_lets_the_loop_run_other_callbacks_between_chunks() -> None:
    async def run() -> list[str]:
        loop = asyncio.get_running_loop()
        events: list[str] = []
        reader = ChunkedReader(loop, clock=ticking(), chunk_seconds=2)
        done = loop.create_future()

        def answered(results: FetchResults) -> None:
            events.append(f"answer {len(results)}")
            done.set_result(None)

        reader.read(LocalLogRead(PARAMS, INFOS, SlowLog(FakeClock(0))), answered)
        loop.call_soon(events.append, "other")
        await done
        return events

    # The first chunk runs at once, the other callback before the next chunk, the answer after the last.
    assert asyncio.run(run()) == ["other", "answer 10"]


def test_a_parked_fetchs_completion_from_another_thread_is_read_on_the_loop_in_chunks(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    tps = [TopicPartition("orders", p) for p in range(6)]
    for tp in tps:
        h.lead(tp)
        assert produce(h, batch(), acks=1, tp=tp).value[tp].error is ErrorCode.NONE

    async def run() -> tuple[list[str], FetchResults]:
        loop = asyncio.get_running_loop()
        h.replica_manager.chunked_reader = ChunkedReader(loop, clock=ticking(), chunk_seconds=1)
        events: list[str] = []
        loop_thread = threading.get_ident()
        answers = Answers()
        done = loop.create_future()

        def answered(results: FetchResults) -> None:
            events.append("answer on the loop" if threading.get_ident() == loop_thread else "answer elsewhere")
            answers(results)
            done.set_result(None)

        # A consumer's fetch at the log end of every partition parks; its expiry reads all six again.
        infos = [PartitionFetchInfo(tp, 3, -1, 1 << 20, -1) for tp in tps]  # batch(): three records
        params = FetchParams(-1, 500, 1, 1 << 20, FetchIsolation.LOG_END, True)
        h.replica_manager.fetch_messages(params, infos, answered)
        for _ in range(len(tps)):  # the first read, a partition per chunk
            await asyncio.sleep(0)
        assert h.replica_manager.delayed_fetch_purgatory.watched() == 1
        await asyncio.to_thread(h.timer.advance, 500)  # expired on another thread, as a fetcher thread completes
        await done
        return events, answers.value

    events, results = asyncio.run(run())
    assert events == ["answer on the loop"]
    assert [(info.topic_partition, r.error, r.size) for info, r in results] == [(tp, ErrorCode.NONE, 0) for tp in tps]

"""A fetcher thread's round does per-change work (issue 27): a partition's fetch entry is built again (its local
offsets asked) only when its state changed, and a partition leaves and rejoins the fetch with its backoff. A
scripted leader and counting follower partitions, a fake clock: the round's bookkeeping is under test."""

from __future__ import annotations

from broker.fetcher.protocol import (
    BrokerEndPoint,
    EpochEndOffset,
    EpochRequest,
    FetchPartitions,
    FetchRequestPartition,
    FetchResponsePartition,
    InitialFetchState,
    ReplicaFetcherConfig,
)
from broker.fetcher.thread import FetchState, ReplicaFetcherThread
from broker.log.log import LogAppendInfo
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.fakes import FakeClock

LEADER = BrokerEndPoint(2, "127.0.0.1", 9002)
EPOCH = 0
BACKOFF_MS = 1_000
TPS = [TopicPartition("spread", p) for p in range(100)]


class CountingFollower:
    """A follower partition that appends whatever it is sent as one record and counts the offset lookups a
    fetch entry costs."""

    def __init__(self) -> None:
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.offset_lookups = 0

    def follower_offsets(self, leader_epoch: int) -> tuple[int, int]:
        self.offset_lookups += 1
        return self.log_start_offset, self.log_end_offset

    def latest_epoch(self, leader_epoch: int) -> int | None:
        return None  # no epochs: truncation falls back to the fetch offset, at once

    def end_offset_for_epoch(self, leader_epoch: int, epoch: int) -> tuple[int, int] | None:
        return None

    def truncate_to(self, leader_epoch: int, offset: int) -> int:
        return offset

    def truncate_fully_and_start_at(self, leader_epoch: int, offset: int) -> None:
        self.log_start_offset = self.log_end_offset = offset

    def append_records_to_follower(self, leader_epoch: int, fetch_offset: int, records: bytes,
                                   leader_high_watermark: int, leader_log_start_offset: int) -> LogAppendInfo:
        if not records:
            return LogAppendInfo(-1, -1, -1, -1, -1, 0, 0)
        self.log_end_offset = fetch_offset + 1
        return LogAppendInfo(fetch_offset, fetch_offset, -1, -1, -1, 1, len(records))


class ScriptedLeader:
    """Answers each fetch with what `next_answer` holds (then nothing), and keeps every request."""

    def __init__(self) -> None:
        self.requests: list[list[FetchRequestPartition]] = []
        self.changed: list[set[TopicPartition]] = []  # what each fetch said changed
        self.next_answer: dict[TopicPartition, FetchResponsePartition] = {}

    def fetch(self, partitions: FetchPartitions) -> dict[TopicPartition, FetchResponsePartition]:
        self.requests.append(list(partitions.entries.values()))
        self.changed.append(set(partitions.changed))
        answer, self.next_answer = self.next_answer, {}
        return answer

    def offsets_for_leader_epoch(self, partitions: dict[TopicPartition, EpochRequest]
                                 ) -> dict[TopicPartition, EpochEndOffset]:
        raise AssertionError("no epochs here: truncation needs no leader")

    def list_offset(self, tp: TopicPartition, current_leader_epoch: int, timestamp: int) -> int:
        raise AssertionError("never out of range here")

    def close(self) -> None:
        pass


class Fetching:
    """A thread fetching TPS from a scripted leader, past its first (truncating) round."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.leader = ScriptedLeader()
        self.followers = {tp: CountingFollower() for tp in TPS}
        self.thread = ReplicaFetcherThread("ReplicaFetcherThread-0-2", 1, 0, LEADER, self.leader,
                                           self.followers.get, ReplicaFetcherConfig(fetch_backoff_ms=BACKOFF_MS),
                                           lambda tp: None, time_ms=self.clock)
        self.thread.add_partitions({tp: InitialFetchState(LEADER, EPOCH, 0) for tp in TPS})
        self.thread.do_work()

    def lookups(self) -> int:
        return sum(f.offset_lookups for f in self.followers.values())

    def last_request(self) -> dict[TopicPartition, FetchRequestPartition]:
        return {p.topic_partition: p for p in self.leader.requests[-1]}


def test_a_round_asks_only_the_partitions_that_changed_for_their_offsets() -> None:
    f = Fetching()
    assert len(f.last_request()) == len(TPS)
    hot = TPS[7]
    f.leader.next_answer = {hot: FetchResponsePartition(ErrorCode.NONE, 1, 0, b"x")}
    f.thread.do_work()  # the answer appends one record to the hot partition
    before = f.lookups()
    f.thread.do_work()
    assert f.lookups() - before == 1  # the hot partition alone: 100 before the cut
    request = f.last_request()
    assert request.keys() == set(TPS)  # every partition still fetched
    assert request[hot].fetch_offset == 1
    assert list(request)[-1] == hot  # answered with records: to the back, for fairness under max bytes
    before = f.lookups()
    f.thread.do_work()  # nothing changed: nothing asked
    assert f.lookups() == before


def test_a_fetch_tells_its_session_only_the_entries_changed_since_the_previous_fetch() -> None:
    """The session handler compares only these with what the leader's session holds: an idle round at 10,000
    partitions handed it every entry to put in a dict and compare (issue 27)."""
    f = Fetching()
    assert f.leader.changed[-1] == set(TPS)  # the first fetch: every entry is new
    hot, gone = TPS[7], TPS[8]
    f.leader.next_answer = {hot: FetchResponsePartition(ErrorCode.NONE, 1, 0, b"x")}
    f.thread.do_work()
    f.thread.do_work()
    assert f.leader.changed[-1] == {hot}
    f.thread.remove_partitions([gone])
    f.thread.do_work()
    assert f.leader.changed[-1] == {gone} and gone not in f.last_request()
    f.thread.do_work()
    assert f.leader.changed[-1] == set()


def test_a_delayed_partition_leaves_the_fetch_and_returns_after_its_backoff() -> None:
    f = Fetching()
    errored = TPS[3]
    f.leader.next_answer = {errored: FetchResponsePartition(ErrorCode.NOT_LEADER_OR_FOLLOWER)}
    f.thread.do_work()
    f.thread.do_work()
    assert errored not in f.last_request() and len(f.last_request()) == len(TPS) - 1
    f.clock.advance(BACKOFF_MS)
    f.thread.do_work()
    assert f.last_request()[errored].fetch_offset == 0


def test_a_log_start_moved_outside_a_fetch_goes_in_the_next_fetch() -> None:
    """Retention on the follower moves its log start without an answer from the leader: the leader's
    DeleteRecords waits on the followers' log starts (the low watermark)."""
    f = Fetching()
    tp = TPS[5]
    f.followers[tp].log_start_offset = f.followers[tp].log_end_offset = 40
    f.thread.log_start_offset_moved(tp)
    f.thread.do_work()
    assert f.last_request()[tp].log_start_offset == 40


def test_a_truncating_partition_is_the_only_one_truncation_looks_at() -> None:
    f = Fetching()
    assert all(s.state is FetchState.FETCHING for s in f.thread.partition_states().values())
    moved = TPS[9]
    f.thread.add_partitions({moved: InitialFetchState(LEADER, EPOCH + 1, 0)})  # a new leader epoch
    assert f.thread.partition_states()[moved].state is FetchState.TRUNCATING
    before = f.lookups()
    f.thread.do_work()  # truncates it, then fetches it in the new epoch
    assert f.thread.partition_states()[moved].state is FetchState.FETCHING
    assert f.last_request()[moved].current_leader_epoch == EPOCH + 1
    assert f.lookups() - before == 1

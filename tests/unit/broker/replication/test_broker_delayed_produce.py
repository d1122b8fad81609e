"""An acks=all produce spread over many partitions waits in the purgatory: each high watermark move asks only
the partition it moved (issue 27), and the answer still holds every partition's outcome. Fake partitions and
a hand-driven timer."""

from __future__ import annotations

from broker.purgatory.purgatory import DelayedOperationPurgatory
from broker.replication.delayed_produce import DelayedProduce, ProducePartitionResponse, ProducePartitionStatus
from broker.replication.partition import Partition
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from tests.fakes import FakeClock
from tests.unit.broker.broker_helpers import Answers, MockTimer

TPS = [TopicPartition("spread", p) for p in range(500)]
REQUIRED = 10  # every partition's last record is offset 9


class Leader:
    """A leader partition's side of the acks=all check: its high watermark, and how often it was asked."""

    def __init__(self) -> None:
        self.high_watermark = 0
        self.leading = True
        self.asked = 0

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        self.asked += 1
        if not self.leading:
            raise KafkaError("not the leader", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return self.high_watermark >= required_offset, ErrorCode.NONE


class Spread:
    def __init__(self) -> None:
        self.leaders = {tp: Leader() for tp in TPS}
        self.purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory(
            "Produce", MockTimer(FakeClock()))
        self.answers = Answers()
        status = {tp: ProducePartitionStatus(REQUIRED, ProducePartitionResponse(ErrorCode.NONE)) for tp in TPS}
        self.delayed = DelayedProduce(30_000, status, self.lookup, self.answers)
        assert not self.purgatory.try_complete_else_watch(self.delayed, status)

    def lookup(self, tp: TopicPartition) -> Partition:
        return self.leaders[tp]  # type: ignore[return-value]

    def asked(self) -> int:
        return sum(leader.asked for leader in self.leaders.values())

    def move(self, tp: TopicPartition) -> None:
        """The follower's fetch moved `tp`'s high watermark past the records: the ReplicaManager checks its key."""
        self.leaders[tp].high_watermark = REQUIRED
        self.purgatory.check_and_complete(tp)


def test_each_high_watermark_move_asks_only_its_partition() -> None:
    s = Spread()
    before = s.asked()
    for tp in TPS:
        s.move(tp)
    assert s.asked() - before == len(TPS)  # 125,250 before the cut (every pending partition at every move)
    assert {tp: r.error for tp, r in s.answers.value.items()} == {tp: ErrorCode.NONE for tp in TPS}
    assert s.purgatory.watched() == 0


def test_a_lost_leadership_is_answered_for_its_partition_once_the_rest_are_in() -> None:
    s = Spread()
    lost = TPS[42]
    s.leaders[lost].leading = False
    s.purgatory.check_and_complete(lost)  # the LeaderAndIsr that moved it checks its key
    assert not s.answers.calls
    for tp in TPS:
        if tp != lost:
            s.move(tp)
    answer = s.answers.value
    assert answer[lost].error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert all(answer[tp].error is ErrorCode.NONE for tp in TPS if tp != lost)


def test_a_move_between_the_first_check_and_the_watch_is_not_missed() -> None:
    """The purgatory checks again after watching: nothing woke the operation for a move that found no watcher,
    so that check asks every partition."""
    leaders = {tp: Leader() for tp in TPS[:2]}
    purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory(
        "Produce", MockTimer(FakeClock()))
    answers = Answers()
    status = {tp: ProducePartitionStatus(REQUIRED, ProducePartitionResponse(ErrorCode.NONE)) for tp in leaders}
    checks = 0

    def lookup(tp: TopicPartition) -> Partition:
        nonlocal checks
        checks += 1
        if checks == 2:  # the first check is under way: both partitions commit before the watch
            for leader in leaders.values():
                leader.high_watermark = REQUIRED
        return leaders[tp]  # type: ignore[return-value]

    assert purgatory.try_complete_else_watch(DelayedProduce(30_000, status, lookup, answers), status)
    assert {tp: r.error for tp, r in answers.value.items()} == {tp: ErrorCode.NONE for tp in leaders}

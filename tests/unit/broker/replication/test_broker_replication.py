"""ReplicaManager's replication wiring: which partitions the fetchers get, follower fetches that let a replica
rejoin the ISR and complete acks=all produces, the ISR-expiration task and min.insync.replicas, the gauges."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest

from broker.fetcher.protocol import InitialFetchState
from broker.replication.partition import Partition
from broker.replication.partition_state_store import PartitionStateStore
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.unit.broker.broker_helpers import (
    LOCAL,
    TP,
    Harness,
    batch,
    consumer_fetch,
    endpoint,
    leader_state,
    live_leaders,
    produce,
)
from zk.paths import LeaderIsrAndControllerEpoch

LAG_MS = 10_000
ASSIGNMENT = (LOCAL, 2, 3)


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path, min_isr=2, replica_lag_time_max_ms=LAG_MS)


def become(h: Harness, leader: int, epoch: int, isr: tuple[int, ...] = ASSIGNMENT) -> None:
    result = h.replica_manager.become_leader_or_follower(
        0, 1, [(TP, leader_state(leader, epoch, isr, ASSIGNMENT))], live_leaders(leader), {})
    assert result.partition_errors[TP] is ErrorCode.NONE


def test_followers_fetch_leaders_do_not(h: Harness) -> None:
    become(h, leader=2, epoch=0)
    assert h.fetcher_manager.fetching == {TP: InitialFetchState(endpoint(2), 0, 0)}
    become(h, leader=3, epoch=1)  # the leader moved: a fetcher for the new one, in the new epoch
    assert h.fetcher_manager.fetching == {TP: InitialFetchState(endpoint(3), 1, 0)}
    become(h, leader=LOCAL, epoch=2)
    assert h.fetcher_manager.fetching == {}
    become(h, leader=2, epoch=3)
    h.replica_manager.stop_replicas(0, 1, True, [TP])
    assert h.fetcher_manager.fetching == {} and h.fetcher_manager.idle_shutdowns >= 5


def test_a_caught_up_follower_rejoins_and_completes_acks_all(h: Harness) -> None:
    become(h, leader=LOCAL, epoch=0, isr=(LOCAL,))
    # ISR of one < min.insync.replicas = 2: refused before appending.
    assert produce(h, batch(2)).value[TP].error is ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce(h, batch(2), acks=1).value[TP].error is ErrorCode.NONE
    assert consumer_fetch(h, 0, replica_id=2, max_wait_ms=0).calls
    consumer_fetch(h, 2, replica_id=2, max_wait_ms=0)  # reached the HW (2) and the epoch start (0)
    assert h.state_store.writes == [("expand", LeaderIsrAndControllerEpoch(LOCAL, 0, (LOCAL, 2), 1, 0))]
    answers = produce(h, batch(3))
    assert not answers.calls
    consumer_fetch(h, 5, replica_id=2, max_wait_ms=0)
    assert answers.value[TP].error is ErrorCode.NONE


def test_isr_expiration_answers_waiting_produces_after_append(h: Harness) -> None:
    become(h, leader=LOCAL, epoch=0, isr=(LOCAL, 2))
    answers = produce(h, batch(1), timeout_ms=60_000)
    assert not answers.calls
    h.clock.now += LAG_MS + 1
    h.replica_manager.maybe_shrink_isr()
    # The record is in the log, but only the leader has it: below min.insync.replicas after the append.
    assert answers.value[TP].error is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert produce(h, batch(1)).value[TP].error is ErrorCode.NOT_ENOUGH_REPLICAS


def test_replication_gauges(h: Harness) -> None:
    become(h, leader=LOCAL, epoch=0, isr=(LOCAL,))
    text = generate_latest(h.metrics.registry).decode()
    assert "kafka_server_ReplicaManager_UnderReplicatedPartitions 1.0" in text
    assert "kafka_server_ReplicaManager_UnderMinIsrPartitionCount 1.0" in text
    assert "kafka_server_ReplicaManager_LeaderCount 1.0" in text
    assert "kafka_server_ReplicaManager_PartitionCount 1.0" in text
    assert 'kafka_server_ReplicaFetcherManager_MaxLag{clientId="Replica"} 0.0' in text
    assert 'kafka_server_ReplicaFetcherManager_FailedPartitionsCount{clientId="Replica"} 0.0' in text


# ------------------------------------------------------------------ the isr-expiration task looks only where it can act

TPS = [TP._replace(partition=i) for i in range(3)]


def lead_all(h: Harness, isr: tuple[int, ...] = ASSIGNMENT, tps: list[TopicPartition] = TPS) -> None:
    h.replica_manager.become_leader_or_follower(
        0, 1, [(tp, leader_state(LOCAL, 0, isr, ASSIGNMENT)) for tp in tps], live_leaders(LOCAL), {})


def count_shrink_checks(monkeypatch: pytest.MonkeyPatch) -> list[TopicPartition]:
    """The partitions the isr-expiration task hands to Partition.maybe_shrink_isr, in order."""
    looked_at: list[TopicPartition] = []
    original = Partition.maybe_shrink_isr

    def counting(partition: Partition, replica_max_lag_ms: int, store: PartitionStateStore) -> bool:
        looked_at.append(partition.topic_partition)
        return original(partition, replica_max_lag_ms, store)

    monkeypatch.setattr(Partition, "maybe_shrink_isr", counting)
    return looked_at


def test_an_idle_leaders_shrink_check_looks_at_no_partition(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    lead_all(h)
    for tp in TPS:
        assert produce(h, batch(2), acks=1, tp=tp).value[tp].error is ErrorCode.NONE
        for follower in (2, 3):
            consumer_fetch(h, 2, replica_id=follower, max_wait_ms=0, tp=tp)
    looked_at = count_shrink_checks(monkeypatch)
    h.clock.now += 10 * LAG_MS
    h.replica_manager.maybe_shrink_isr()
    # Every follower sits at its leader's log end: no ISR can shrink, so none is looked at.
    assert looked_at == []
    assert all(h.replica_manager.get_partition(tp).in_sync_replica_ids == set(ASSIGNMENT) for tp in TPS)
    # An append moves the log end past both followers of one partition: that one, and only it, is looked at.
    produce(h, batch(1), acks=1, tp=TPS[1])
    h.replica_manager.maybe_shrink_isr()
    assert looked_at == [TPS[1]]
    # Caught up again by both followers' fetches: looked at no more.
    for follower in (2, 3):
        consumer_fetch(h, 3, replica_id=follower, max_wait_ms=0, tp=TPS[1])
    h.replica_manager.maybe_shrink_isr()
    assert looked_at == [TPS[1]]


def test_a_follower_that_stops_fetching_while_behind_is_shrunk_after_the_lag_time(h: Harness) -> None:
    lead_all(h, tps=TPS[:1])
    for follower in (2, 3):
        consumer_fetch(h, 0, replica_id=follower, max_wait_ms=0, tp=TPS[0])
    produce(h, batch(2), acks=1, tp=TPS[0])
    consumer_fetch(h, 2, replica_id=3, max_wait_ms=0, tp=TPS[0])  # 2 stops fetching, behind
    h.clock.now += LAG_MS
    h.replica_manager.maybe_shrink_isr()
    assert h.state_store.writes == []
    h.clock.now += 1
    h.replica_manager.maybe_shrink_isr()
    assert h.state_store.writes == [("shrink", LeaderIsrAndControllerEpoch(LOCAL, 0, (LOCAL, 3), 1, 0))]


def test_a_follower_that_stops_fetching_while_caught_up_stays_in_the_isr(h: Harness) -> None:
    """Kafka's Replica.isCaughtUp: at the leader's log end is caught up, however long ago it last fetched."""
    lead_all(h, tps=TPS[:1])
    produce(h, batch(2), acks=1, tp=TPS[0])
    for follower in (2, 3):
        consumer_fetch(h, 2, replica_id=follower, max_wait_ms=0, tp=TPS[0])
    h.clock.now += 100 * LAG_MS
    h.replica_manager.maybe_shrink_isr()
    assert h.state_store.writes == []


def test_a_new_leaders_silent_follower_is_shrunk(h: Harness) -> None:
    """A new leader knows no follower's log end: one that never fetches goes after the lag time, as in Kafka."""
    lead_all(h, isr=(LOCAL, 2))
    for tp in TPS[1:]:
        consumer_fetch(h, 0, replica_id=2, max_wait_ms=0, tp=tp)
    h.clock.now += LAG_MS + 1
    h.replica_manager.maybe_shrink_isr()
    assert h.state_store.writes == [("shrink", LeaderIsrAndControllerEpoch(LOCAL, 0, (LOCAL,), 1, 0))]


def test_a_follower_admitted_behind_the_log_end_is_shrunk_when_it_stops(h: Harness) -> None:
    """An expansion at the high watermark, short of the log end, puts the partition where the task looks."""
    lead_all(h, isr=(LOCAL,), tps=TPS[:1])
    produce(h, batch(2), acks=1, tp=TPS[0])
    consumer_fetch(h, 2, replica_id=2, max_wait_ms=0, tp=TPS[0])  # HW 2 reached: rejoins
    produce(h, batch(1), acks=1, tp=TPS[0])
    consumer_fetch(h, 2, replica_id=3, max_wait_ms=0, tp=TPS[0])  # HW is 2 (ISR LOCAL, 2), LEO 3: 3 rejoins behind
    assert [kind for kind, _ in h.state_store.writes] == ["expand", "expand"]
    h.clock.now += LAG_MS + 1
    h.replica_manager.maybe_shrink_isr()
    assert [kind for kind, _ in h.state_store.writes] == ["expand", "expand", "shrink"]


def test_a_resigned_or_deleted_leader_is_looked_at_no_more(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    lead_all(h)
    for tp in TPS:
        produce(h, batch(1), acks=1, tp=tp)
    h.replica_manager.become_leader_or_follower(0, 1, [(TPS[0], leader_state(2, 1, ASSIGNMENT, ASSIGNMENT))],
                                                live_leaders(2), {})
    h.replica_manager.stop_replicas(0, 1, True, [TPS[1]])
    looked_at = count_shrink_checks(monkeypatch)
    h.replica_manager.maybe_shrink_isr()
    assert looked_at == [TPS[2]]

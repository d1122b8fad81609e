"""ReplicaManager's replication wiring: which partitions the fetchers get, follower fetches that let a replica
rejoin the ISR and complete acks=all produces, the ISR-expiration task and min.insync.replicas, the gauges."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest

from broker.fetcher.protocol import InitialFetchState
from proto.errors import ErrorCode
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

"""Replication between real broker processes: a real ZooKeeper, the real controller, three brokers, gRPC on
loopback. Short replica.lag.time.max.ms and session timeouts keep every wait a few seconds; every wait has a
deadline on a condition, none is a fixed sleep."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

from common.record import iter_batches
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.integration.replicated_topic import BROKER_IDS, FAST_REPLICATION, ReplicatedTopic, replicated_topic
from zk.client import KafkaZkClient

if TYPE_CHECKING:
    from conftest import BrokerProcess, StartBroker, StartBrokers, StartController, WaitUntil

pytestmark = pytest.mark.integration

TOPIC = "replicated"
TP = TopicPartition(TOPIC, 0)
LAG_TIME_MS = int(FAST_REPLICATION["replica.lag.time.max.ms"])
# A paused follower must leave the ISR by its leader's shrink (out of sync after replica.lag.time.max.ms, checked
# every half of it: 2-3 s after the pause) before its ZooKeeper session expires; with the tests' usual 3 s session
# the controller's broker-failure handling sometimes removed it first, and the leader logged no shrink.
BROKER_OVERRIDES = {**FAST_REPLICATION, "replica.high.watermark.checkpoint.interval.ms": "500",
                    "zookeeper.session.timeout.ms": "6000"}


class Cluster(ReplicatedTopic):
    def segment(self, broker_id: int) -> bytes:
        return (self.brokers[broker_id].log_dir / f"{TOPIC}-0" / f"{0:020d}.log").read_bytes()


def stored_values(segment: bytes) -> list[bytes | None]:
    return [r.value for batch in iter_batches(segment) for r in batch.records]


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController, zk_client: KafkaZkClient,
            wait_until: WaitUntil) -> Iterator[Cluster]:
    """Three brokers and a controller; topic `replicated` with RF 3 and min.insync.replicas=2, all in sync."""
    with replicated_topic(Cluster, start_brokers, start_controller, zk_client, wait_until, TOPIC, 2,
                          BROKER_OVERRIDES) as cluster:
        yield cluster


@contextmanager
def paused(broker: BrokerProcess) -> Iterator[None]:
    """SIGSTOP for the block; SIGCONT however it ends, so teardown never kills a stopped process."""
    broker.process.signal(signal.SIGSTOP)
    try:
        yield
    finally:
        broker.process.signal(signal.SIGCONT)


def in_log(broker: BrokerProcess, text: str) -> Callable[[], bool]:
    return lambda: text in broker.process.log()


# ------------------------------------------------------------------ tests


def test_acks_all_records_are_on_every_replica_byte_for_byte(cluster: Cluster, wait_until: WaitUntil) -> None:
    acknowledged = []
    for i in range(30):
        values = [f"r{i}-{j}" for j in range(5)]
        response = cluster.produce(*values)
        assert response.error_code == ErrorCode.NONE
        acknowledged += [v.encode() for v in values]
    leader = cluster.leader()
    # acks=all: the high watermark passed every acknowledged record, so each ISR member has them all.
    assert cluster.isr() == BROKER_IDS
    wait_until(lambda: len({cluster.segment(b) for b in BROKER_IDS}) == 1, timeout=10,
               message="identical segments on all three brokers")
    assert stored_values(cluster.segment(leader)) == [b"warm-up", *acknowledged]
    hw_checkpoint = cluster.brokers[leader].log_dir / "replication-offset-checkpoint"
    wait_until(lambda: hw_checkpoint.exists() and f"{TOPIC} 0 151" in hw_checkpoint.read_text(), timeout=10,
               message="the leader's high watermark checkpoint")


def test_paused_followers_leave_and_rejoin_the_isr(cluster: Cluster, wait_until: WaitUntil) -> None:
    leader_id = cluster.leader()
    leader = cluster.brokers[leader_id]
    first, second = (cluster.brokers[b] for b in cluster.followers())
    acknowledged = [b"warm-up"]

    with paused(first):
        # acks=all waits while the paused follower is still in the ISR, then completes once the leader drops
        # it after replica.lag.time.max.ms: two in-sync replicas still satisfy min.insync.replicas=2.
        response = cluster.produce("one follower paused")
        assert response.error_code == ErrorCode.NONE, response.error_message
        acknowledged.append(b"one follower paused")
        assert first.broker_id not in cluster.isr()
        assert in_log(leader, f"Shrinking ISR from 1,2,3 to {','.join(map(str, cluster.isr()))}.")()
    wait_until(lambda: cluster.isr() == BROKER_IDS, timeout=20, message="the resumed follower to rejoin the ISR")
    wait_until(in_log(leader, f"Expanding ISR from {','.join(str(b) for b in BROKER_IDS if b != first.broker_id)}"
                              f" to 1,2,3"), timeout=5, message="the expansion in the leader's log")

    with paused(first), paused(second):
        # The ISR shrinks to the leader alone: the produce already appended is answered _AFTER_APPEND (or times
        # out if it raced the shrink); new acks=all produces are refused before appending.
        racing = cluster.produce("both followers paused", timeout_ms=2 * LAG_TIME_MS + 3000)
        assert racing.error_code in (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT)
        wait_until(lambda: cluster.isr() == (leader_id,), timeout=10, message="the ISR to shrink to the leader")
        refused = cluster.produce("refused")
        assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    wait_until(lambda: cluster.isr() == BROKER_IDS, timeout=20, message="both followers to rejoin the ISR")
    assert cluster.produce("after").error_code == ErrorCode.NONE
    acknowledged.append(b"after")
    wait_until(lambda: len({cluster.segment(b) for b in BROKER_IDS}) == 1, timeout=10,
               message="identical segments on all three brokers")
    stored = stored_values(cluster.segment(leader_id))
    assert b"refused" not in stored
    assert [v for v in stored if v in acknowledged] == acknowledged


def test_killed_follower_truncates_by_leader_epoch_and_catches_up(cluster: Cluster, start_broker: StartBroker,
                                                                   wait_until: WaitUntil) -> None:
    leader_id = cluster.leader()
    follower_id = cluster.followers()[0]
    for i in range(10):
        assert cluster.produce(f"before-{i}").error_code == ErrorCode.NONE
    cluster.brokers[follower_id].process.signal(signal.SIGKILL)
    cluster.brokers[follower_id].process.wait()
    for i in range(10):
        assert cluster.produce(f"while-down-{i}").error_code == ErrorCode.NONE
    wait_until(lambda: follower_id not in cluster.isr(), timeout=10, message="the killed follower to leave the ISR")

    restarted = start_broker(follower_id, BROKER_OVERRIDES)
    cluster.brokers[follower_id] = restarted
    wait_until(lambda: cluster.isr() == BROKER_IDS, timeout=30, message="the restarted follower to rejoin the ISR")
    for i in range(5):
        assert cluster.produce(f"after-{i}").error_code == ErrorCode.NONE
    wait_until(lambda: cluster.segment(follower_id) == cluster.segment(leader_id), timeout=10,
               message="the restarted follower's log to equal the leader's")
    log = restarted.process.log()
    # It asked the leader where its epoch ended instead of truncating to its high watermark.
    assert "Truncating partition" not in log and "to local high watermark" not in log
    assert "Added fetcher to broker" in log
    expected = [b"warm-up", *(f"before-{i}".encode() for i in range(10)),
                *(f"while-down-{i}".encode() for i in range(10)), *(f"after-{i}".encode() for i in range(5))]
    assert stored_values(cluster.segment(follower_id)) == expected

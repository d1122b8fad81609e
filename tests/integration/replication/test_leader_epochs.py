"""Leader epochs (KIP-101) with real processes: the two holes of the high-watermark-only protocol, reproduced, and
shown closed. A real ZooKeeper, the real controller, brokers killed with SIGKILL and frozen with SIGSTOP; every
wait has a deadline on a condition, none is a fixed sleep.

Where process timing cannot be forced, the state is: a stale high watermark is a `replication-offset-checkpoint`
written while the broker is down, a lost unflushed tail is a segment cut short while it is down.

KIP-279 (truncation over several rounds when logs diverged across epochs) and KAFKA-7128 (a follower rejoins the
ISR only past the current epoch's start offset) are unit-tested on the fetcher and the ISR rules, in
tests/unit/broker/fetcher/test_broker_fetcher.py:
    test_kip_279_an_unknown_epoch_means_another_round
    test_diverged_follower_truncates_over_two_rounds_then_matches_the_leader
and tests/unit/broker/replication/test_broker_isr.py:
    test_in_sync_needs_the_high_watermark_and_the_epoch_start
    test_expand_only_after_reaching_the_high_watermark_and_the_epoch_start
Scenario 2 below truncates across an epoch boundary with real brokers.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import StartBroker, StartController, WaitUntil, wait_until_serving

from broker.log.checkpoint import OffsetCheckpointFile
from broker.log.files import REPLICATION_OFFSET_CHECKPOINT
from common.record import iter_headers
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.integration.failover.test_failover import BROKER_IDS, BROKER_OVERRIDES, FAILOVER_DEADLINE_S, Cluster, in_sync
from zk.client import KafkaZkClient
from zk.paths import NO_LEADER

pytestmark = pytest.mark.integration

# Scenario 1 freezes the leader (SIGSTOP) while the follower restarts: the controller must still see it alive
# (its ZooKeeper session open) for the restart, the follower's OffsetsForLeaderEpoch timeout
# (replica.socket.timeout.ms) and a margin on a loaded machine.
FROZEN_LEADER_SESSION = {"zookeeper.session.timeout.ms": "15000"}


@contextmanager
def running_cluster(start_broker: StartBroker, start_controller: StartController, zk: KafkaZkClient,
                    own: Mapping[int, Mapping[str, str]] | None = None) -> Iterator[Cluster]:
    """Three brokers and a controller as test_failover's Cluster, `own` adding settings per broker id."""
    own = own or {}
    brokers = {b: start_broker(b, {**BROKER_OVERRIDES, **own.get(b, {})}, wait=False) for b in BROKER_IDS}
    for broker in brokers.values():
        wait_until_serving(broker.address, broker.process)
    c = Cluster(brokers, start_controller(), zk, start_broker)
    try:
        yield c
    finally:
        for channel in c.channels.values():
            channel.close()


@pytest.fixture
def cluster(request: pytest.FixtureRequest, start_broker: StartBroker, start_controller: StartController,
            zk_client: KafkaZkClient) -> Iterator[Cluster]:
    """running_cluster; parametrize it indirectly with {broker id: overrides} to give a broker settings of its own."""
    with running_cluster(start_broker, start_controller, zk_client, getattr(request, "param", None)) as c:
        yield c


def segments(cluster: Cluster, broker_id: int, tp: TopicPartition) -> list[Path]:
    return sorted((cluster.log_dir(broker_id) / f"{tp.topic}-{tp.partition}").glob("*.log"))


def log_bytes(cluster: Cluster, broker_id: int, tp: TopicPartition) -> bytes:
    return b"".join(segment.read_bytes() for segment in segments(cluster, broker_id, tp))


def write_high_watermark(cluster: Cluster, broker_id: int, tp: TopicPartition, high_watermark: int) -> None:
    """What the broker would have checkpointed had it died before learning a later high watermark."""
    OffsetCheckpointFile(cluster.log_dir(broker_id) / REPLICATION_OFFSET_CHECKPOINT).write({tp: high_watermark})


def produce_all(cluster: Cluster, tp: TopicPartition, values: list[str]) -> None:
    for value in values:
        assert cluster.produce(tp, value) == ErrorCode.NONE, f"acks=all produce of {value!r} failed"


def encoded(values: list[str]) -> list[bytes | None]:
    return [v.encode() for v in values]


# ------------------------------------------------------------------ KIP-101 scenario 1


@pytest.mark.parametrize("cluster", [{1: FROZEN_LEADER_SESSION}], indirect=True, ids=["frozen-leader-session"])
def test_kip101_scenario_1_restarted_follower_with_a_stale_high_watermark_keeps_acknowledged_records(
    cluster: Cluster, wait_until: WaitUntil
) -> None:
    """A follower has every acknowledged record but its checkpointed high watermark lags; it restarts, and the
    leader dies before the follower has fetched again. Truncating to its high watermark (the pre-KIP-101 rule) would
    drop acknowledged records that the follower, elected next, was the last to hold.

    The controller drops a dead replica from the ISR (Kafka's removeReplicasFromIsr), so a follower that restarted
    leads before catching up only through unclean election: the topic allows it, which is where the old rule lost
    acknowledged data. The leader is frozen (SIGSTOP) before the follower comes back, so the window between the
    follower's truncation and its first fetch stays open for as long as the test needs, deterministically."""
    tp = TopicPartition("kip101-stale-hw", 0)
    leader, follower = 1, 2
    cluster.create_topic(tp.topic, [[leader, follower]],
                         {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
    wait_until(lambda: in_sync(cluster, tp, (leader, follower)), message="both replicas in sync")
    acknowledged = [f"m{i}" for i in range(6)]
    produce_all(cluster, tp, acknowledged)
    # acks=all with both in the ISR: the leader's high watermark passed the follower's log end, so it has them all.
    assert cluster.stored_values(follower, tp) == encoded(acknowledged)

    cluster.kill(follower)
    write_high_watermark(cluster, follower, tp, 1)
    wait_until(lambda: in_sync(cluster, tp, (leader,)), timeout=FAILOVER_DEADLINE_S, message="the follower out")

    cluster.brokers[leader].process.signal(signal.SIGSTOP)
    cluster.restart(follower)
    restarted = cluster.brokers[follower].process
    # It follows the frozen leader and asks where its epoch ends; no answer comes, so it keeps its log.
    wait_until(lambda: "Error when sending leader epoch request" in restarted.log(), timeout=FAILOVER_DEADLINE_S,
               message="the follower's OffsetsForLeaderEpoch to the frozen leader")
    assert "to local high watermark" not in restarted.log()
    assert cluster.stored_values(follower, tp) == encoded(acknowledged)

    old_epoch = cluster.state(tp).leader_epoch
    cluster.kill(leader)  # SIGKILL ends a stopped process too
    wait_until(lambda: cluster.state(tp).leader == follower, timeout=2 * FAILOVER_DEADLINE_S,
               message="the restarted follower elected")
    assert cluster.state(tp).leader_epoch > old_epoch
    wait_until(lambda: cluster.produce(tp, "after") == ErrorCode.NONE, message="the new leader serving")
    assert cluster.stored_values(follower, tp) == encoded([*acknowledged, "after"])


# ------------------------------------------------------------------ KIP-101 scenario 2


def test_kip101_scenario_2_replicas_do_not_diverge_after_a_double_failure_with_a_lost_tail(
    cluster: Cluster, wait_until: WaitUntil
) -> None:
    """Both replicas crash; the leader's unflushed tail is lost with its page cache. It comes back first, leads in a
    new epoch and writes new records at the offsets the lost ones had. The follower, whose high watermark covers the
    lost records, returns: truncating to its high watermark would keep them, and its log would hold other records
    than the leader's at the same offsets. With leader epochs it truncates to where the leader's epoch ended."""
    tp = TopicPartition("kip101-divergence", 0)
    leader, follower = 1, 2
    cluster.create_topic(tp.topic, [[leader, follower]], {"min.insync.replicas": "1"})
    wait_until(lambda: in_sync(cluster, tp, (leader, follower)), message="both replicas in sync")
    old = [f"m{i}" for i in range(5)]
    produce_all(cluster, tp, old)  # one batch each, so the tail is whole records
    assert cluster.stored_values(follower, tp) == encoded(old)

    # The follower goes first, so the leader is the last ISR member and the one the controller waits for.
    cluster.kill(follower)
    wait_until(lambda: in_sync(cluster, tp, (leader,)), timeout=FAILOVER_DEADLINE_S, message="the follower out")
    cluster.kill(leader)
    wait_until(lambda: cluster.state(tp).leader == NO_LEADER, timeout=FAILOVER_DEADLINE_S, message="no leader")

    # The OS crash: the leader's last two batches never reached the disk, and the one before is torn.
    (segment,) = segments(cluster, leader, tp)
    data = segment.read_bytes()
    torn_at = sum(header.size for _, header in list(iter_headers(data))[:3]) + 10
    segment.write_bytes(data[:torn_at])
    # The follower had learnt the high watermark past all five: the HW-only rule keeps them all.
    write_high_watermark(cluster, follower, tp, len(old))

    cluster.restart(leader)
    wait_until(lambda: cluster.state(tp).leader == leader, timeout=FAILOVER_DEADLINE_S, message="the leader back")
    new = [f"n{i}" for i in range(3)]
    produce_all(cluster, tp, new)  # at offsets 3.. in the new epoch: where m3, m4 were on the follower
    cluster.restart(follower)
    wait_until(lambda: in_sync(cluster, tp, (leader, follower)), timeout=30, message="the follower back in sync")
    produce_all(cluster, tp, ["n3"])

    # In sync and idle: everything is below the high watermark, and both logs are the same bytes.
    wait_until(lambda: log_bytes(cluster, follower, tp) == log_bytes(cluster, leader, tp), timeout=10,
               message="byte-identical logs")
    expected = encoded([*old[:3], *new, "n3"])
    assert cluster.stored_values(leader, tp) == expected
    assert cluster.stored_values(follower, tp) == expected
    assert "to local high watermark" not in cluster.brokers[follower].process.log()


# ------------------------------------------------------------------ fetchers follow the leader


def test_a_follower_fetches_from_the_new_leader_after_the_leader_is_killed(cluster: Cluster,
                                                                           wait_until: WaitUntil) -> None:
    tp = TopicPartition("moving-leader", 0)
    cluster.create_topic(tp.topic, [list(BROKER_IDS)], {"min.insync.replicas": "2"})
    wait_until(lambda: in_sync(cluster, tp, BROKER_IDS), message="all three replicas in sync")
    produce_all(cluster, tp, ["before"])
    old_leader = cluster.state(tp).leader
    cluster.kill(old_leader)
    wait_until(lambda: cluster.state(tp).leader not in (old_leader, NO_LEADER), timeout=FAILOVER_DEADLINE_S,
               message="a new leader")
    new_leader = cluster.state(tp).leader
    (follower,) = (b for b in BROKER_IDS if b not in (old_leader, new_leader))
    # ReplicaFetcherThread-0-<new leader> started on the follower (its log prefix names the source broker).
    wait_until(lambda: f"[ReplicaFetcher replicaId={follower}, leaderId={new_leader}, fetcherId=0] Starting"
               in cluster.brokers[follower].process.log(), timeout=FAILOVER_DEADLINE_S,
               message="the follower's fetcher for the new leader")
    # min.insync.replicas=2 with the old leader gone: each acks=all completes only once the follower fetched it.
    after = [f"after-{i}" for i in range(5)]
    for value in after:
        wait_until(lambda v=value: cluster.produce(tp, v) == ErrorCode.NONE, timeout=FAILOVER_DEADLINE_S,
                   message=f"acks=all produce of {value}")
    wait_until(lambda: log_bytes(cluster, follower, tp) == log_bytes(cluster, new_leader, tp), timeout=10,
               message="the follower's log equal to the new leader's")
    stored = cluster.stored_values(follower, tp)
    assert [v for v in stored if v in encoded(["before", *after])] == encoded(["before", *after])

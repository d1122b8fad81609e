"""Planned operations with real processes: a broker's controlled shutdown on SIGTERM, and leadership moved back
to the preferred replicas. A real ZooKeeper, the real controller and brokers; every wait has a deadline on a
condition."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest
from conftest import REPO_ROOT

from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.integration.failover.test_failover import BROKER_IDS, BROKER_OVERRIDES, FAILOVER_DEADLINE_S, Cluster, in_sync
from zk.client import KafkaZkClient

if TYPE_CHECKING:
    from conftest import StartBroker, StartBrokers, StartController, WaitUntil

pytestmark = pytest.mark.integration

TOPIC = "planned"
# Broker 1 leads partitions 0 and 1 and follows 2.
ASSIGNMENT = ((1, 2, 3), (1, 3, 2), (2, 1, 3))
PARTITIONS = [TopicPartition(TOPIC, p) for p in range(len(ASSIGNMENT))]
# What a producer may meet while leadership moves: it retries them.
RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION}
# The longest a partition may refuse acks=all writes while its leader moves away in a controlled way: a metadata
# round trip, not a session timeout.
MAX_BLIP_S = 3.0


# A controller that checks leader balance every second (the test that waits for it).
AUTO_REBALANCE = {"leader.imbalance.check.interval.seconds": "1"}


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest,
    start_brokers: StartBrokers,
    start_broker: StartBroker,
    start_controller: StartController,
    zk_client: KafkaZkClient,
) -> Iterator[Cluster]:
    brokers = start_brokers(BROKER_IDS, BROKER_OVERRIDES)
    controller_overrides = getattr(request, "param", None)
    c = Cluster(brokers, start_controller(overrides=controller_overrides), zk_client, start_broker)
    try:
        c.create_topic(TOPIC, ASSIGNMENT, {"min.insync.replicas": "2"})
        yield c
    finally:
        for channel in c.channels.values():
            channel.close()


def wait_fully_replicated(cluster: Cluster, wait_until: WaitUntil) -> None:
    for tp, replicas in zip(PARTITIONS, ASSIGNMENT, strict=True):
        wait_until(lambda tp=tp, r=replicas: in_sync(cluster, tp, r), timeout=FAILOVER_DEADLINE_S,
                   message=f"{tp} ISR never reached {replicas}")


@dataclass
class ProduceLoop:
    """acks=all records, one at a time, to each partition's current leader (per ZooKeeper); each attempt's
    moment and error code."""

    cluster: Cluster
    partitions: list[TopicPartition]
    results: dict[TopicPartition, list[tuple[float, int]]] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            for tp in self.partitions:
                error = self.cluster.produce(tp, f"r{i}")
                self.results.setdefault(tp, []).append((time.monotonic(), error))
            i += 1

    def longest_unavailability(self, tp: TopicPartition) -> float:
        """The longest time between two acknowledged writes."""
        acked = [t for t, error in self.results[tp] if error == ErrorCode.NONE]
        return max((b - a for a, b in itertools.pairwise(acked)), default=0.0)


def test_sigterm_moves_leadership_away_before_the_broker_exits(cluster: Cluster, wait_until: WaitUntil) -> None:
    wait_fully_replicated(cluster, wait_until)
    led = [tp for tp in PARTITIONS if cluster.state(tp).leader == 1]
    assert led == PARTITIONS[:2]
    load = ProduceLoop(cluster, PARTITIONS)
    producer = threading.Thread(target=load.run, daemon=True)
    producer.start()
    wait_until(lambda: all(len(load.results.get(tp, [])) >= 5 for tp in PARTITIONS), message="no produce went")

    broker = cluster.brokers[1]
    broker.process.signal(signal.SIGTERM)
    # Sampled while the broker still runs: its registration is still there when its partitions have moved.
    moved_while_registered = False
    deadline = time.monotonic() + FAILOVER_DEADLINE_S
    while broker.process.popen.poll() is None and time.monotonic() < deadline:
        registered = cluster.zk.get_broker(1) is not None
        states = [cluster.state(tp) for tp in led]
        if registered and all(s.leader not in (1, -1) and 1 not in s.isr for s in states):
            moved_while_registered = True
        time.sleep(0.005)
    assert broker.process.wait(timeout=FAILOVER_DEADLINE_S) == 0
    cluster.brokers.pop(1)
    time.sleep(1.0)  # a second of writes to the new leaders
    load.stop.set()
    producer.join(timeout=30)

    log = broker.process.log()
    assert "Starting controlled shutdown" in log
    assert "Controlled shutdown succeeded" in log, log[-4000:]
    assert log.index("Controlled shutdown succeeded") < log.index("logs cleanly")
    # It is told to stop fetching the partition it follows (StopReplica without delete), as it leaves its ISR. (It
    # may be gone before the request arrives, as in Kafka: the controller answers before the requests are sent.)
    stop_replica = "Sending StopReplica request (delete = false) for 1 partitions to broker 1"
    wait_until(lambda: stop_replica in cluster.controller.log(), message="the controller's StopReplica line")
    assert moved_while_registered, "the led partitions had no new leader while broker 1 was still registered"
    for tp in led:
        state = cluster.state(tp)
        assert state.leader in (2, 3) and 1 not in state.isr, f"{tp}: {state}"
    for tp in PARTITIONS:
        errors = {error for _, error in load.results[tp] if error != ErrorCode.NONE}
        assert errors <= RETRIABLE, f"{tp}: {[ErrorCode(e).name for e in errors]}"
        assert load.longest_unavailability(tp) < MAX_BLIP_S, f"{tp} unavailable {load.longest_unavailability(tp)}s"

    cluster.restart(1)
    restarted = cluster.brokers[1].process.log()
    assert "(clean shutdown)" in restarted
    assert "was not shut down cleanly" not in restarted


# ------------------------------------------------------------------ preferred replica election


def bounce_broker_1(cluster: Cluster, wait_until: WaitUntil) -> None:
    """Kill broker 1 so that others lead its preferred partitions, restart it and wait until it has caught up."""
    wait_fully_replicated(cluster, wait_until)
    cluster.kill(1)
    wait_until(lambda: all(cluster.state(tp).leader in (2, 3) for tp in PARTITIONS[:2]), timeout=FAILOVER_DEADLINE_S,
               message="broker 1's partitions were not taken over")
    cluster.restart(1)
    wait_fully_replicated(cluster, wait_until)


def preferred_leaders_restored(cluster: Cluster) -> bool:
    return all(cluster.state(tp).leader == replicas[0] for tp, replicas in zip(PARTITIONS, ASSIGNMENT, strict=True))


def leader_election(zk_connect: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "minibroker.cli", "leader-election", "--zookeeper", zk_connect, *args]
    return subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


def test_the_command_moves_leadership_back_to_the_preferred_replicas(
    cluster: Cluster, wait_until: WaitUntil, zk_connect: str
) -> None:
    bounce_broker_1(cluster, wait_until)
    assert not preferred_leaders_restored(cluster)
    epochs = {tp: cluster.state(tp).leader_epoch for tp in PARTITIONS}

    one = leader_election(zk_connect, "--election-type", "preferred", "--topic", TOPIC, "--partition", "0")
    assert one.returncode == 0, one.stderr
    assert one.stdout == "Successfully completed leader election (PREFERRED) for partitions planned-0\n"
    assert cluster.state(PARTITIONS[0]).leader == 1
    assert cluster.state(PARTITIONS[0]).leader_epoch == epochs[PARTITIONS[0]] + 1

    everything = leader_election(zk_connect, "--election-type", "preferred", "--all-topic-partitions")
    assert everything.returncode == 0, everything.stderr
    assert everything.stdout.splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions planned-1",
        "Valid replica already elected for partitions planned-0, planned-2",
    ]
    assert preferred_leaders_restored(cluster)
    assert cluster.zk.get_preferred_replica_election() == set()

    unknown = leader_election(zk_connect, "--election-type", "preferred", "--topic", TOPIC, "--partition", "9")
    assert unknown.returncode == 1
    assert unknown.stdout == ("Error completing leader election (PREFERRED) for partition: planned-9: This server "
                              "does not host this topic-partition.\n")


@pytest.mark.parametrize("cluster", [AUTO_REBALANCE], indirect=True)
def test_the_controller_rebalances_leadership_by_itself(cluster: Cluster, wait_until: WaitUntil) -> None:
    bounce_broker_1(cluster, wait_until)
    wait_until(lambda: preferred_leaders_restored(cluster), timeout=FAILOVER_DEADLINE_S,
               message="the auto leader rebalance did not restore the preferred leaders")
    assert "triggered by auto" in cluster.controller.log()

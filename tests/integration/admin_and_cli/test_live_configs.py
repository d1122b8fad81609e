"""Live configuration changes between real processes (a real ZooKeeper, the controller, three brokers):
`minibroker configs` (kafka-configs.sh) writes /config/... and a /config/changes notification, and every broker
applies it without a restart. Every wait is a condition with a deadline."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode
from tests.integration.replicated_topic import BROKER_IDS, FAST_REPLICATION, ReplicatedTopic, replicated_topic
from zk.client import KafkaZkClient

if TYPE_CHECKING:
    from conftest import BrokerProcess, StartBrokers, StartController, WaitUntil

pytestmark = pytest.mark.integration

TOPIC = "live"
BROKER_OVERRIDES = {**FAST_REPLICATION, "log.retention.check.interval.ms": "300"}
REPO_ROOT = __import__("pathlib").Path(__file__).resolve().parents[3]


class Cluster(ReplicatedTopic):
    def produce(self, *values: str, timeout_ms: int = 10_000, pad_to: int = 200,
                timestamp_ms: int | None = None) -> pb.ProduceResponse.PartitionProduceResponse:
        """Records of 200 bytes stamped now: segment.bytes rolls them and retention.ms judges them."""
        return super().produce(*values, timeout_ms=timeout_ms, pad_to=pad_to, timestamp_ms=timestamp_ms)

    def configs(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`minibroker configs ...` against broker 1, as a user runs it."""
        argv = [sys.executable, "-m", "minibroker.cli", "configs", "--bootstrap-server",
                self.brokers[1].address, *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)

    def segments(self, broker_id: int) -> list[str]:
        return sorted(p.name for p in (self.brokers[broker_id].log_dir / f"{TOPIC}-0").glob("*.log"))


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController, zk_client: KafkaZkClient,
            wait_until: WaitUntil) -> Iterator[Cluster]:
    """Topic `live`: RF 3, min.insync.replicas=1, all in sync."""
    with replicated_topic(Cluster, start_brokers, start_controller, zk_client, wait_until, TOPIC, 1,
                          BROKER_OVERRIDES) as cluster:
        wait_until(lambda: cluster.isr() == BROKER_IDS, message="a full ISR")
        yield cluster


def applied(broker: BrokerProcess, text: str) -> bool:
    return text in broker.process.log()


def test_min_insync_replicas_raised_live_refuses_acks_all_once_a_follower_stops(
        cluster: Cluster, wait_until: WaitUntil) -> None:
    done = cluster.configs("--entity-type", "topics", "--entity-name", TOPIC, "--alter",
                           "--add-config", "min.insync.replicas=3")
    assert (done.returncode, done.stdout.strip()) == (0, f"Completed updating config for topic {TOPIC}."), done
    wait_until(lambda: all(applied(b, "Processing override for entityPath: topics/live with config:"
                                      " {'min.insync.replicas': '3'}") for b in cluster.brokers.values()),
               timeout=20, message="every broker to apply the change")
    described = cluster.configs("--entity-type", "topics", "--entity-name", TOPIC, "--describe")
    assert described.stdout.splitlines() == [
        f"Dynamic configs for topic {TOPIC} are:",
        "  min.insync.replicas=3 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:min.insync.replicas=3}"], described
    assert cluster.produce("three in sync").error_code == ErrorCode.NONE
    follower = cluster.brokers[next(b for b in BROKER_IDS if b != cluster.leader())]
    follower.process.signal(signal.SIGSTOP)
    try:
        # The leader drops it (replica.lag.time.max.ms) or the controller does (its session expired).
        wait_until(lambda: follower.broker_id not in cluster.isr(), timeout=20, message="the ISR to shrink")
        # ZooKeeper may show the shrink a moment before the leader takes it: a produce in between is appended
        # and refused afterwards (NOT_ENOUGH_REPLICAS_AFTER_APPEND); from then on none is appended.
        codes: list[int] = []
        wait_until(lambda: codes.append(cluster.produce("two in sync").error_code) or
                   codes[-1] == ErrorCode.NOT_ENOUGH_REPLICAS, timeout=20, message="acks=all to be refused")
        assert set(codes) <= {ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.NOT_ENOUGH_REPLICAS}, codes
    finally:
        follower.process.signal(signal.SIGCONT)
    # Lowered again, live: two in-sync replicas are enough.
    cluster.configs("--entity-type", "topics", "--entity-name", TOPIC, "--alter",
                    "--delete-config", "min.insync.replicas")
    wait_until(lambda: cluster.produce("back to the default").error_code == ErrorCode.NONE, timeout=20,
               message="acks=all to succeed after the override is deleted")


def test_segment_bytes_and_retention_ms_take_effect_live(cluster: Cluster, wait_until: WaitUntil) -> None:
    leader = cluster.leader()
    for i in range(5):
        assert cluster.produce(f"before-{i}").error_code == ErrorCode.NONE
    assert len(cluster.segments(leader)) == 1
    done = cluster.configs("--entity-type", "topics", "--entity-name", TOPIC, "--alter",
                           "--add-config", "segment.bytes=1024")
    assert done.returncode == 0, done
    wait_until(lambda: applied(cluster.brokers[leader], "'segment.bytes': '1024'}"),
               timeout=20, message="the leader to apply segment.bytes")
    for i in range(12):
        assert cluster.produce(f"after-{i}").error_code == ErrorCode.NONE
    assert len(cluster.segments(leader)) >= 3, cluster.segments(leader)
    done = cluster.configs("--entity-type", "topics", "--entity-name", TOPIC, "--alter",
                           "--add-config", "segment.bytes=1024,retention.ms=1000")
    assert done.returncode == 0, done
    # Every closed segment's newest record is older than a second soon: retention deletes all but the active one.
    wait_until(lambda: len(cluster.segments(leader)) == 1, timeout=30, message="retention to delete old segments")
    assert applied(cluster.brokers[leader], "retention time 1000ms breach")


def test_broker_configs_kafka_cannot_change_live_are_refused_the_others_apply(
        cluster: Cluster, wait_until: WaitUntil) -> None:
    refused = cluster.configs("--entity-type", "brokers", "--entity-default", "--alter",
                              "--add-config", "broker.id=7,log.retention.ms=1000")
    assert refused.returncode == 1
    assert "Cannot update these configs dynamically: Set(broker.id)" in refused.stdout, refused
    assert cluster.zk.get_entity_config("brokers", "<default>") == {}
    done = cluster.configs("--entity-type", "brokers", "--entity-name", "1", "--alter",
                           "--add-config", "num.replica.fetchers=2")
    assert (done.returncode, done.stdout.strip()) == (0, "Completed updating config for broker 1."), done
    wait_until(lambda: applied(cluster.brokers[1], "Resizing fetcher thread pool size from 1 to 2"), timeout=20,
               message="broker 1 to resize its fetcher pool")
    assert not applied(cluster.brokers[2], "Resizing fetcher thread pool")
    done = cluster.configs("--entity-type", "brokers", "--entity-default", "--alter",
                           "--add-config", "log.retention.ms=604800000")
    assert (done.returncode, done.stdout.strip()) == (0, "Completed updating default config for brokers in the"
                                                         " cluster."), done
    described = cluster.configs("--entity-type", "brokers", "--entity-default", "--describe")
    assert described.stdout.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=604800000 sensitive=false"
        " synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=604800000}"], described
    wait_until(lambda: all(applied(b, "Applying dynamic broker configs: {'log.retention.ms': '604800000'")
                           for b in cluster.brokers.values()), timeout=20, message="every broker to apply it")

"""The broker's Prometheus endpoint (`metrics.port`) with real processes: Kafka's ReplicaManager names, and the ISR
metrics following a follower frozen with SIGSTOP and resumed. Every wait has a deadline on a condition."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import TYPE_CHECKING

import pytest
from prometheus_client.parser import text_string_to_metric_families

from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.integration.failover.test_failover import BROKER_IDS, BROKER_OVERRIDES, FAILOVER_DEADLINE_S, Cluster, in_sync
from tests.integration.replication.test_leader_epochs import running_cluster
from tests.integration.replication.test_replication import paused
from zk.client import KafkaZkClient
from zk.paths import NO_LEADER
from zk.server import free_port

if TYPE_CHECKING:
    from conftest import StartBroker, StartBrokers, StartController, WaitUntil

pytestmark = pytest.mark.integration

RM = "kafka_server_ReplicaManager_"


def scrape(port: int) -> dict[str, float]:
    """Every unlabelled sample of the endpoint by name (counters with Prometheus' `_total`)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {sample.name: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if not sample.labels}


def test_the_leader_reports_isr_shrink_and_expand(start_broker: StartBroker, start_controller: StartController,
                                                  zk_client: KafkaZkClient, wait_until: WaitUntil) -> None:
    port = free_port()
    with running_cluster(start_broker, start_controller, zk_client, {1: {"metrics.port": str(port)}}) as cluster:
        tp = TopicPartition("metered", 0)
        leader, follower = 1, 2
        cluster.create_topic(tp.topic, [[leader, follower]], {"min.insync.replicas": "1"})
        wait_until(lambda: in_sync(cluster, tp, (leader, follower)), message="both replicas in sync")
        before = scrape(port)
        assert before[f"{RM}LeaderCount"] == 1 and before[f"{RM}PartitionCount"] == 1
        assert before[f"{RM}UnderReplicatedPartitions"] == 0 and before[f"{RM}UnderMinIsrPartitionCount"] == 0
        # The group coordinator's gauges (no group coordinated here yet).
        gm = "kafka_coordinator_group_GroupMetadataManager_"
        assert (before[f"{gm}NumGroups"], before[f"{gm}NumOffsets"], before[f"{gm}NumGroupsStable"]) == (0, 0, 0)

        with paused(cluster.brokers[follower]):
            # An idle follower at the log end stays in sync however long it is silent: a record it cannot fetch
            # makes it lag. acks=all completes once the leader has dropped it (min.insync.replicas=1).
            assert cluster.produce(tp, "while paused") == ErrorCode.NONE
            assert in_sync(cluster, tp, (leader,))
            shrunk = scrape(port)
            assert shrunk[f"{RM}UnderReplicatedPartitions"] == 1
            assert shrunk[f"{RM}IsrShrinksPerSec_total"] == before[f"{RM}IsrShrinksPerSec_total"] + 1

        wait_until(lambda: scrape(port)[f"{RM}UnderReplicatedPartitions"] == 0, timeout=FAILOVER_DEADLINE_S,
                   message="UnderReplicatedPartitions back to 0")
        expanded = scrape(port)
        assert expanded[f"{RM}IsrExpandsPerSec_total"] == before[f"{RM}IsrExpandsPerSec_total"] + 1
        assert expanded[f"{RM}IsrShrinksPerSec_total"] == shrunk[f"{RM}IsrShrinksPerSec_total"]
        assert in_sync(cluster, tp, (leader, follower))


KC = "kafka_controller_KafkaController_"


def serving(port: int) -> bool:
    try:
        scrape(port)
    except urllib.error.URLError:
        return False
    return True


def test_the_controller_reports_offline_partitions(start_brokers: StartBrokers, start_broker: StartBroker,
                                                   start_controller: StartController, zk_client: KafkaZkClient,
                                                   wait_until: WaitUntil) -> None:
    port, standby_port = free_port(), free_port()
    cluster = Cluster(start_brokers(BROKER_IDS, BROKER_OVERRIDES),
                      start_controller(1000, {"metrics.port": str(port)}), zk_client, start_broker)
    try:
        wait_until(lambda: zk_client.get_controller_id() == 1000, message="the controller elected")
        start_controller(1001, {"metrics.port": str(standby_port)})
        tp = TopicPartition("fragile", 0)
        cluster.create_topic(tp.topic, [[1, 2]], {"min.insync.replicas": "1"})
        wait_until(lambda: in_sync(cluster, tp, (1, 2)), message="both replicas in sync")
        wait_until(lambda: scrape(port)[f"{KC}GlobalPartitionCount"] == 1, message="the partition counted")
        metrics = scrape(port)
        assert metrics[f"{KC}ActiveControllerCount"] == 1 and metrics[f"{KC}GlobalTopicCount"] == 1
        assert metrics[f"{KC}OfflinePartitionsCount"] == 0 and metrics[f"{KC}PreferredReplicaImbalanceCount"] == 0
        wait_until(lambda: serving(standby_port), message="the standby's endpoint")
        assert scrape(standby_port)[f"{KC}ActiveControllerCount"] == 0

        # Every ISR member dies; unclean election is off: the partition stays offline until one returns.
        cluster.kill(1, 2)
        wait_until(lambda: scrape(port)[f"{KC}OfflinePartitionsCount"] == 1, timeout=FAILOVER_DEADLINE_S,
                   message="OfflinePartitionsCount 1")
        state = cluster.state(tp)
        assert state.leader == NO_LEADER
        cluster.restart(state.isr[0])
        wait_until(lambda: scrape(port)[f"{KC}OfflinePartitionsCount"] == 0, timeout=FAILOVER_DEADLINE_S,
                   message="OfflinePartitionsCount back to 0")
        assert cluster.state(tp).leader == state.isr[0]
        assert scrape(port)[f"{KC}PreferredReplicaImbalanceCount"] == (0 if state.isr[0] == 1 else 1)
    finally:
        for channel in cluster.channels.values():
            channel.close()

"""The broker's Prometheus endpoint (`metrics.port`) with real processes: Kafka's ReplicaManager names, and the ISR
metrics following a follower frozen with SIGSTOP and resumed. Every wait has a deadline on a condition."""

from __future__ import annotations

import urllib.request
from typing import TYPE_CHECKING

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_failover import FAILOVER_DEADLINE_S, in_sync
from test_leader_epochs import running_cluster
from test_replication import paused

from proto.errors import ErrorCode
from proto.types import TopicPartition
from zk.client import KafkaZkClient
from zk.server import free_port

if TYPE_CHECKING:
    from conftest import StartBroker, StartController, WaitUntil

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

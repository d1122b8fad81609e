"""broker/coordinator/transaction/transaction_state_topic.py: __transaction_state is created at first need with
transaction.state.log.* and Kafka's enforced topic configs, not while fewer brokers are alive than its replication
factor, and its partition's leader is the coordinator FindCoordinator names (coordinator/internal_topic.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from broker.admin.admin_manager import CreateTopicResult, NewTopic
from broker.config.metadata_cache import MetadataCache
from broker.coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC_NAME
from broker.coordinator.transaction.transaction_state_topic import TransactionStateTopic
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.unit.broker.broker_helpers import live_broker, metadata_state


def test_created_at_first_need_compacted_uncompressed_with_its_min_isr() -> None:
    cache = MetadataCache(1)
    created: list[NewTopic] = []

    def create_topics(topics: Sequence[NewTopic], validate_only: bool) -> list[CreateTopicResult]:
        created.extend(topics)
        return [CreateTopicResult(t.name, ErrorCode.NONE) for t in topics]

    topic = TransactionStateTopic(cache, num_partitions=50, replication_factor=3, min_isr=2,
                                  segment_bytes=104857600, create_topics=create_topics)
    cache.update_metadata(1, [], [live_broker(1), live_broker(2)])
    assert asyncio.run(topic.leader_node(0, "PLAINTEXT")) is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert created == []  # two brokers cannot hold three replicas
    cache.update_metadata(1, [], [live_broker(1), live_broker(2), live_broker(3)])
    assert asyncio.run(topic.leader_node(0, "PLAINTEXT")) is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert [(t.name, t.num_partitions, t.replication_factor, dict(t.configs)) for t in created] == [
        (TRANSACTION_STATE_TOPIC_NAME, 50, 3,
         {"cleanup.policy": "compact", "min.insync.replicas": "2", "segment.bytes": "104857600",
          "unclean.leader.election.enable": "false", "compression.type": "uncompressed"})]
    cache.update_metadata(1, [(TopicPartition(TRANSACTION_STATE_TOPIC_NAME, 0), metadata_state(leader=2))],
                          [live_broker(1), live_broker(2), live_broker(3)])
    node = asyncio.run(topic.leader_node(0, "PLAINTEXT"))
    assert not isinstance(node, ErrorCode) and node.id == 2
    assert len(created) == 1

"""broker/coordinator/group/offsets_topic.py: __consumer_offsets is created at first use, compacted, with the
configured partitions and replication factor, and not while fewer brokers are alive than that factor."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from broker.admin.admin_manager import CreateTopicResult, NewTopic
from broker.config.metadata_cache import MetadataCache
from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC_NAME
from broker.coordinator.group.offsets_topic import OffsetsTopic
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.unit.broker.broker_helpers import live_broker, metadata_state


def test_created_at_first_use_only_with_enough_live_brokers() -> None:
    cache = MetadataCache(1)
    created: list[NewTopic] = []

    def create_topics(topics: Sequence[NewTopic], validate_only: bool) -> list[CreateTopicResult]:
        created.extend(topics)
        return [CreateTopicResult(t.name, ErrorCode.NONE) for t in topics]

    topic = OffsetsTopic(cache, num_partitions=50, replication_factor=3, segment_bytes=104857600,
                         create_topics=create_topics)
    cache.update_metadata(1, [], [live_broker(1), live_broker(2)])
    assert asyncio.run(topic.ensure()) is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert created == []  # two brokers cannot hold three replicas: Kafka waits for the cluster to start
    cache.update_metadata(1, [], [live_broker(1), live_broker(2), live_broker(3)])
    # Created now; the client asks again once the partitions have leaders.
    assert asyncio.run(topic.ensure()) is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert [(t.name, t.num_partitions, t.replication_factor, dict(t.configs)) for t in created] == [
        (GROUP_METADATA_TOPIC_NAME, 50, 3,
         {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"})]
    cache.update_metadata(1, [(TopicPartition(GROUP_METADATA_TOPIC_NAME, 0), metadata_state())],
                          [live_broker(1), live_broker(2), live_broker(3)])
    assert asyncio.run(topic.ensure()) is ErrorCode.NONE
    assert len(created) == 1

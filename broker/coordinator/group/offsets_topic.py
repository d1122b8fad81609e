"""__consumer_offsets, created on first use (Kafka's KafkaApis.createInternalTopic for FindCoordinator):
offsets.topic.num.partitions partitions, offsets.topic.replication.factor replicas, compacted, segments of
offsets.topic.segment.bytes; min.insync.replicas is the broker's (coordinator/internal_topic.py creates it)."""

from __future__ import annotations

from concurrent.futures import Executor

from broker.config.metadata_cache import MetadataCache
from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC_NAME
from broker.coordinator.internal_topic import CreateTopics, InternalTopic


class OffsetsTopic(InternalTopic):
    def __init__(self, metadata_cache: MetadataCache, num_partitions: int, replication_factor: int,
                 segment_bytes: int, create_topics: CreateTopics, zookeeper_executor: Executor | None = None) -> None:
        # Kafka's GroupCoordinator.offsetsTopicConfigs.
        configs: list[tuple[str, str | None]] = [("cleanup.policy", "compact"), ("segment.bytes", str(segment_bytes)),
                                                 ("compression.type", "producer")]
        super().__init__(GROUP_METADATA_TOPIC_NAME, "offsets.topic.replication.factor", metadata_cache,
                         num_partitions, replication_factor, configs, create_topics, zookeeper_executor)

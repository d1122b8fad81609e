"""__transaction_state, created on first need (Kafka's KafkaApis.createInternalTopic for FindCoordinator with a
transactional id): transaction.state.log.num.partitions partitions, .replication.factor replicas, and Kafka's
TransactionStateManager.transactionTopicConfigs: compacted, min.insync.replicas from .min.isr, segments of
.segment.bytes, never an unclean leader, uncompressed (coordinator/internal_topic.py creates it)."""

from __future__ import annotations

from concurrent.futures import Executor

from broker.config.metadata_cache import MetadataCache
from broker.coordinator.internal_topic import CreateTopics, InternalTopic
from broker.coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC_NAME


class TransactionStateTopic(InternalTopic):
    def __init__(self, metadata_cache: MetadataCache, num_partitions: int, replication_factor: int, min_isr: int,
                 segment_bytes: int, create_topics: CreateTopics, zookeeper_executor: Executor | None = None) -> None:
        configs: list[tuple[str, str | None]] = [
            ("cleanup.policy", "compact"), ("min.insync.replicas", str(min_isr)),
            ("segment.bytes", str(segment_bytes)), ("unclean.leader.election.enable", "false"),
            ("compression.type", "uncompressed")]
        super().__init__(TRANSACTION_STATE_TOPIC_NAME, "transaction.state.log.replication.factor", metadata_cache,
                         num_partitions, replication_factor, configs, create_topics, zookeeper_executor)

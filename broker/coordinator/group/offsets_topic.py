"""__consumer_offsets, created on first use (Kafka's KafkaApis.createInternalTopic for FindCoordinator):
offsets.topic.num.partitions partitions, offsets.topic.replication.factor replicas, compacted, segments of
offsets.topic.segment.bytes; min.insync.replicas is the broker's. While fewer brokers are alive than the
replication factor asks, it is not created and FindCoordinator answers COORDINATOR_NOT_AVAILABLE, as Kafka
does (a cluster still starting up); so does it until the new topic's partitions have leaders."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

from broker.admin.admin_manager import CreateTopicResult, NewTopic
from broker.config.metadata_cache import MetadataCache
from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC_NAME
from proto.errors import ErrorCode

logger = logging.getLogger(__name__)


class OffsetsTopic:
    def __init__(self, metadata_cache: MetadataCache, num_partitions: int, replication_factor: int,
                 segment_bytes: int, create_topics: Callable[[Sequence[NewTopic], bool], list[CreateTopicResult]],
                 zookeeper_executor: Executor | None = None) -> None:
        self._metadata_cache = metadata_cache
        # Where the topic is created in ZooKeeper (the broker's ZooKeeper threads; None: the default executor).
        self._zookeeper_executor = zookeeper_executor
        self._num_partitions = num_partitions
        self._replication_factor = replication_factor
        self._segment_bytes = segment_bytes
        self._create_topics = create_topics

    def configs(self) -> list[tuple[str, str | None]]:
        """Kafka's GroupCoordinator.offsetsTopicConfigs."""
        return [("cleanup.policy", "compact"), ("segment.bytes", str(self._segment_bytes)),
                ("compression.type", "producer")]

    async def ensure(self) -> ErrorCode:
        """NONE when the topic exists; otherwise create it if enough brokers are alive, and answer
        COORDINATOR_NOT_AVAILABLE (the client asks again once its partitions have leaders)."""
        if self._metadata_cache.contains_topic(GROUP_METADATA_TOPIC_NAME):
            return ErrorCode.NONE
        alive = len(self._metadata_cache.alive_broker_ids())
        if alive < self._replication_factor:
            logger.error("Number of alive brokers '%d' does not meet the required replication factor '%d' for the"
                         " offsets topic (configured via 'offsets.topic.replication.factor'). This error can be"
                         " ignored if the cluster is starting up and not all brokers are up yet.", alive,
                         self._replication_factor)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        topic = NewTopic(GROUP_METADATA_TOPIC_NAME, self._num_partitions, self._replication_factor, [],
                         self.configs())
        result = (await asyncio.get_running_loop().run_in_executor(
            self._zookeeper_executor, self._create_topics, [topic], False))[0]
        if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            logger.error("Creating %s failed: %s %s", GROUP_METADATA_TOPIC_NAME, result.error.name, result.message)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE

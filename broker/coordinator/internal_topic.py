"""An internal topic a coordinator lives on, created on first need (Kafka's KafkaApis.createInternalTopic, for
FindCoordinator): __consumer_offsets for the group coordinator (group/offsets_topic.py), __transaction_state for
the transaction coordinator (transaction/transaction_state_topic.py). While fewer brokers are alive than its
replication factor asks, it is not created and FindCoordinator answers COORDINATOR_NOT_AVAILABLE, as Kafka does (a
cluster still starting up); so does it until the new topic's partitions have leaders."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

from broker.admin.admin_manager import CreateTopicResult, NewTopic
from broker.config.metadata_cache import MetadataCache, Node
from proto.errors import ErrorCode
from proto.types import TopicPartition

logger = logging.getLogger(__name__)

CreateTopics = Callable[[Sequence[NewTopic], bool], list[CreateTopicResult]]
NO_LEADER = -1


class InternalTopic:
    def __init__(self, name: str, replication_factor_config: str, metadata_cache: MetadataCache,
                 num_partitions: int, replication_factor: int, configs: list[tuple[str, str | None]],
                 create_topics: CreateTopics, zookeeper_executor: Executor | None = None) -> None:
        self.name = name
        # The config key the log names when too few brokers are alive (offsets.topic.replication.factor ...).
        self._replication_factor_config = replication_factor_config
        self._metadata_cache = metadata_cache
        # Where the topic is created in ZooKeeper (the broker's ZooKeeper threads; None: the default executor).
        self._zookeeper_executor = zookeeper_executor
        self._num_partitions = num_partitions
        self._replication_factor = replication_factor
        self._configs = configs
        self._create_topics = create_topics

    def configs(self) -> list[tuple[str, str | None]]:
        return list(self._configs)

    async def ensure(self) -> ErrorCode:
        """NONE when the topic exists; otherwise create it if enough brokers are alive, and answer
        COORDINATOR_NOT_AVAILABLE (the client asks again once its partitions have leaders)."""
        if self._metadata_cache.contains_topic(self.name):
            return ErrorCode.NONE
        alive = len(self._metadata_cache.alive_broker_ids())
        if alive < self._replication_factor:
            logger.error("Number of alive brokers '%d' does not meet the required replication factor '%d' for the"
                         " %s topic (configured via '%s'). This error can be ignored if the cluster is starting up"
                         " and not all brokers are up yet.", alive, self._replication_factor, self.name,
                         self._replication_factor_config)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        topic = NewTopic(self.name, self._num_partitions, self._replication_factor, [], self.configs())
        result = (await asyncio.get_running_loop().run_in_executor(
            self._zookeeper_executor, self._create_topics, [topic], False))[0]
        if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            logger.error("Creating %s failed: %s %s", self.name, result.error.name, result.message)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE

    async def leader_node(self, partition: int, listener_name: str) -> ErrorCode | Node:
        """The leader of the topic's partition as reached on `listener_name` (a coordinator, for FindCoordinator);
        the topic created on first need, COORDINATOR_NOT_AVAILABLE until the partition has a live leader."""
        error = await self.ensure()
        if error is not ErrorCode.NONE:
            return error
        info = self._metadata_cache.get_partition_info(TopicPartition(self.name, partition))
        if info is None or info.leader == NO_LEADER:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        node = next((n for n in self._metadata_cache.get_alive_brokers(listener_name) if n.id == info.leader), None)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE if node is None else node

"""DelayedCreateTopics: a CreateTopics or CreatePartitions waiting for its partitions' leaders (Kafka's
DelayedCreatePartitions).

Writing the topic to ZooKeeper is only the request; the topic is usable once
the controller has elected leaders and this broker's metadata cache says so.
Woken by each UpdateMetadata that mentions the topic; at its deadline the
topics still without leaders are answered REQUEST_TIMED_OUT (they exist, and
will get leaders when a controller gets to them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from broker.admin.admin_manager import CreateTopicResult
from broker.config.metadata_cache import MetadataCache
from broker.purgatory.purgatory import DelayedOperation
from proto.errors import ErrorCode
from proto.types import TopicPartition
from zk.paths import NO_LEADER

CreateTopicsCallback = Callable[[list[CreateTopicResult]], None]


class DelayedCreateTopics(DelayedOperation):
    def __init__(self, delay_ms: int, results: Sequence[CreateTopicResult], metadata_cache: MetadataCache,
                 response_callback: CreateTopicsCallback) -> None:
        super().__init__(delay_ms)
        self._results = list(results)
        self._metadata_cache = metadata_cache
        self._response_callback = response_callback

    def _missing_leaders(self, result: CreateTopicResult) -> int:
        count = 0
        for partition in range(result.num_partitions):
            info = self._metadata_cache.get_partition_info(TopicPartition(result.name, partition))
            if info is None or info.leader == NO_LEADER:
                count += 1
        return count

    def try_complete(self) -> bool:
        if any(r.error is ErrorCode.NONE and self._missing_leaders(r) for r in self._results):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        for result in self._results:
            if result.error is ErrorCode.NONE and self._missing_leaders(result):
                result.error = ErrorCode.REQUEST_TIMED_OUT
                result.message = (f"The partitions of topic {result.name} were created, but not all of them had a"
                                  " leader before the timeout")
        self._response_callback(self._results)

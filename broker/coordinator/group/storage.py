"""How the group coordinator reaches __consumer_offsets: appends through the ReplicaManager, as Kafka's
GroupMetadataManager calls replicaManager.appendRecords (acks offsets.commit.required.acks, timeout
offsets.commit.timeout.ms, answered once the in-sync replicas have it), and reads of the leader's log for a
load. The coordinator itself sees only the two callables (Append and the log reader), so its unit tests run
on a log in memory."""

from __future__ import annotations

import asyncio
import threading

from broker.coordinator.group.group_metadata_manager import LoadedPartition, read_partition_log
from broker.purgatory.completion import Completion
from broker.replication.delayed_produce import ProducePartitionResponse
from broker.replication.replica_manager import ReplicaManager
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition


class ReplicaManagerStorage:
    def __init__(self, replica_manager: ReplicaManager, required_acks: int, timeout_ms: int,
                 loop: asyncio.AbstractEventLoop) -> None:
        self._replica_manager = replica_manager
        self._required_acks = required_acks
        self._timeout_ms = timeout_ms
        self._loop = loop
        self._loop_thread = threading.get_ident()

    async def append(self, tp: TopicPartition, batch: bytes) -> ProducePartitionResponse:
        completion: Completion[dict[TopicPartition, ProducePartitionResponse]] = Completion(self._loop,
                                                                                             self._loop_thread)
        self._replica_manager.append_records(self._timeout_ms, self._required_acks, [(tp, batch)], completion)
        return (await completion.future)[tp]

    def read_log(self, tp: TopicPartition, buffer_size: int) -> LoadedPartition:
        """The partition's log from its start to its end (this broker leads it). Blocking: call off the loop."""
        partition = self._replica_manager.get_partition(tp)
        log = None if partition is None else partition.log
        if log is None:
            raise KafkaError(f"{tp} has no log on this broker", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return read_partition_log(lambda offset, max_bytes: log.read(offset, max_bytes).records.read(),
                                  log.log_start_offset, log.log_end_offset, buffer_size)

"""How the group coordinator reaches __consumer_offsets (coordinator/storage.py): appends with
offsets.commit.required.acks and offsets.commit.timeout.ms, and reads of the leader's log for a load."""

from __future__ import annotations

import asyncio

from broker.coordinator.group.group_metadata_manager import LoadedPartition, read_partition_log
from broker.coordinator.storage import CoordinatorStorage
from broker.replication.delayed_produce import ProducePartitionResponse
from broker.replication.replica_manager import ReplicaManager
from proto.types import TopicPartition


class ReplicaManagerStorage(CoordinatorStorage):
    def __init__(self, replica_manager: ReplicaManager, required_acks: int, timeout_ms: int,
                 loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(replica_manager, loop)
        self._required_acks = required_acks
        self._timeout_ms = timeout_ms

    async def append(self, tp: TopicPartition, batch: bytes) -> ProducePartitionResponse:
        return await self.append_records(tp, batch, self._required_acks, self._timeout_ms)

    def read_log(self, tp: TopicPartition, buffer_size: int) -> LoadedPartition:
        """The partition's log from its start to its end (this broker leads it). Blocking: call off the loop."""
        reader, start, end = self.log_reader(tp)
        return read_partition_log(reader, start, end, buffer_size)

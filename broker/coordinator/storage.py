"""How a coordinator reaches its internal topic's partitions on this broker: appends through the ReplicaManager,
as Kafka's GroupMetadataManager and TransactionStateManager call replicaManager.appendRecords (answered once the
in-sync replicas have the batch when acks is -1), and the leader's log for a load. The coordinators themselves
see only callables, so their unit tests run on a log in memory."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from broker.log.log import AppendOrigin
from broker.purgatory.completion import Completion
from broker.replication.delayed_produce import ProducePartitionResponse
from broker.replication.replica_manager import ReplicaManager
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition

# Reads whole batches from the one holding the offset, up to max_bytes (at least one batch). Blocking.
LogReader = Callable[[int, int], bytes]


class CoordinatorStorage:
    def __init__(self, replica_manager: ReplicaManager, loop: asyncio.AbstractEventLoop) -> None:
        self._replica_manager = replica_manager
        self._loop = loop
        self._loop_thread = threading.get_ident()

    async def append_records(self, tp: TopicPartition, batch: bytes, required_acks: int,
                             timeout_ms: int) -> ProducePartitionResponse:
        completion: Completion[dict[TopicPartition, ProducePartitionResponse]] = Completion(self._loop,
                                                                                             self._loop_thread)
        # The coordinator's origin, as Kafka's appendForGroup and TransactionStateManager: a TxnOffsetCommit's
        # transactional batch (sequence 0 each time) is checked for its producer epoch, not for a client's sequence.
        self._replica_manager.append_records(timeout_ms, required_acks, [(tp, batch)], completion,
                                             AppendOrigin.COORDINATOR)
        return (await completion.future)[tp]

    def log_reader(self, tp: TopicPartition) -> tuple[LogReader, int, int]:
        """The partition's log (this broker leads it): a reader, its start and end offsets."""
        partition = self._replica_manager.get_partition(tp)
        log = None if partition is None else partition.log
        if log is None:
            raise KafkaError(f"{tp} has no log on this broker", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return (lambda offset, max_bytes: log.read(offset, max_bytes).records.read(), log.log_start_offset,
                log.log_end_offset)

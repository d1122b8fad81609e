"""DelayedProduce: an acks=all produce waiting for the high watermark (Kafka's server/DelayedProduce.scala).

Each partition whose local append succeeded waits until the leader's high
watermark reaches the offset after its last record; it is woken by high
watermark moves and leadership changes, and answered REQUEST_TIMED_OUT for the
partitions still waiting at its deadline. The records stay in the log either
way: a timeout only means the producer was not told they are safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from broker.purgatory.purgatory import DelayedOperation
from broker.replication.partition import Partition
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition


@dataclass(slots=True)
class ProducePartitionResponse:
    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str = ""


@dataclass(slots=True)
class ProducePartitionStatus:
    required_offset: int
    response: ProducePartitionResponse
    acks_pending: bool = field(default=False)


ProduceResponseCallback = Callable[[dict[TopicPartition, ProducePartitionResponse]], None]
PartitionLookup = Callable[[TopicPartition], Partition]


class DelayedProduce(DelayedOperation):
    def __init__(self, delay_ms: int, produce_status: Mapping[TopicPartition, ProducePartitionStatus],
                 get_partition: PartitionLookup, response_callback: ProduceResponseCallback) -> None:
        super().__init__(delay_ms)
        self._status = produce_status
        self._get_partition = get_partition
        self._response_callback = response_callback
        for status in produce_status.values():
            if status.response.error is ErrorCode.NONE:
                status.acks_pending = True
                # What the partition answers if the deadline comes first.
                status.response.error = ErrorCode.REQUEST_TIMED_OUT
                status.response.error_message = ""
            else:
                status.acks_pending = False

    def try_complete(self) -> bool:
        for tp, status in self._status.items():
            if not status.acks_pending:
                continue
            try:
                done, error = self._get_partition(tp).check_enough_replicas_reach_offset(status.required_offset)
            except KafkaError as e:
                done, error = True, e.code
            if done or error is not ErrorCode.NONE:
                status.acks_pending = False
                status.response.error = error
        if any(status.acks_pending for status in self._status.values()):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        self._response_callback({tp: status.response for tp, status in self._status.items()})

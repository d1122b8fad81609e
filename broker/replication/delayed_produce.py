"""DelayedProduce: an acks=all produce waiting for the high watermark (Kafka's server/DelayedProduce.scala).

Each partition whose local append succeeded waits until the leader's high
watermark reaches the offset after its last record; it is woken by high
watermark moves and leadership changes, and answered REQUEST_TIMED_OUT for the
partitions still waiting at its deadline. The records stay in the log either
way: a timeout only means the producer was not told they are safe.

Beyond Kafka, whose tryComplete asks every partition of the request at every
wake-up: a check asks only the partitions whose key woke it (all of them at the
first checks). A producer spreading records thin sends hundreds of partitions
in one request, each woken once by its own high watermark move: asking all of
them each time was quadratic, about a second of the event loop per request at
667 partitions (issue 27).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping
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
        self._pending: dict[TopicPartition, ProducePartitionStatus] = {}
        for tp, status in produce_status.items():
            if status.response.error is ErrorCode.NONE:
                status.acks_pending = True
                self._pending[tp] = status
                # What the partition answers if the deadline comes first.
                status.response.error = ErrorCode.REQUEST_TIMED_OUT
                status.response.error_message = ""
            else:
                status.acks_pending = False
        # What the next check asks: every pending partition, or only those woken since the last check.
        self._woken_lock = threading.Lock()
        self._check_all = True
        self._woken: set[TopicPartition] = set()

    def wake(self, key: Hashable | None) -> None:
        with self._woken_lock:
            if key is None:
                self._check_all = True
            elif isinstance(key, TopicPartition):
                self._woken.add(key)

    def try_complete(self) -> bool:
        with self._woken_lock:
            check_all, woken = self._check_all, self._woken
            self._check_all, self._woken = False, set()
        for tp in list(self._pending) if check_all else [tp for tp in woken if tp in self._pending]:
            status = self._pending[tp]
            try:
                done, error = self._get_partition(tp).check_enough_replicas_reach_offset(status.required_offset)
            except KafkaError as e:
                done, error = True, e.code
            if done or error is not ErrorCode.NONE:
                status.acks_pending = False
                status.response.error = error
                del self._pending[tp]
        if self._pending:
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        self._response_callback({tp: status.response for tp, status in self._status.items()})

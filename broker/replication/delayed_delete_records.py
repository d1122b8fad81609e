"""DelayedDeleteRecords: a DeleteRecords waiting for the low watermark (Kafka's server/DelayedDeleteRecords.scala).

The leader moved its log start offset at once; each partition is done when
the low watermark (the lowest log start offset among the leader and its
in-sync followers, which learn the leader's from their fetches and report
theirs in the next) reaches the requested offset. Woken when a follower's log
start offset changes and on leadership changes; answered REQUEST_TIMED_OUT
for the partitions still waiting at its deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.purgatory.purgatory import DelayedOperation
from broker.replication.partition import Partition
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition


@dataclass(slots=True)
class DeleteRecordsPartitionStatus:
    """One partition's answer: its low watermark (-1 on error) and error; `required_offset` is what the low
    watermark must reach (-1 when the partition failed at once)."""

    required_offset: int
    low_watermark: int
    error: ErrorCode
    pending: bool = False


DeleteRecordsResponseCallback = Callable[[dict[TopicPartition, DeleteRecordsPartitionStatus]], None]
PartitionLookup = Callable[[TopicPartition], Partition]


class DelayedDeleteRecords(DelayedOperation):
    def __init__(self, delay_ms: int, status: Mapping[TopicPartition, DeleteRecordsPartitionStatus],
                 get_partition: PartitionLookup, response_callback: DeleteRecordsResponseCallback) -> None:
        super().__init__(delay_ms)
        self._status = status
        self._get_partition = get_partition
        self._response_callback = response_callback
        for s in status.values():
            if s.error is ErrorCode.NONE:
                s.pending = True
                # What the partition answers if the deadline comes first.
                s.error = ErrorCode.REQUEST_TIMED_OUT
                s.low_watermark = -1

    def try_complete(self) -> bool:
        for tp, s in self._status.items():
            if not s.pending:
                continue
            try:
                low_watermark = self._get_partition(tp).low_watermark_if_leader()
            except KafkaError as e:
                s.pending, s.error = False, e.code
                continue
            if low_watermark >= s.required_offset:
                s.pending, s.error, s.low_watermark = False, ErrorCode.NONE, low_watermark
        if any(s.pending for s in self._status.values()):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        self._response_callback(dict(self._status))

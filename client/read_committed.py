"""What a READ_COMMITTED consumer drops from a fetch answer: Kafka's Fetcher.CompletedFetch filter (2.8).

A READ_COMMITTED Fetch answer carries the records below the last stable offset and, per partition, the
aborted transactions that overlap them, each as (producer id, first offset). Walking the answer's batches in
offset order, a transaction joins the aborted producer ids once a batch reaches its first offset (the
min-heap by first offset, Kafka's `consumeAbortedTransactionsUpTo(batch.lastOffset())`); from then on that
producer's transactional batches are skipped until its ABORT marker, which takes it out again. Control batches
themselves are never handed out (the caller skips them). Everything here is per batch: a marker's one record
is decoded only when its producer is among the aborted ones, the only case in which its type matters.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from common.record import BatchHeader, ControlRecordType, read_end_txn_marker


class AbortedTransactions:
    """One partition's aborted transactions of one fetch answer, consumed as its batches are walked in order."""

    __slots__ = ("_aborted_producer_ids", "_by_first_offset")

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        """`aborted`: (producer id, first offset) of each aborted transaction the answer names."""
        self._by_first_offset = [(first_offset, producer_id) for producer_id, first_offset in aborted]
        heapq.heapify(self._by_first_offset)
        self._aborted_producer_ids: set[int] = set()

    def skips(self, data: bytes, start: int, header: BatchHeader) -> bool:
        """Whether the batch at `start` of `data` belongs to an aborted transaction (Kafka's isBatchAborted),
        after taking in the transactions that began at or before its last offset and, for an ABORT marker,
        ending its producer's aborted transaction."""
        producer_id = header.producer_id
        if producer_id < 0:  # no producer id: neither transactional nor a marker (Kafka's hasProducerId)
            return False
        heap = self._by_first_offset
        while heap and heap[0][0] <= header.last_offset:
            self._aborted_producer_ids.add(heapq.heappop(heap)[1])
        if producer_id not in self._aborted_producer_ids:
            return False
        if header.is_control:
            marker = read_end_txn_marker(data, start, header) if header.record_count else None
            if marker is not None and marker.control_type is ControlRecordType.ABORT:
                self._aborted_producer_ids.discard(producer_id)
                return False
        return header.is_transactional

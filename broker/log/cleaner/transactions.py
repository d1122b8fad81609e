"""What the log cleaner does with transactions (Kafka's CleanedTransactionMetadata), as a rule over the batches
it reads in offset order, told beforehand which transactions were aborted (from the `.txnindex`):

- a batch of an aborted transaction is discarded (and never enters the offset map);
- an ABORT marker stays while this pass still saw batches of its transaction (they may be kept, e.g. a live
  producer's last batch), and its `.txnindex` entry is copied to the cleaned segment; with no batch of its
  transaction left, it may go;
- a COMMIT marker may go once this pass saw no batch of its transaction.
A marker that may go is still kept until `delete.retention.ms` after the cleaning that first found it could
(KIP-534's delete horizon, as tombstones), so a reader that was behind still sees the transaction end. The
cleaner never reaches an open transaction: the first unstable offset bounds what it cleans (manager.py).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from broker.log.transaction_index import AbortedTxn, TransactionIndex
from common.record import BatchHeader, ControlRecordType, EndTxnMarker

__all__ = ["CleanedTransactionMetadata"]


@dataclass(slots=True)
class _AbortedInProgress:
    txn: AbortedTxn
    saw_batches: bool = False


class CleanedTransactionMetadata:
    """The transaction state of one cleaning pass, fed every batch in offset order."""

    def __init__(self) -> None:
        self._committed_in_progress: set[int] = set()
        self._aborted_in_progress: dict[int, _AbortedInProgress] = {}
        self._aborted: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self._known: set[AbortedTxn] = set()
        # Where retained aborted transactions are indexed: the cleaned segment being written.
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, txns: list[AbortedTxn]) -> None:
        for txn in txns:
            if txn not in self._known:
                self._known.add(txn)
                heapq.heappush(self._aborted, (txn.first_offset, txn.last_offset, txn))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            txn = heapq.heappop(self._aborted)[2]
            self._aborted_in_progress.setdefault(txn.producer_id, _AbortedInProgress(txn))

    def on_batch_read(self, header: BatchHeader) -> bool:
        """A data batch; True if it belongs to an aborted transaction and may be discarded."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._aborted_in_progress.get(header.producer_id)
        if aborted is not None:
            aborted.saw_batches = True
            return True
        self._committed_in_progress.add(header.producer_id)
        return False

    def on_control_batch_read(self, header: BatchHeader, marker: EndTxnMarker | None) -> bool:
        """A control batch; True if nothing of its transaction is left, so the marker may go."""
        self._consume_aborted_up_to(header.last_offset)
        if marker is None:
            return False
        if marker.control_type is ControlRecordType.ABORT:
            aborted = self._aborted_in_progress.pop(header.producer_id, None)
            if aborted is not None and aborted.saw_batches:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(aborted.txn)
                return False
            return True
        if header.producer_id in self._committed_in_progress:
            self._committed_in_progress.discard(header.producer_id)
            return False
        return True

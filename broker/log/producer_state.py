"""Per-partition producer state of idempotent and transactional producers (Kafka's ProducerStateManager).

For every producer id that wrote to the partition the broker remembers its
epoch and the sequence/offset ranges of its last 5 batches (a producer has at
most 5 requests in flight), which is enough to

- recognise a retry of a batch already in the log and answer with the
  original offsets instead of writing it twice (a duplicate);
- refuse a batch that would leave a hole in the producer's sequence
  (OUT_OF_ORDER_SEQUENCE_NUMBER), an older epoch (INVALID_PRODUCER_EPOCH),
  or a producer the partition knows nothing about that does not start at
  sequence 0 (UNKNOWN_PRODUCER_ID), as Kafka 2.0-2.4 do.

Transactions (KIP-98): a producer's first transactional batch opens its
transaction at that batch's offset (`current_txn_first_offset`), and a marker
(a control batch, COMMIT or ABORT) closes it, returning a CompletedTxn the log
records (an aborted one in the segment's `.txnindex`). The first offset of the
oldest transaction that is open, or closed by a marker not yet below the high
watermark, is the first unstable offset; the last stable offset is that capped
by the high watermark (`last_stable_offset`). A marker from an older
coordinator epoch than the producer's last is refused
(TRANSACTION_COORDINATOR_FENCED), and a producer with an open transaction never
expires.

The state is rebuilt at start-up from the latest snapshot file and the batches
after it, and after a truncation from the latest snapshot at or below the new
log end. Snapshots (`<20-digit offset>.snapshot` in the partition directory)
hold Kafka's format, version 1, big-endian:

    version        int16    (1)
    crc            uint32   CRC-32C of everything after this field
    count          int32
    count times:
      producerId             int64
      producerEpoch          int16
      lastSequence           int32
      lastOffset             int64
      offsetDelta            int32   lastOffset - first offset of that batch
      timestamp              int64   maxTimestamp of that batch
      coordinatorEpoch       int32   of the producer's last marker (-1: none yet)
      currentTxnFirstOffset  int64   its open transaction's first offset (-1: none)

so a restarted or newly elected leader knows every open transaction.

Like Kafka's, a snapshot keeps only the last batch of each producer: after a
restart, a retry of one of the 4 batches before it fails the sequence check
instead of being recognised as a duplicate. Kafka accepts the same gap.

Not thread-safe: the owning log calls it under its own lock, as Kafka's Log does.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.log.checkpoint import atomic_write
from broker.log.files import SNAPSHOT_SUFFIX, snapshot_file_name
from broker.log.transaction_index import AbortedTxn
from common.record import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    ControlRecordType,
    EndTxnMarker,
    crc32c,
)
from proto.errors import (
    ErrorCode,
    InvalidTxnStateError,
    KafkaError,
    TransactionCoordinatorFencedError,
)
from proto.types import TopicPartition

NUM_BATCHES_TO_RETAIN = 5  # the producer's max.in.flight.requests.per.connection cap with idempotence
PRODUCER_SNAPSHOT_VERSION = 1
# The snapshot taken at a segment roll and the one before it: enough to restart
# without replaying more than a segment or two after a clean or torn shutdown.
SNAPSHOTS_TO_RETAIN = 2
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
INT32_MAX = (1 << 31) - 1

_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, count
_UINT32 = struct.Struct(">I")
_CRC_POS = 2
_CRC_START = 6  # the CRC covers the bytes from the entry count on
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_NO_COORDINATOR_EPOCH = -1
_NO_TXN_FIRST_OFFSET = -1

log = logging.getLogger(__name__)


class OutOfOrderSequenceError(KafkaError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH


class UnknownProducerIdError(KafkaError):
    code = ErrorCode.UNKNOWN_PRODUCER_ID


class ProducerBatch(NamedTuple):
    """A batch with a producer id as the producer state sees it: its header and, for a transaction marker,
    what the marker says (None for a data batch or another control record)."""

    header: BatchHeader
    marker: EndTxnMarker | None = None


class CorruptSnapshotError(KafkaError):
    """A producer snapshot that fails its checks; it is deleted and the state rebuilt from the log."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


def decrement_sequence(sequence: int, decrement: int) -> int:
    """`sequence - decrement` on the producer's sequence ring (DefaultRecordBatch.decrementSequence)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)



@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Where one of a producer's batches landed: what a duplicate's producer is told."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    """A transaction a marker closed: its producer, its first data offset and the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ActiveProducer(NamedTuple):
    """A producer as DescribeProducers (KIP-664) describes it: Kafka's DescribeProducersResponseData.ProducerState,
    -1 for what is unknown (no sequence, no coordinator epoch, no open transaction)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


def _batch_queue(batches: Iterable[BatchMetadata] = ()) -> deque[BatchMetadata]:
    return deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)


@dataclass(slots=True)
class ProducerStateEntry:
    """One producer's epoch and its last batches, oldest first."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batch_metadata: deque[BatchMetadata] = field(default_factory=_batch_queue)
    coordinator_epoch: int = _NO_COORDINATOR_EPOCH
    last_timestamp: int = NO_TIMESTAMP
    # The first offset of the producer's open transaction, -1 when none is open.
    current_txn_first_offset: int = _NO_TXN_FIRST_OFFSET

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    @property
    def has_open_transaction(self) -> bool:
        return self.current_txn_first_offset != _NO_TXN_FIRST_OFFSET

    def _update_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            # A new epoch restarts the sequence at 0: the old epoch's batches say nothing about it.
            self.batch_metadata.clear()
            self.producer_epoch = epoch

    def add_batch(self, header: BatchHeader) -> None:
        """A data batch (Kafka's appendDataBatch): the first transactional one opens a transaction."""
        self._update_epoch(header.producer_epoch)
        self.batch_metadata.append(
            BatchMetadata(header.last_sequence, header.last_offset, header.last_offset_delta, header.max_timestamp)
        )
        self.last_timestamp = header.max_timestamp
        if header.is_transactional and not self.has_open_transaction:
            self.current_txn_first_offset = header.base_offset

    def add_marker(self, header: BatchHeader, marker: EndTxnMarker) -> CompletedTxn | None:
        """A marker (Kafka's appendEndTxnMarker): closes the open transaction, if any (a marker of a
        transaction without data in this partition completes nothing)."""
        completed = None
        if self.has_open_transaction:
            completed = CompletedTxn(self.producer_id, self.current_txn_first_offset, header.base_offset,
                                     marker.control_type is ControlRecordType.ABORT)
        self._update_epoch(header.producer_epoch)
        self.current_txn_first_offset = _NO_TXN_FIRST_OFFSET
        self.coordinator_epoch = marker.coordinator_epoch
        self.last_timestamp = header.max_timestamp
        return completed

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        first_seq, last_seq = header.base_sequence, header.last_sequence
        for batch in self.batch_metadata:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def describe(self) -> ActiveProducer:
        return ActiveProducer(self.producer_id, self.producer_epoch, self.last_seq, self.last_timestamp,
                              self.coordinator_epoch, self.current_txn_first_offset)

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch, _batch_queue(self.batch_metadata), self.coordinator_epoch,
            self.last_timestamp, self.current_txn_first_offset,
        )


def _has_producer_id(header: BatchHeader) -> bool:
    return header.producer_id > NO_PRODUCER_ID


def write_snapshot(path: str | os.PathLike[str], producers: Iterable[ProducerStateEntry], sync: bool = True) -> None:
    entries = sorted(producers, key=lambda e: e.producer_id)
    body = bytearray(_SNAPSHOT_HEADER.size + _SNAPSHOT_ENTRY.size * len(entries))
    for i, e in enumerate(entries):
        _SNAPSHOT_ENTRY.pack_into(
            body, _SNAPSHOT_HEADER.size + i * _SNAPSHOT_ENTRY.size,
            e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset, e.last_offset_delta,
            e.last_timestamp, e.coordinator_epoch, e.current_txn_first_offset,
        )
    _SNAPSHOT_HEADER.pack_into(body, 0, PRODUCER_SNAPSHOT_VERSION, 0, len(entries))
    _UINT32.pack_into(body, _CRC_POS, crc32c(memoryview(body)[_CRC_START:]))
    atomic_write(path, bytes(body), sync)


def read_snapshot(path: str | os.PathLike[str]) -> list[ProducerStateEntry]:
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"snapshot {path} has {len(data)} bytes, fewer than its header")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot {path} has unknown version {version}")
    computed = crc32c(memoryview(data)[_CRC_START:])
    if computed != crc:
        raise CorruptSnapshotError(f"snapshot {path} is corrupt: stored CRC {crc:#010x}, computed {computed:#010x}")
    expected_size = _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size
    if count < 0 or len(data) != expected_size:
        raise CorruptSnapshotError(f"snapshot {path} declares {count} entries but has {len(data)} bytes")
    entries = []
    for pos in range(_SNAPSHOT_HEADER.size, len(data), _SNAPSHOT_ENTRY.size):
        pid, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch, txn_first_offset = (
            _SNAPSHOT_ENTRY.unpack_from(data, pos)
        )
        # lastOffset is -1 for a producer whose only record is a transaction marker.
        batches = [BatchMetadata(last_seq, last_offset, offset_delta, timestamp)] if last_offset >= 0 else []
        entries.append(ProducerStateEntry(pid, epoch, _batch_queue(batches), coordinator_epoch, timestamp,
                                          max(txn_first_offset, _NO_TXN_FIRST_OFFSET)))
    return entries


class ProducerStateManager:
    """Producer id -> ProducerStateEntry for one partition, with its snapshot files."""

    def __init__(
        self,
        topic_partition: TopicPartition,
        log_dir: str | os.PathLike[str],
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.topic_partition = topic_partition
        self.log_dir = os.fspath(log_dir)  # reassigned when the log directory is renamed
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        # Every batch below _map_end_offset is reflected in _producers.
        self._map_end_offset = 0
        self._last_snap_offset = 0
        # Open transactions, first offset -> producer id (Kafka's ongoingTxns).
        self._ongoing_txns: dict[int, int] = {}
        # Transactions a marker closed at or past the high watermark, by first offset (Kafka's unreplicatedTxns):
        # until the marker is replicated, a new leader may not have it, so they stay unstable.
        self._unreplicated_txns: dict[int, CompletedTxn] = {}

    @property
    def map_end_offset(self) -> int:
        return self._map_end_offset

    @property
    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return dict(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    # ------------------------------------------------------------------ appends

    def validate_append(self, headers: Iterable[BatchHeader]) -> BatchMetadata | None:
        """Check a client's batches before the leader writes them; change nothing.

        Returns the metadata of the batch already in the log if one of them is a
        retry of it (same epoch, same first and last sequence among the last 5):
        the append must then be skipped and the original offsets returned. Raises
        OutOfOrderSequenceError, InvalidProducerEpochError or UnknownProducerIdError
        for a batch that must be refused. Batches of one producer are checked as
        a chain, each against the ones before it in the same request. The header
        offsets do not matter here: they need not be assigned yet.
        """
        pending: dict[int, ProducerStateEntry] = {}
        for header in headers:
            if not _has_producer_id(header):
                continue
            current = self._producers.get(header.producer_id)
            if current is not None:
                duplicate = current.find_duplicate_batch(header)
                if duplicate is not None:
                    return duplicate
            entry = pending.get(header.producer_id)
            if entry is None:
                entry = current.copy() if current is not None else ProducerStateEntry(header.producer_id)
                pending[header.producer_id] = entry
            self._check(entry, header)
            if entry.has_open_transaction and not header.is_transactional:
                raise InvalidTxnStateError(
                    f"Expected transactional write from producer {header.producer_id} in partition"
                    f" {self.topic_partition}: its transaction from offset {entry.current_txn_first_offset} is open"
                )
            entry.add_batch(header)
        return None

    def validate_marker(self, header: BatchHeader, marker: EndTxnMarker) -> None:
        """Check a transaction marker the coordinator writes (Kafka's appendEndTxnMarker with origin
        Coordinator): not from an older producer epoch, nor from an older coordinator epoch."""
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return
        where = f"producerId {header.producer_id} in partition {self.topic_partition}"
        if header.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"Epoch of {where} is {header.producer_epoch}, which is smaller than the last seen epoch"
                f" {entry.producer_epoch}"
            )
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for {where}: {marker.coordinator_epoch} (zombie),"
                f" {entry.coordinator_epoch} (current)"
            )

    def validate_coordinator_batch(self, header: BatchHeader) -> None:
        """Check a data batch a coordinator writes for a producer (the group coordinator's TxnOffsetCommit):
        its epoch only, as Kafka's ProducerAppendInfo checks sequences for the client's origin alone."""
        entry = self._producers.get(header.producer_id)
        if entry is not None and header.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"Producer epoch {header.producer_epoch} of producerId {header.producer_id} in partition"
                f" {self.topic_partition} is older than the last seen epoch {entry.producer_epoch}"
            )

    def _check(self, entry: ProducerStateEntry, header: BatchHeader) -> None:
        epoch, first_seq = header.producer_epoch, header.base_sequence
        where = f"producerId {header.producer_id} in partition {self.topic_partition}"
        if epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"Producer epoch {epoch} of {where} is older than the last seen epoch {entry.producer_epoch}"
            )
        if epoch != entry.producer_epoch:
            if first_seq == 0:
                return
            if entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch {epoch} of {where}: {first_seq}, expected 0"
                )
            raise UnknownProducerIdError(
                f"Found no record of {where}; its last records may have been removed by retention"
                f" (sequence {first_seq}, epoch {epoch})"
            )
        last_seq = entry.last_seq  # NO_SEQUENCE (-1) when no batch is known: then 0 is next
        if not _in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for {where}: {first_seq} (incoming), {last_seq} (current end)"
            )

    def update(self, header: BatchHeader, marker: EndTxnMarker | None = None) -> AbortedTxn | None:
        """Apply one batch as written to the log, with its final offsets and timestamp.

        Called without checks by the leader after its append succeeded, by a
        follower after appending fetched batches, and by `replay`. Batches
        without a producer id only move the map end offset. A marker completes
        its producer's transaction; an aborted one is returned as the entry its
        segment's `.txnindex` needs (Kafka's Log.append then updateTxnIndex).
        """
        if header.last_offset < self._map_end_offset:
            # Catches headers whose offsets were never assigned, and double application.
            raise ValueError(
                f"batch {header.base_offset}..{header.last_offset} of {self.topic_partition} is below"
                f" the producer state end offset {self._map_end_offset}"
            )
        if _has_producer_id(header):
            entry = self._producers.get(header.producer_id)
            if entry is None:
                entry = self._producers[header.producer_id] = ProducerStateEntry(header.producer_id)
            if header.producer_epoch < entry.producer_epoch:
                # Kafka's replication path only warns: the leader already decided.
                log.warning(
                    "%s: producer %d appended with epoch %d, older than %d",
                    self.topic_partition, header.producer_id, header.producer_epoch, entry.producer_epoch,
                )
            aborted = self._apply(entry, header, marker)
        else:
            aborted = None
        self._map_end_offset = header.next_offset
        return aborted

    def _apply(self, entry: ProducerStateEntry, header: BatchHeader, marker: EndTxnMarker | None
               ) -> AbortedTxn | None:
        if not header.is_control:
            opens = header.is_transactional and not entry.has_open_transaction
            entry.add_batch(header)
            if opens:
                self._ongoing_txns[header.base_offset] = header.producer_id
            return None
        if marker is None:
            return None
        if marker.coordinator_epoch < entry.coordinator_epoch:
            # Kafka's replication path only logs it: the leader already decided.
            log.info("%s: marker of producer %d at offset %d has coordinator epoch %d, older than %d",
                     self.topic_partition, header.producer_id, header.base_offset, marker.coordinator_epoch,
                     entry.coordinator_epoch)
        completed = entry.add_marker(header, marker)
        if completed is None:
            return None
        last_stable_offset = self._last_stable_offset_after(completed)
        self._ongoing_txns.pop(completed.first_offset, None)
        self._unreplicated_txns[completed.first_offset] = completed
        if not completed.is_aborted:
            return None
        return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, last_stable_offset)

    def _last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO once `completed` is closed, as its `.txnindex` entry records it (Kafka's
        lastStableOffset(completedTxn)): the first offset of another producer's open transaction, else the
        offset after the marker."""
        others = [first for first, pid in self._ongoing_txns.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def replay(self, batches: Iterable[ProducerBatch]) -> list[AbortedTxn]:
        """Rebuild state from the log's batches from `map_end_offset` on (after `truncate_and_reload`);
        returns the aborted transactions the replayed markers closed.

        Batches wholly below the map end offset are already reflected and skipped,
        so the caller may start at the segment that holds it.
        """
        aborted = []
        for header, marker in batches:
            if header.last_offset >= self._map_end_offset:
                found = self.update(header, marker)
                if found is not None:
                    aborted.append(found)
        return aborted

    # ------------------------------------------------------------------ transactions

    @property
    def ongoing_transactions(self) -> dict[int, int]:
        """Every open transaction: first offset -> producer id."""
        return dict(self._ongoing_txns)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker is now below the high watermark are stable (Kafka's onHighWatermarkUpdated)."""
        self._remove_unreplicated_txns(high_watermark)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is open, or closed by a marker not yet known to be
        below the high watermark (Kafka's firstUnstableOffset); None if there is none."""
        firsts = [*self._ongoing_txns, *self._unreplicated_txns]
        return min(firsts) if firsts else None

    def last_stable_offset(self, high_watermark: int) -> int:
        """Kafka's Log.lastStableOffset: the first unstable offset, capped by the high watermark."""
        self.on_high_watermark_updated(high_watermark)
        first_unstable = self.first_unstable_offset()
        return high_watermark if first_unstable is None else min(first_unstable, high_watermark)

    def _remove_unreplicated_txns(self, offset: int) -> None:
        # Asked on every read of the partition (its last stable offset): with nothing unreplicated, as on almost
        # every partition, no new dict each time.
        if self._unreplicated_txns:
            self._unreplicated_txns = {
                first: txn for first, txn in self._unreplicated_txns.items() if txn.last_offset >= offset
            }

    # ------------------------------------------------------------------ truncation and expiry

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int,
                            max_snapshot_offset: int | None = None) -> int:
        """Make the state match a log spanning [log_start_offset, log_end_offset).

        Used at start-up and after the log end moved back. Snapshots outside
        the range are deleted; unless the state already ends at `log_end_offset`,
        it is reloaded from the latest remaining snapshot (or emptied), or from
        the latest at or below `max_snapshot_offset` when given (recovery replays
        from there). Returns `map_end_offset`: the caller must `replay` the
        batches from there to the log end.
        """
        for offset, path in self._snapshots():
            # Kafka also drops a snapshot at exactly the log start: it holds only
            # producers whose records are all gone.
            if offset > log_end_offset or offset <= log_start_offset:
                _delete(path)
        if log_end_offset != self._map_end_offset or max_snapshot_offset is not None:
            self._producers.clear()
            self._ongoing_txns.clear()
            # The log end is at most the high watermark here (Kafka's assumption): no marker is unreplicated.
            self._unreplicated_txns.clear()
            self._load_from_snapshot(log_start_offset, now_ms, max_snapshot_offset)
        else:
            self.truncate_head(log_start_offset)
        return self._map_end_offset

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int, max_offset: int | None) -> None:
        for offset, path in reversed(self._snapshots()):
            if max_offset is not None and offset > max_offset:
                continue
            try:
                entries = read_snapshot(path)
            except CorruptSnapshotError as exc:
                log.warning("%s: deleting producer snapshot %s: %s", self.topic_partition, path, exc)
                _delete(path)
                continue
            for entry in entries:
                if self._is_retained(entry, log_start_offset) and not self._is_expired(entry, now_ms):
                    self._producers[entry.producer_id] = entry
                    if entry.has_open_transaction:
                        self._ongoing_txns[entry.current_txn_first_offset] = entry.producer_id
            self._last_snap_offset = self._map_end_offset = offset
            return
        self._last_snap_offset = self._map_end_offset = log_start_offset

    def truncate_head(self, log_start_offset: int) -> None:
        """The log start moved up (retention, DeleteRecords): forget producers whose records are all gone."""
        self._producers = {
            pid: e for pid, e in self._producers.items() if self._is_retained(e, log_start_offset)
        }
        self._remove_unreplicated_txns(log_start_offset)
        self._map_end_offset = max(self._map_end_offset, log_start_offset)
        self.delete_snapshots_before(log_start_offset)
        latest = self.latest_snapshot_offset
        self._last_snap_offset = log_start_offset if latest is None else latest

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The log was emptied and restarts at `offset`: drop all state and all snapshots."""
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()
        for _offset, path in self._snapshots():
            _delete(path)
        self._last_snap_offset = 0
        self._map_end_offset = offset

    @staticmethod
    def _is_retained(entry: ProducerStateEntry, log_start_offset: int) -> bool:
        # A producer whose open transaction is still tracked stays, so the transaction can complete.
        return entry.last_data_offset >= log_start_offset or entry.has_open_transaction

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        """Idle for producer.id.expiration.ms, and no transaction open (Kafka's isProducerExpired)."""
        return not entry.has_open_transaction and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms

    def remove_expired_producers(self, now_ms: int) -> None:
        """Forget producers idle for producer.id.expiration.ms (by their last batch's max timestamp, as Kafka)."""
        self._producers = {pid: e for pid, e in self._producers.items() if not self._is_expired(e, now_ms)}

    # ------------------------------------------------------------------ snapshots

    def take_snapshot(self, offset: int, sync: bool = True) -> str | None:
        """Persist the state as of `offset` (the log end at a segment roll or a clean close).

        Every batch below `offset` must already have been applied. Nothing is
        written if a snapshot at that offset exists. Only the newest
        SNAPSHOTS_TO_RETAIN snapshots are kept. Returns the new file's path.
        Unsynced (a roll, Kafka 3's takeSnapshot(sync = false)), the caller fsyncs it later: a
        snapshot torn by a crash is deleted at load and an older one (or the log) used instead.
        """
        if offset < self._map_end_offset:
            raise ValueError(
                f"snapshot offset {offset} of {self.topic_partition} is below the state's end {self._map_end_offset}"
            )
        self._map_end_offset = offset
        if offset <= self._last_snap_offset:
            return None
        path = os.path.join(self.log_dir, snapshot_file_name(offset))
        log.info("%s: writing producer snapshot at offset %d", self.topic_partition, offset)
        write_snapshot(path, self._producers.values(), sync)
        self._last_snap_offset = offset
        for _offset, old in self._snapshots()[:-SNAPSHOTS_TO_RETAIN]:
            _delete(old)
        return path

    @property
    def latest_snapshot_offset(self) -> int | None:
        snapshots = self._snapshots()
        return snapshots[-1][0] if snapshots else None

    def delete_snapshots_before(self, offset: int) -> None:
        for snap_offset, path in self._snapshots():
            if snap_offset < offset:
                _delete(path)

    def _snapshots(self) -> list[tuple[int, str]]:
        """(offset, path) of every snapshot file in the log directory, oldest first."""
        try:
            names = os.listdir(self.log_dir)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            stem = name.removesuffix(SNAPSHOT_SUFFIX)
            if stem != name and stem.isascii() and stem.isdigit():
                found.append((int(stem), os.path.join(self.log_dir, name)))
        return sorted(found)


def _delete(path: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(path)

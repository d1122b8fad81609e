"""The audit's checks: pure functions from one partition's rows to findings, each with its evidence.

Input rows are those of the `minibroker-log` data source (spark_jobs/log_source.py):
`Batch` per batch row, `Replica` per partition directory with its batches.
Nothing here touches files or Spark, so every check is tested on rows built
in memory (tests/unit/spark_jobs). Wording follows Kafka's DumpLogSegments
where it has a line for the problem ("invalid bytes at the end", "Non-consecutive
offsets", "Mismatches in", "Found timestamp mismatch").

A replica is named by its log dir: a broker with several log dirs holds a
partition in one of them, and a log dir without meta.properties still counts.

Compacted partitions (spark_jobs/log_source.py says which) differ in two
checks: their offsets may have gaps (they must still increase), and replicas,
each cleaned on its own schedule, must agree on the latest value of every key
below the cleaned point (the highest cleaner checkpoint of the replicas) and
byte for byte (offsets, epoch, CRC) above it, where no cleaner has been yet.

Transactions (KIP-98): each ABORT marker has its `.txnindex` entry in its segment (producer id, the
transaction's first offset, the marker's offset) and each entry its marker; no transaction is left without a
marker by its producer moving on (another epoch, a non-transactional batch); transactions still open at the end
of the log are not findings but reported as open (`transactions_of`). Markers are batches, so the replicas'
byte agreement covers them; their aborted ranges (`.txnindex` entries) are compared too, and aborted records
never count as a key's latest value.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, NamedTuple

from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC_NAME
from broker.log.files import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_FILE_SUFFIX,
    REPLICATION_OFFSET_CHECKPOINT,
    TXN_INDEX_FILE_SUFFIX,
)

# Every check's name, as it appears in findings (the report's `check` column).
INVALID_BYTES = "invalid_bytes"
INVALID_BATCH = "invalid_batch"
UNREADABLE_FILE = "unreadable_file"
NON_CONSECUTIVE_OFFSETS = "non_consecutive_offsets"
INDEX_MISMATCH = "index_mismatch"
INDEX_NOT_MONOTONIC = "index_not_monotonic"
TIME_INDEX_MISMATCH = "time_index_mismatch"
TIME_INDEX_OUT_OF_ORDER = "time_index_out_of_order"
LEADER_EPOCH_DECREASE = "leader_epoch_decrease"
LEADER_EPOCH_CHECKPOINT_MISMATCH = "leader_epoch_checkpoint_mismatch"
HIGH_WATERMARK_ABOVE_LOG_END = "high_watermark_above_log_end"
REPLICA_DIVERGENCE = "replica_divergence"
DUPLICATE_PRODUCER_BATCH = "duplicate_producer_batch"
SEGMENT_REPLACED = "segment_replaced"
TXN_INDEX_MISMATCH = "txn_index_mismatch"
TXN_WITHOUT_MARKER = "txn_without_marker"
ABORTED_TXN_DIVERGENCE = "aborted_txn_divergence"
ABORT = "ABORT"

# What the data source (spark_jobs/files.py's file_identity) says of a segment file's identity besides its
# device and inode: replaced while it was read, or no file under its name.
CHANGED_WHILE_READ = "changed while read"
MISSING = "missing"


class Finding(NamedTuple):
    """One anomaly and where it is: the broker, the file, the byte position and the offsets concerned."""

    check: str
    topic: str | None
    partition: int | None
    broker: int | None
    log_dir: str | None
    file: str | None
    position: int | None
    base_offset: int | None
    last_offset: int | None
    detail: str


class Batch(NamedTuple):
    """A `batches` row. With `problem` set it is where a segment stops being batches, not a batch."""

    broker: int | None
    log_dir: str
    topic: str
    partition: int
    segment: str
    position: int
    base_offset: int | None
    last_offset: int | None
    record_count: int | None
    size: int | None
    magic: int | None
    crc: int | None
    computed_crc: int | None
    partition_leader_epoch: int | None
    codec: str | None
    timestamp_type: str | None
    base_timestamp: int | None
    max_timestamp: int | None
    producer_id: int | None
    producer_epoch: int | None
    base_sequence: int | None
    is_transactional: bool | None
    is_control: bool | None
    error: str | None
    problem: str | None
    # Compacted partitions only: (offset, key, CRC32C of the value or None for a tombstone) per record.
    records: list[dict[str, Any]] | None = None
    # The generation of the segment file read (spark_jobs/files.py's file_identity), None when unknown.
    segment_id: str | None = None
    # A marker's type (ABORT, COMMIT), None for any other batch.
    control_type: str | None = None

    @property
    def whole(self) -> bool:
        """A complete batch (its CRC may still be wrong): what offsets, indexes and agreement look at."""
        return self.problem is None


@dataclass
class Replica:
    """A `replicas` row and its partition's batches on that broker, in log order."""

    broker: int | None
    log_dir: str
    topic: str | None
    partition: int | None
    high_watermark: int | None = None
    log_start_offset: int | None = None
    compacted: bool = False
    cleaner_offset: int | None = None
    leader_epochs: list[dict[str, int]] | None = None
    segments: list[dict[str, Any]] = field(default_factory=list)
    offset_index: list[dict[str, Any]] = field(default_factory=list)
    time_index: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, str]] = field(default_factory=list)
    # `.txnindex` entries: file, slot, producer_id, first_offset, last_offset, last_stable_offset.
    txn_index: list[dict[str, Any]] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)

    def finding(self, check: str, detail: str, file: str | None = None, position: int | None = None,
                base_offset: int | None = None, last_offset: int | None = None) -> Finding:
        return Finding(check, self.topic, self.partition, self.broker, self.log_dir, file, position, base_offset,
                       last_offset, detail)

    def at(self, check: str, batch: Batch, detail: str) -> Finding:
        return self.finding(check, detail, batch.segment, batch.position, batch.base_offset, batch.last_offset)

    @property
    def whole_batches(self) -> list[Batch]:
        return [b for b in self.batches if b.whole]

    @property
    def log_start(self) -> int:
        """The log start offset: the checkpoint's, or the first segment's base if higher (retention ran since)."""
        first_segment = min((s["base_offset"] for s in self.segments), default=0)
        return max(self.log_start_offset or 0, first_segment)

    @property
    def log_end(self) -> int:
        """The offset after the last whole batch (the LEO); an empty log ends at its last segment's base."""
        whole = self.whole_batches
        if whole:
            return max(b.last_offset or 0 for b in whole) + 1
        return max((s["base_offset"] for s in self.segments), default=self.log_start)


def replicas_of(batch_rows: Iterable[Mapping[str, Any]], replica_rows: Iterable[Mapping[str, Any]]) -> list[Replica]:
    """Join one partition's rows into replicas, batches in log order (segment base offset, then position)."""
    replicas = {row["log_dir"]: Replica(**row) for row in replica_rows}
    for row in batch_rows:
        batch = Batch(**row)
        replica = replicas.get(batch.log_dir)
        if replica is None:  # its directory vanished between the two reads: keep the batches anyway
            replica = replicas[batch.log_dir] = Replica(batch.broker, batch.log_dir, batch.topic, batch.partition)
        replica.batches.append(batch)
    for replica in replicas.values():
        replica.batches.sort(key=lambda b: (b.segment, b.position))
    return sorted(replicas.values(), key=lambda r: (r.broker if r.broker is not None else -1, r.log_dir))


# --------------------------------------------------------------------------- one replica


def file_problems(replica: Replica) -> Iterator[Finding]:
    """What the data source found wrong with the files themselves (unknown, unreadable, corrupt checkpoints)."""
    for problem in replica.problems:
        yield replica.finding(problem["check"], problem["detail"], problem["file"])


def batch_integrity(replica: Replica) -> Iterator[Finding]:
    """Every batch whole and valid (structure, CRC: common/record.py's validate_batch), every file batches."""
    sizes = {s["file"]: s["size"] for s in replica.segments}
    for batch in replica.batches:
        if batch.problem is not None and batch.base_offset is None:
            yield replica.finding(UNREADABLE_FILE, batch.problem, batch.segment, batch.position)
        elif batch.problem is not None:
            size = sizes.get(batch.segment)
            invalid = "" if size is None else f"{size - batch.position} "
            yield replica.finding(INVALID_BYTES, f"Found {invalid}invalid bytes at the end of {batch.segment}:"
                                  f" {batch.problem}", batch.segment, batch.position)
        elif batch.error is not None:
            yield replica.at(INVALID_BATCH, batch, f"{batch.error} (isvalid: false)")


def consecutive_offsets(replica: Replica) -> Iterator[Finding]:
    """Each batch starts right after the previous one, across segments; in a compacted log, after it."""
    whole = replica.whole_batches
    for previous, batch in pairwise(whole):
        assert previous.last_offset is not None and batch.base_offset is not None
        if batch.base_offset <= previous.last_offset or (batch.base_offset != previous.last_offset + 1
                                                          and not replica.compacted):
            yield replica.at(NON_CONSECUTIVE_OFFSETS, batch, f"Non-consecutive offsets in {batch.segment}:"
                             f" {previous.last_offset} is followed by {batch.base_offset}")


def _by_segment(batches: Sequence[Batch]) -> dict[str, list[Batch]]:
    segments: dict[str, list[Batch]] = {}
    for batch in batches:
        segments.setdefault(batch.segment, []).append(batch)
    return segments


def _log_file(index_file: str) -> str:
    return index_file.rsplit(".", 1)[0] + LOG_FILE_SUFFIX


def _replaced_index_files(replica: Replica) -> dict[str, str]:
    """Index files read beside another generation of their segment than its batches were read from (a log
    cleaner swap between the two reads of a live log dir), each with the segment's name: such an index is
    not compared with those batches, whose mismatch would be the audit's, not the broker's.

    An index's `log_id` is its `.log`'s identity while it was read; a segment whose listing held bytes but
    gave no batch row was read as another (emptier) file by the batches' task."""
    read_from: dict[str, set[str]] = {}
    for batch in replica.batches:
        if batch.segment_id is not None:
            read_from.setdefault(batch.segment, set()).add(batch.segment_id)
    listed = {s["file"]: s for s in replica.segments}
    replaced = {}
    for entry in (*replica.offset_index, *replica.time_index):
        log_id, log_file = entry.get("log_id"), _log_file(entry["file"])
        if log_id is None:
            continue  # not a local file: no identity to compare
        listing = listed.get(log_file, {})
        batches_from = read_from.get(log_file, set())
        if (log_id in (CHANGED_WHILE_READ, MISSING) or listing.get("id", log_id) != log_id
                or batches_from - {log_id} or (not batches_from and listing.get("size", 0) > 0)):
            replaced[entry["file"]] = log_file
    return replaced


def segment_replaced(replica: Replica) -> Iterator[Finding]:
    """Each index the audit could not check because its segment was swapped while the log dir was read."""
    for file, log_file in sorted(_replaced_index_files(replica).items()):
        yield replica.finding(SEGMENT_REPLACED, f"{log_file} was replaced (a log cleaner swap) between the reads of"
                              f" its batches and of {file}: not checked (audit a stopped cluster or a snapshot)",
                              file)


def offset_index(replica: Replica) -> Iterator[Finding]:
    """Every `.index` entry names a batch's start position and that batch's last offset; entries increase."""
    segments = _by_segment(replica.whole_batches)
    logs = {s["file"] for s in replica.segments}
    replaced = _replaced_index_files(replica)
    previous: dict[str, dict[str, Any]] = {}
    for entry in sorted(replica.offset_index, key=lambda e: (e["file"], e["slot"])):
        if entry["file"] in replaced:
            continue
        file, offset, position = entry["file"], entry["offset"], entry["position"]
        before = previous.get(file)
        previous[file] = entry
        if before is not None and (offset <= before["offset"] or position <= before["position"]):
            yield replica.finding(INDEX_NOT_MONOTONIC, f"Corrupt index found, index file ({file}) entry"
                                  f" {entry['slot']} (offset {offset}, position {position}) does not follow"
                                  f" (offset {before['offset']}, position {before['position']})",
                                  file, position, offset, offset)
            continue
        log_file = _log_file(file)
        if log_file not in logs:
            yield replica.finding(INDEX_MISMATCH, f"Mismatches in :{file}: no log file {log_file}", file, position,
                                  offset, offset)
            continue
        at = next((b for b in segments.get(log_file, ()) if b.position == position), None)
        if at is None or at.last_offset != offset:
            found = f"no batch starts at position {position}" if at is None else at.last_offset
            yield replica.finding(INDEX_MISMATCH, f"Mismatches in :{file}  Index offset: {offset}, log offset: {found}",
                                  file, position, offset, offset)


def time_index(replica: Replica) -> Iterator[Finding]:
    """Each `.timeindex` entry is the segment's largest timestamp so far and the batch that first reached it."""
    segments = _by_segment(replica.whole_batches)
    replaced = _replaced_index_files(replica)
    previous: dict[str, dict[str, Any]] = {}
    for entry in sorted(replica.time_index, key=lambda e: (e["file"], e["slot"])):
        if entry["file"] in replaced:
            continue
        file, timestamp, offset = entry["file"], entry["timestamp"], entry["offset"]
        before = previous.get(file)
        previous[file] = entry
        if before is not None and (timestamp <= before["timestamp"] or offset < before["offset"]):
            yield replica.finding(TIME_INDEX_OUT_OF_ORDER, f"Found out of order timestamp in :{file}  Index"
                                  f" timestamp: {timestamp}, offset: {offset}, Previously indexed timestamp:"
                                  f" {before['timestamp']}, offset: {before['offset']}", file, None, offset, offset)
            continue
        batches = segments.get(_log_file(file), [])
        seen = max((b.max_timestamp or -1 for b in batches if (b.last_offset or 0) <= offset), default=-1)
        target = next((b for b in batches if b.last_offset == offset), None)
        earlier = max((b.max_timestamp or -1 for b in batches if (b.last_offset or 0) < offset), default=-1)
        if target is None or target.max_timestamp != timestamp or earlier >= timestamp:
            where = "" if target is not None else f", no batch ends at offset {offset}"
            yield replica.finding(TIME_INDEX_MISMATCH, f"Found timestamp mismatch in :{file}  Index timestamp:"
                                  f" {timestamp}, log timestamp: {seen}{where}", file,
                                  None if target is None else target.position, offset, offset)


def leader_epochs(replica: Replica) -> Iterator[Finding]:
    """Epochs never decrease along offsets, and `leader-epoch-checkpoint` names each batch's epoch."""
    whole = replica.whole_batches
    for previous, batch in pairwise(whole):
        if (batch.partition_leader_epoch or 0) < (previous.partition_leader_epoch or 0):
            yield replica.at(LEADER_EPOCH_DECREASE, batch, f"partitionLeaderEpoch {batch.partition_leader_epoch} at"
                             f" offset {batch.base_offset} after {previous.partition_leader_epoch} at offset"
                             f" {previous.base_offset}")
    entries = replica.leader_epochs
    if entries is None:
        return
    for before, entry in pairwise(entries):
        if entry["epoch"] <= before["epoch"] or entry["start_offset"] <= before["start_offset"]:
            yield replica.finding(LEADER_EPOCH_CHECKPOINT_MISMATCH, f"{LEADER_EPOCH_CHECKPOINT} entries do not"
                                  f" increase: {before['epoch']} {before['start_offset']} then {entry['epoch']}"
                                  f" {entry['start_offset']}", LEADER_EPOCH_CHECKPOINT)
            return
    starts = [e["start_offset"] for e in entries]
    reported: tuple[int | None, int | None] | None = None
    for batch in whole:
        assert batch.last_offset is not None
        if entries and batch.last_offset < starts[0]:
            continue  # below the log start the checkpoint was truncated to
        slot = bisect.bisect_right(starts, batch.last_offset) - 1
        expected = entries[slot]["epoch"] if slot >= 0 else None
        if expected != batch.partition_leader_epoch:
            # One finding per run of batches with the same disagreement, not one per batch.
            if reported != (expected, batch.partition_leader_epoch):
                said = "no epoch" if expected is None else f"epoch {expected}"
                yield replica.at(LEADER_EPOCH_CHECKPOINT_MISMATCH, batch, f"batch at offset {batch.base_offset} has"
                                 f" partitionLeaderEpoch {batch.partition_leader_epoch} but {LEADER_EPOCH_CHECKPOINT}"
                                 f" says {said}")
            reported = (expected, batch.partition_leader_epoch)
        else:
            reported = None


def high_watermark(replica: Replica) -> Iterator[Finding]:
    """The checkpointed high watermark is not above the log end offset."""
    hw = replica.high_watermark
    if hw is not None and hw > replica.log_end:
        yield replica.finding(HIGH_WATERMARK_ABOVE_LOG_END, f"high watermark {hw} in {REPLICATION_OFFSET_CHECKPOINT}"
                              f" is above the log end offset {replica.log_end}", REPLICATION_OFFSET_CHECKPOINT,
                              None, replica.log_end, hw)


def producer_duplicates(replica: Replica) -> Iterator[Finding]:
    """No idempotent batch (producer id, epoch, base sequence) written at two offsets. The group coordinator's
    transactional offset commits in __consumer_offsets are not sequenced: each carries base sequence 0, as Kafka's
    GroupMetadataManager writes them, and the log checks them by epoch alone."""
    first: dict[tuple[int, int, int], Batch] = {}
    unsequenced = replica.topic == GROUP_METADATA_TOPIC_NAME
    for batch in replica.whole_batches:
        if batch.producer_id is None or batch.producer_id < 0 or batch.base_sequence is None \
                or batch.base_sequence < 0 or (unsequenced and batch.is_transactional):
            continue
        key = (batch.producer_id, batch.producer_epoch or 0, batch.base_sequence)
        earlier = first.setdefault(key, batch)
        if earlier is not batch:
            yield replica.at(DUPLICATE_PRODUCER_BATCH, batch, f"producerId {key[0]} producerEpoch {key[1]}"
                             f" baseSequence {key[2]} at offsets {batch.base_offset}-{batch.last_offset} was already"
                             f" written at offsets {earlier.base_offset}-{earlier.last_offset}"
                             f" ({earlier.segment} position {earlier.position})")


class Abort(NamedTuple):
    """An ABORT marker and the first offset of its transaction as the log shows it (None: no batch of it is
    there), `exact` when the log holds the producer's history that far back, so that first offset is the one."""

    marker: Batch
    first_offset: int | None
    exact: bool


@dataclass
class Transactions:
    """A replica's transactions, walked in offset order (Kafka's ProducerStateManager, over the rows)."""

    aborts: list[Abort] = field(default_factory=list)
    # Producer id -> first offset of its transaction open at the end of the log.
    open: dict[int, int] = field(default_factory=dict)
    # (first batch of a transaction, the producer's batch that moved on without a marker).
    unfinished: list[tuple[Batch, Batch]] = field(default_factory=list)
    # (segment, position) of every batch of an aborted transaction.
    aborted_batches: set[tuple[str, int]] = field(default_factory=set)


def transactions_of(replica: Replica) -> Transactions:
    """Which transactions a replica's log closes, aborts, leaves open or leaves without a marker.

    A transaction opens with its producer's first transactional batch and closes with its marker. Its first
    offset is exact when nothing of the producer's history can be missing: a log from offset 0 that no cleaner
    touched, or after a marker of that producer in this log."""
    found = Transactions()
    whole_log = not replica.compacted and replica.log_start == 0
    opened: dict[int, list[Batch]] = {}
    closed_before: set[int] = set()
    for batch in replica.whole_batches:
        producer_id = batch.producer_id
        if producer_id is None or producer_id < 0 or batch.error is not None:
            continue
        if batch.is_control:
            closed = opened.pop(producer_id, [])
            if batch.control_type == ABORT:
                exact = not replica.compacted and (whole_log or producer_id in closed_before)
                found.aborts.append(Abort(batch, closed[0].base_offset if closed else None, exact))
                found.aborted_batches.update((b.segment, b.position) for b in closed)
            closed_before.add(producer_id)
            continue
        txn = opened.get(producer_id)
        if txn is not None and (not batch.is_transactional or batch.producer_epoch != txn[0].producer_epoch):
            found.unfinished.append((txn[0], batch))
            del opened[producer_id]
        if batch.is_transactional:
            opened.setdefault(producer_id, []).append(batch)
    found.open = {producer_id: txn[0].base_offset or 0 for producer_id, txn in opened.items()}
    return found


def _txn_index_file(segment: str) -> str:
    return segment.rsplit(".", 1)[0] + TXN_INDEX_FILE_SUFFIX


def txn_index(replica: Replica) -> Iterator[Finding]:
    """Each ABORT marker has its entry in its segment's `.txnindex` (producer id, the transaction's first offset,
    the marker's offset), and each entry its ABORT marker. A transaction whose batches are not in the log
    (below its start, or removed by the cleaner) may have an entry or not, but none starting after its marker."""
    unmatched = {(e["file"], e["slot"]): e for e in replica.txn_index}
    by_marker = {(e["file"], e["producer_id"], e["last_offset"]): e for e in reversed(replica.txn_index)}
    for marker, first, exact in transactions_of(replica).aborts:
        file = _txn_index_file(marker.segment)
        entry = by_marker.get((file, marker.producer_id, marker.base_offset))
        what = f"ABORT marker of producerId {marker.producer_id} at offset {marker.base_offset}"
        if entry is None:
            if first is not None:
                yield replica.at(TXN_INDEX_MISMATCH, marker, f"{what} has no entry in {file} (its transaction"
                                 f" starts at offset {first})")
            continue
        unmatched.pop((entry["file"], entry["slot"]), None)
        limit = (marker.base_offset or 0) if first is None else first
        if (exact and first is not None and entry["first_offset"] != first) or entry["first_offset"] > limit:
            in_log = "has no batch of it" if first is None else f"at {first}"
            yield replica.at(TXN_INDEX_MISMATCH, marker, f"{what}: {file} entry {entry['slot']} says its"
                             f" transaction starts at offset {entry['first_offset']}, the log {in_log}")
    for entry in unmatched.values():
        yield replica.finding(TXN_INDEX_MISMATCH, f"{entry['file']} entry {entry['slot']} (producerId"
                              f" {entry['producer_id']}, firstOffset {entry['first_offset']}, lastOffset"
                              f" {entry['last_offset']}) names no ABORT marker of that producer in its segment",
                              entry["file"], None, entry["first_offset"], entry["last_offset"])


def txn_markers(replica: Replica) -> Iterator[Finding]:
    """No transaction is left without a marker: its producer moves on (another epoch, a non-transactional batch)
    only after one. Transactions still open at the end of the log are not findings (transactions_of)."""
    for first, moved_on in transactions_of(replica).unfinished:
        yield replica.at(TXN_WITHOUT_MARKER, moved_on, f"producerId {first.producer_id}'s transaction from offset"
                         f" {first.base_offset} (producerEpoch {first.producer_epoch}) has no marker before its"
                         f" {'transactional' if moved_on.is_transactional else 'non-transactional'} batch at"
                         f" offset {moved_on.base_offset} (producerEpoch {moved_on.producer_epoch})")


REPLICA_CHECKS = (file_problems, batch_integrity, consecutive_offsets, segment_replaced, offset_index, time_index,
                  leader_epochs, high_watermark, producer_duplicates, txn_index, txn_markers)


# --------------------------------------------------------------------------- across replicas


def _identity(batch: Batch) -> tuple[int | None, int | None, int | None, int | None]:
    return batch.base_offset, batch.last_offset, batch.partition_leader_epoch, batch.crc


def _name(replica: Replica) -> str:
    return f"broker {replica.broker}" if replica.broker is not None else replica.log_dir


def _describe(replica: Replica, batch: Batch | None) -> str:
    name = _name(replica)
    if batch is None:
        return f"{name} has no batch there"
    return (f"{name} has offsets {batch.base_offset}-{batch.last_offset} partitionLeaderEpoch"
            f" {batch.partition_leader_epoch} crc {batch.crc}")


def _outvoted(identities: Sequence[object]) -> object:
    """The majority's identity, or a sentinel that matches no one when there is no majority."""
    (common, votes), = Counter(identities).most_common(1)
    return common if votes * 2 > len(identities) else object()


def replica_agreement(replicas: Sequence[Replica]) -> Iterator[Finding]:
    """All replicas hold the same batches (offsets, epoch, CRC) from the highest log start to the lowest HW;
    for a compacted partition, the same latest value per key below the cleaned point and the same batches above.

    Only the first divergence is reported, once per replica that differs from
    the majority (every replica when none has a majority).
    """
    compared = [r for r in replicas if r.topic is not None]
    hws = [r.high_watermark for r in compared if r.high_watermark is not None]
    if len(compared) < 2 or not hws:
        return
    start = max(r.log_start for r in compared)
    end = min(hws)
    if any(r.compacted for r in compared):
        cleaned = max((r.cleaner_offset or 0 for r in compared), default=0)
        found = list(latest_value_agreement(compared, start, cleaned))
        yield from found
        if found:
            return
        start = max(start, cleaned)
    yield from _batch_agreement(compared, start, end)
    yield from aborted_txn_agreement(compared, start, end)


def aborted_txn_agreement(replicas: Sequence[Replica], start: int, end: int) -> Iterator[Finding]:
    """The replicas' `.txnindex` entries whose marker is in [start, end) name the same aborted ranges (producer
    id, first offset, marker offset): what a READ_COMMITTED reader is told to drop, whichever replica leads."""
    held = [{(e["producer_id"], e["first_offset"], e["last_offset"]) for e in r.txn_index
             if start <= e["last_offset"] < end} for r in replicas]
    if len({frozenset(h) for h in held}) <= 1:
        return
    # Against the majority's ranges; without a majority, against every range any replica holds.
    majority = _outvoted([frozenset(h) for h in held])
    reference = majority if isinstance(majority, frozenset) else frozenset(set().union(*held))
    for replica, ranges in zip(replicas, held):
        missing, extra = sorted(reference - ranges), sorted(ranges - reference)
        if not missing and not extra:
            continue
        (pid, first, last), said = (missing[0], "lacks") if missing else (extra[0], "alone has")
        yield replica.finding(ABORTED_TXN_DIVERGENCE, f"replicas disagree on the aborted transactions below the"
                              f" high watermark {end}: {_name(replica)} {said} producerId {pid}'s from offset"
                              f" {first} to its ABORT marker at {last}", None, None, first, last)


def _latest_values(replica: Replica, start: int, end: int) -> dict[bytes | None, tuple[int, int]]:
    """Key -> (offset, value CRC) of its newest record in [start, end); tombstones count as absent, since a
    cleaner drops them once delete.retention.ms has passed, on each replica at its own time."""
    latest: dict[bytes | None, tuple[int, int | None]] = {}
    aborted = transactions_of(replica).aborted_batches  # never a key's value: the cleaner drops them on its own time
    for batch in replica.whole_batches:
        if batch.is_control or (batch.last_offset or 0) < start or (batch.base_offset or 0) >= end \
                or (batch.segment, batch.position) in aborted:
            continue
        for record in batch.records or ():
            if start <= record["offset"] < end:
                latest[record["key"]] = (record["offset"], record["value_crc"])
    return {key: (offset, crc) for key, (offset, crc) in latest.items() if crc is not None}


def latest_value_agreement(replicas: Sequence[Replica], start: int, cleaned: int) -> Iterator[Finding]:
    """Replicas agree on every key's newest (offset, value) below `cleaned`, the highest cleaner checkpoint.

    A replica whose high watermark is below `cleaned` is left out: its cleaned
    neighbour may have dropped records that only the missing tail supersedes.
    """
    compared = [r for r in replicas if r.high_watermark is not None and r.high_watermark >= cleaned]
    if len(compared) < 2 or cleaned <= start:
        return
    latest = [_latest_values(r, start, cleaned) for r in compared]
    for key in sorted(set().union(*latest), key=lambda k: (_first_offset(latest, k), k or b"")):
        values = [held.get(key) for held in latest]
        if len(set(values)) == 1:
            continue
        majority = _outvoted(values)
        evidence = "; ".join(_describe_value(r, v) for r, v in zip(compared, values))
        for replica, value in zip(compared, values):
            if value != majority:
                at = None if value is None else value[0]
                yield replica.finding(REPLICA_DIVERGENCE, f"replicas disagree on the latest value of key {key!r}"
                                      f" below the cleaned offset {cleaned}: {evidence}", None, None, at, at)
        return


def _first_offset(latest: Sequence[Mapping[bytes | None, tuple[int, int]]], key: bytes | None) -> int:
    return min(held[key][0] for held in latest if key in held)


def _describe_value(replica: Replica, value: tuple[int, int] | None) -> str:
    name = f"broker {replica.broker}" if replica.broker is not None else replica.log_dir
    if value is None:
        return f"{name} has no live value"
    return f"{name} has offset {value[0]} value crc {value[1]}"


def _batch_agreement(compared: Sequence[Replica], start: int, end: int) -> Iterator[Finding]:
    held = [{b.base_offset: b for b in r.whole_batches if b.base_offset is not None and start <= b.base_offset < end}
            for r in compared]
    for offset in sorted(set().union(*held)):
        batches = [h.get(offset) for h in held]
        identities = [None if b is None else _identity(b) for b in batches]
        if len(set(identities)) == 1:
            continue
        majority = _outvoted(identities)
        evidence = "; ".join(_describe(r, b) for r, b in zip(compared, batches))
        for replica, batch, identity in zip(compared, batches, identities):
            if identity == majority:
                continue
            if batch is not None:
                yield replica.at(REPLICA_DIVERGENCE, batch, f"replicas diverge at offset {offset} below the high"
                                 f" watermark {end}: {evidence}")
            else:
                yield replica.finding(REPLICA_DIVERGENCE, f"replicas diverge at offset {offset} below the high"
                                      f" watermark {end}: {evidence}", None, None, offset, offset)
        return


def audit_partition(replicas: Sequence[Replica]) -> list[Finding]:
    """Every finding for one partition (or, for rows without a topic, for log dirs' own files)."""
    findings = [f for replica in replicas for check in REPLICA_CHECKS for f in check(replica)]
    findings += replica_agreement(replicas)
    return findings

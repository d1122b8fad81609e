"""A partition's leader-epoch cache: which leader epoch wrote which offsets (KIP-101, KIP-279).

Each entry (epoch, startOffset) says "the first record written in `epoch` got
offset `startOffset`"; an epoch ends where the next one starts, the latest at
the log end. A follower that restarts or changes leader asks the leader for
the end offset of its own latest epoch (OffsetsForLeaderEpoch) and truncates to
the answer, instead of to its high watermark, which may be stale.

Semantics are Kafka 2.x's kafka.server.epoch.LeaderEpochFileCache; every
change is written through to the partition's `leader-epoch-checkpoint`.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from collections.abc import Sequence

from broker.log.checkpoint import EpochEntry, LeaderEpochCheckpointFile

__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "EpochEntry", "LeaderEpochFileCache"]

# Kafka's EpochEndOffset.UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

log = logging.getLogger(__name__)


def write_needs_fsync(entries: Sequence[EpochEntry], log_end_offset: int) -> bool:
    """Whether a checkpoint of `entries` must reach the disk before the change goes on.

    Not while the history names no record: every entry starts at or after the log end, as a new partition's
    first leader epoch does (written when each of a new topic's partitions gets its leader, an fsync of the file
    and of its directory for every one). Losing that write in a crash loses no record's epoch; the log's next
    flush (`sync`) makes it durable before its recovery point can pass a record the history names, and a
    concurrent flush cannot pass it either: its target is at most the log end, where the history starts."""
    return bool(entries) and entries[0].start_offset < log_end_offset


class LeaderEpochFileCache:
    """(epoch -> start offset) entries, both strictly increasing, persisted on every change."""

    def __init__(self, checkpoint_path: str | os.PathLike[str]) -> None:
        self._checkpoint = LeaderEpochCheckpointFile(checkpoint_path)
        self._lock = threading.Lock()
        # The last write was not fsynced (write_needs_fsync): the log's next flush syncs it.
        self._unsynced = False
        self._epochs: list[EpochEntry] = []
        # Loaded through the same rule as new entries, so a hand-edited or pre-fix file
        # with non-monotonic entries is repaired in memory (as Kafka does); not rewritten
        # until the next change.
        for entry in self._checkpoint.read():
            self._assign(entry)
        # Kafka's CheckpointFile creates the file with the log, so every partition dir has one, even a
        # follower's that never appended (the audit checks for it).
        self._checkpoint.create_if_missing()

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self._checkpoint.path!r}, {self._epochs})"

    # ------------------------------------------------------------------ updates

    def assign(self, epoch: int, start_offset: int, log_end_offset: int | None = None) -> None:
        """Record that `epoch` starts at `start_offset`.

        As Kafka: a no-op when `epoch` is already the latest with a start at or
        before `start_offset`. Otherwise the new entry wins, and any entry that
        contradicts it (an epoch >= `epoch`, or a start offset >= `start_offset`)
        is removed first: the latest append is taken as the truth, since raising
        would kill a fetcher over state it cannot repair.

        Given the log's end offset (a new leader's, under its partition's lock), a history that names no record
        yet is written without fsync (`write_needs_fsync`); the log's next flush syncs it.
        """
        with self._lock:
            if self._assign(EpochEntry(epoch, start_offset)):
                self._flush(sync=log_end_offset is None or write_needs_fsync(self._epochs, log_end_offset))

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid partition leader epoch entry {entry}")
        epochs = self._epochs
        if epochs and entry.epoch == epochs[-1].epoch and entry.start_offset >= epochs[-1].start_offset:
            return False
        removed = []
        while epochs and (epochs[-1].epoch >= entry.epoch or epochs[-1].start_offset >= entry.start_offset):
            removed.append(epochs.pop())
        # Replacing a single entry that starts at the same offset only means no record
        # was written in that epoch: expected, not worth a warning.
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            log.warning(
                "%s: new epoch entry %s caused truncation of conflicting entries %s",
                self._checkpoint.path, entry, removed,
            )
        epochs.append(entry)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove every entry starting at or after `end_offset` (the log was truncated to it)."""
        with self._lock:
            epochs = self._epochs
            if end_offset < 0 or not epochs or epochs[-1].start_offset < end_offset:
                return
            while epochs and epochs[-1].start_offset >= end_offset:
                epochs.pop()
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget offsets below `start_offset` (the log start moved up).

        Entries that start at or below it are dropped, except that the last of
        them is kept with its start moved up to `start_offset`, since records of
        that epoch may remain. Exclusive: an entry starting exactly at
        `start_offset` is retained as is.
        """
        with self._lock:
            epochs = self._epochs
            i = bisect.bisect_right([e.start_offset for e in epochs], start_offset)
            if i == 0:
                return
            first = EpochEntry(epochs[i - 1].epoch, start_offset)
            if i == 1 and epochs[0] == first:
                return  # nothing changes: spare the fsync
            self._epochs = [first, *epochs[i:]]
            self._flush()

    def clear_and_flush(self) -> None:
        with self._lock:
            self._epochs = []
            self._flush()

    def _flush(self, sync: bool = True) -> None:
        self._checkpoint.write(self._epochs, sync)
        self._unsynced = not sync

    def sync(self) -> None:
        """Make a write `assign` left unsynced durable (the log calls it first thing in every flush)."""
        with self._lock:
            if self._unsynced:
                self._checkpoint.sync()
                self._unsynced = False

    # ------------------------------------------------------------------ queries

    @property
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._epochs)

    @property
    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._epochs[-1] if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._epochs[0] if self._epochs else None

    @property
    def latest_epoch(self) -> int:
        """The epoch that wrote the latest records, UNDEFINED_EPOCH if none is known."""
        latest = self.latest_entry
        return latest.epoch if latest else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answering OffsetsForLeaderEpoch for `requested_epoch` (KIP-279).

        - UNDEFINED_EPOCH asked, or nothing known above it: (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET).
        - The latest epoch: (it, `log_end_offset`): that epoch is still being written.
        - Otherwise the largest known epoch <= `requested_epoch`, and the start
          offset of the first epoch above it, where that epoch ended.
        - Below every known epoch: (`requested_epoch`, start of the earliest
          entry). The epochs in between are gone with the log's head, and the
          follower must not keep anything before the leader's first entry.
        """
        with self._lock:
            epochs = self._epochs
            if requested_epoch == UNDEFINED_EPOCH:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if epochs and epochs[-1].epoch == requested_epoch:
                return requested_epoch, log_end_offset
            higher = bisect.bisect_right([e.epoch for e in epochs], requested_epoch)
            if higher == len(epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if higher == 0:
                return requested_epoch, epochs[0].start_offset
            return epochs[higher - 1].epoch, epochs[higher].start_offset

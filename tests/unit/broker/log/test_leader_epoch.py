"""LeaderEpochFileCache: Kafka 2.x assign/truncate rules, KIP-279 endOffsetFor, and write-through."""

from __future__ import annotations

import itertools
import logging
import threading
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.checkpoint import LeaderEpochCheckpointFile
from broker.log.files import LEADER_EPOCH_CHECKPOINT
from broker.log.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
    write_needs_fsync,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def make_cache(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(tmp_path / LEADER_EPOCH_CHECKPOINT)
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def on_disk(tmp_path: Path) -> list[EpochEntry]:
    return LeaderEpochCheckpointFile(tmp_path / LEADER_EPOCH_CHECKPOINT).read()


def test_empty_cache(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    assert cache.entries == []
    assert cache.latest_epoch == UNDEFINED_EPOCH
    assert cache.latest_entry is None
    assert cache.earliest_entry is None
    assert cache.end_offset_for(0, 10) == UNDEFINED
    assert cache.end_offset_for(UNDEFINED_EPOCH, 10) == UNDEFINED
    # Created with the cache, empty, as Kafka's CheckpointFile is (Files.createFile): every partition dir has one,
    # even a follower's that never appended.
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == ""
    assert on_disk(tmp_path) == []


def test_assign_writes_through_to_checkpoint(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, (0, 0), (2, 6))
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 0\n2 6\n"
    assert cache.latest_epoch == 2
    assert cache.latest_entry == EpochEntry(2, 6)
    assert cache.earliest_entry == EpochEntry(0, 0)
    assert LeaderEpochFileCache(tmp_path / LEADER_EPOCH_CHECKPOINT).entries == [(0, 0), (2, 6)]


def test_same_epoch_at_later_offset_is_a_no_op(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, (2, 6))
    with mock.patch.object(LeaderEpochCheckpointFile, "write") as write:
        cache.assign(2, 6)
        cache.assign(2, 10)
    write.assert_not_called()
    assert cache.entries == [(2, 6)]


def test_same_epoch_at_earlier_offset_moves_its_start(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, (1, 2), (2, 6))
    cache.assign(2, 5)
    assert cache.entries == [(1, 2), (2, 5)]
    assert on_disk(tmp_path) == [(1, 2), (2, 5)]


def test_new_epoch_removes_entries_at_or_after_its_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = make_cache(tmp_path, (1, 5), (2, 10))
    with caplog.at_level(logging.WARNING):
        cache.assign(3, 8)
    assert cache.entries == [(1, 5), (3, 8)]
    assert "caused truncation of conflicting entries" in caplog.text


def test_replacing_an_empty_epoch_does_not_warn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = make_cache(tmp_path, (1, 5), (2, 10))
    with caplog.at_level(logging.WARNING):
        cache.assign(3, 10)  # epoch 2 wrote nothing
    assert cache.entries == [(1, 5), (3, 10)]
    assert caplog.text == ""
    with caplog.at_level(logging.WARNING):
        cache.assign(1, 10)  # but dropping two entries is worth one
    assert cache.entries == [(1, 10)]
    assert "caused truncation of conflicting entries" in caplog.text


def test_older_epoch_wins_over_newer_ones(tmp_path: Path) -> None:
    # Kafka takes the latest assignment as the truth rather than ignoring it.
    cache = make_cache(tmp_path, (1, 2), (2, 6), (3, 8))
    cache.assign(2, 7)
    assert cache.entries == [(1, 2), (2, 7)]
    assert on_disk(tmp_path) == [(1, 2), (2, 7)]


@pytest.mark.parametrize(("epoch", "offset"), [(-1, 0), (0, -1)])
def test_assign_rejects_undefined_values(tmp_path: Path, epoch: int, offset: int) -> None:
    with pytest.raises(ValueError, match="invalid partition leader epoch entry"):
        make_cache(tmp_path).assign(epoch, offset)


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (5, (5, 30)),  # the latest epoch ends at the log end
        (4, (3, 20)),  # an epoch this leader never had: the one before it, ending where 5 starts
        (3, (3, 20)),
        (2, (1, 10)),
        (1, (1, 10)),
        (0, (0, 5)),  # below every known epoch: the earliest start offset (KIP-279)
        (6, UNDEFINED),  # above every known epoch
        (UNDEFINED_EPOCH, UNDEFINED),
    ],
)
def test_end_offset_for(tmp_path: Path, requested: int, expected: tuple[int, int]) -> None:
    cache = make_cache(tmp_path, (1, 5), (3, 10), (5, 20))
    assert cache.end_offset_for(requested, 30) == expected


@pytest.mark.parametrize(
    ("end_offset", "expected"),
    [
        (12, [(2, 6), (3, 8), (4, 11)]),
        (11, [(2, 6), (3, 8)]),
        (9, [(2, 6), (3, 8)]),
        (8, [(2, 6)]),
        (0, []),
        (UNDEFINED_EPOCH_OFFSET, [(2, 6), (3, 8), (4, 11)]),
    ],
)
def test_truncate_from_end(tmp_path: Path, end_offset: int, expected: list[tuple[int, int]]) -> None:
    cache = make_cache(tmp_path, (2, 6), (3, 8), (4, 11))
    cache.truncate_from_end(end_offset)
    assert cache.entries == expected
    assert on_disk(tmp_path) == expected


@pytest.mark.parametrize(
    ("start_offset", "expected"),
    [
        (5, [(2, 6), (3, 8), (4, 11)]),  # below every entry: nothing to drop
        (6, [(2, 6), (3, 8), (4, 11)]),  # exclusive: the entry starting there stays
        (7, [(2, 7), (3, 8), (4, 11)]),
        (8, [(3, 8), (4, 11)]),
        (9, [(3, 9), (4, 11)]),  # inside epoch 3: it now starts at the new log start
        (11, [(4, 11)]),
        (15, [(4, 15)]),
    ],
)
def test_truncate_from_start(tmp_path: Path, start_offset: int, expected: list[tuple[int, int]]) -> None:
    cache = make_cache(tmp_path, (2, 6), (3, 8), (4, 11))
    cache.truncate_from_start(start_offset)
    assert cache.entries == expected
    assert on_disk(tmp_path) == expected


def test_clear_and_flush(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, (2, 6), (3, 8))
    cache.clear_and_flush()
    assert cache.entries == []
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n0\n"


def test_load_repairs_non_monotonic_file_in_memory(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text("0\n3\n1 5\n3 20\n2 10\n")
    cache = LeaderEpochFileCache(path)
    assert cache.entries == [(1, 5), (2, 10)]


def test_concurrent_readers_see_consistent_entries(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    torn: list[list[EpochEntry]] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            entries = cache.entries
            if not _monotonic(entries):
                torn.append(entries)
            cache.end_offset_for(3, 1000)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    with mock.patch("os.fsync"):
        for epoch in range(100):
            cache.assign(epoch, epoch * 2)
            if epoch % 25 == 24:
                cache.truncate_from_end(epoch)
    stop.set()
    for t in threads:
        t.join()
    assert torn == []


def _monotonic(entries: list[EpochEntry]) -> bool:
    return all(a.epoch < b.epoch and a.start_offset < b.start_offset for a, b in itertools.pairwise(entries))


# ---------------------------------------------------------------------------- model check


class Model:
    """Kafka 2.0's list formulation of the same rules, written independently of the cache."""

    def __init__(self) -> None:
        self.entries: list[EpochEntry] = []

    def assign(self, epoch: int, offset: int) -> None:
        if self.entries and self.entries[-1].epoch == epoch and offset >= self.entries[-1].start_offset:
            return
        kept = [e for e in self.entries if e.epoch < epoch and e.start_offset < offset]
        self.entries = [*kept, EpochEntry(epoch, offset)]

    def truncate_from_end(self, end: int) -> None:
        if end >= 0:
            self.entries = [e for e in self.entries if e.start_offset < end]

    def truncate_from_start(self, start: int) -> None:
        previous = [e for e in self.entries if e.start_offset <= start]
        if previous:
            later = [e for e in self.entries if e.start_offset > start]
            self.entries = [EpochEntry(previous[-1].epoch, start), *later]

    def end_offset_for(self, requested: int, leo: int) -> tuple[int, int]:
        if requested == UNDEFINED_EPOCH:
            return UNDEFINED
        if self.entries and self.entries[-1].epoch == requested:
            return requested, leo
        higher = [e for e in self.entries if e.epoch > requested]
        lower = [e for e in self.entries if e.epoch <= requested]
        if not higher:
            return UNDEFINED
        if not lower:
            return requested, higher[0].start_offset
        return lower[-1].epoch, higher[0].start_offset


def draw_near(data: st.DataObject, known: list[int], low: int, high: int) -> int:
    """Half the time a neighbour of a value already in the cache, where the rules have their edges."""
    if known and data.draw(st.booleans()):
        return data.draw(st.sampled_from(known)) + data.draw(st.integers(-1, 1))
    return data.draw(st.integers(low, high))


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_cache_matches_model(data: st.DataObject) -> None:
    saved: list[EpochEntry] = []

    def write(_self: LeaderEpochCheckpointFile, entries: list[EpochEntry], _sync: bool = True) -> None:
        saved[:] = entries

    # The file format and write-through have their own tests; here the disk would only cost time.
    with (mock.patch.object(LeaderEpochCheckpointFile, "write", write),
          mock.patch.object(LeaderEpochCheckpointFile, "create_if_missing", lambda _self: None)):
        cache, model = LeaderEpochFileCache("/nonexistent/" + LEADER_EPOCH_CHECKPOINT), Model()
        for _ in range(data.draw(st.integers(0, 20))):
            op = data.draw(st.sampled_from(["assign", "assign", "truncate_from_end", "truncate_from_start", "query"]))
            epoch = draw_near(data, [e.epoch for e in model.entries], -1, 8)
            offset = draw_near(data, [e.start_offset for e in model.entries], -1, 30)
            if op == "query":
                assert cache.end_offset_for(epoch, 100) == model.end_offset_for(epoch, 100)
                continue
            args = (max(epoch, 0), max(offset, 0)) if op == "assign" else (offset,)
            getattr(cache, op)(*args)
            getattr(model, op)(*args)
            assert cache.entries == model.entries
            assert _monotonic(cache.entries)
            assert saved == model.entries


# ---------------------------------------------------------------------- fsync only where a record's epoch is at stake

@pytest.mark.parametrize(("entries", "log_end_offset", "needed"), [
    ([], 0, False),
    ([(3, 0)], 0, False),              # a new partition's first leader epoch
    ([(3, 7), (4, 7)], 7, False),      # epochs that wrote nothing, at the log end
    ([(3, 0)], 5, True),               # names records 0..4
    ([(3, 0), (4, 5)], 5, True),       # the new epoch at the end, the older one naming records
])
def test_write_needs_fsync_only_once_the_history_names_a_record(entries: list[tuple[int, int]], log_end_offset: int,
                                                                 needed: bool) -> None:
    assert write_needs_fsync([EpochEntry(*e) for e in entries], log_end_offset) is needed


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import broker.log.checkpoint as checkpoint
    synced: list[int] = []
    real = checkpoint.os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real(fd)
    monkeypatch.setattr(checkpoint.os, "fsync", fsync)
    return synced


def test_a_new_leaders_first_epoch_is_written_without_fsync_and_synced_once_later(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = make_cache(tmp_path)
    synced = _count_fsyncs(monkeypatch)
    cache.assign(3, 0, log_end_offset=0)
    assert on_disk(tmp_path) == [(3, 0)] and synced == []
    cache.sync()
    assert len(synced) == 2  # the file, then its directory (the rename)
    cache.sync()
    assert len(synced) == 2  # nothing left to sync


def test_an_epoch_history_naming_records_is_fsynced_as_it_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = make_cache(tmp_path, (3, 0))
    synced = _count_fsyncs(monkeypatch)
    cache.assign(4, 5, log_end_offset=5)
    assert on_disk(tmp_path) == [(3, 0), (4, 5)] and len(synced) == 2
    cache.sync()
    assert len(synced) == 2

"""Property test of the log cleaner: any sequence of keyed writes, tombstones, clock advances, rolls,
cleanings and reopens leaves the newest record of every key, tombstones only until delete.retention.ms
after their first cleaning, every surviving record at its original offset with its original content,
at most one record per key below the cleaned point, and bytes kafka-python's codec reads alike."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from broker.config.log_config import LogConfig
from broker.log.cleaner.algorithm import Cleaner, LogToClean, Throttler
from broker.log.cleaner.manager import LogCleanerManager
from broker.log.cleaner.offset_map import SkimpyOffsetMap
from broker.log.log import Log
from common.record import ProducerRecord, build_batch, iter_batches
from tests.fakes import FakeClock

DELETE_RETENTION_MS = 1000
KEYS = 6


@dataclass
class Model:
    """Every write by offset, the tombstones' first cleaning time, and the last cleaning's end."""

    writes: dict[int, tuple[bytes, bytes | None, int]] = field(default_factory=dict)  # offset -> key, value, ts
    first_cleaned: dict[int, int] = field(default_factory=dict)  # tombstone offset -> time of first cleaning
    cleaned_to: int = 0

    def newest(self) -> dict[bytes, int]:
        newest: dict[bytes, int] = {}
        for offset, (key, _, _) in sorted(self.writes.items()):
            newest[key] = offset
        return newest


writes = st.lists(st.tuples(st.integers(0, KEYS - 1), st.booleans(), st.integers(0, 40)), min_size=1, max_size=4)
operations = st.one_of(
    st.tuples(st.just("write"), writes),
    st.tuples(st.just("advance"), st.integers(1, 800)),
    st.tuples(st.just("roll")),
    st.tuples(st.just("clean")),
    st.tuples(st.just("clean")),
    st.tuples(st.just("reopen"), st.booleans()),
)


def records_in(log: Log) -> list[tuple[int, bytes | None, bytes | None, int]]:
    """Every record from the log start, read through Log.read (the fetch path) across the gaps."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30).records.read()
        batches = list(iter_batches(data, allow_gaps=True))
        if not batches:
            # The cleaner emptied everything from here to the (empty) active segment: a gap up to the log end.
            assert all(h.last_offset < offset for s in log.segments for h in s.headers())
            break
        ours = [(r.offset, r.key, r.value, r.timestamp) for b in batches for r in b.records]
        theirs = []
        memory = MemoryRecords(bytes(data))
        while (batch := memory.next_batch()) is not None:
            assert batch.validate_crc()
            theirs += [(r.offset, r.key, r.value, r.timestamp) for r in batch]
        assert ours == theirs
        out += ours
        offset = batches[-1].header.next_offset
    return out


def check(log: Log, model: Model, now: int) -> None:
    records = records_in(log)
    offsets = [r[0] for r in records]
    assert offsets == sorted(set(offsets))
    for offset, key, value, timestamp in records:
        assert model.writes[offset] == (key, value, timestamp)
    present = set(offsets)
    for key, offset in model.newest().items():
        _, value, _ = model.writes[offset]
        if value is not None or offset not in model.first_cleaned:
            assert offset in present, (key, offset)
        # A tombstone is kept until a cleaning at or past its horizon; never removed before it.
        elif offset not in present:
            assert now >= model.first_cleaned[offset] + DELETE_RETENTION_MS
            assert not any(r[1] == key for r in records)
    below = [r[1] for r in records if r[0] < model.cleaned_to]
    assert len(below) == len(set(below)), "two records of one key below the cleaned point"


def apply(log: Log, model: Model, op: tuple, clock: FakeClock, cleaner: Cleaner,
          manager: LogCleanerManager) -> Log:
    kind = op[0]
    if kind == "write":
        records = [ProducerRecord(None if tombstone else f"v{size}".encode().ljust(size, b"."), f"k{key}".encode(),
                                  timestamp=clock.now) for key, tombstone, size in op[1]]
        info = log.append_as_leader(build_batch(records), 0)
        for i, record in enumerate(records):
            model.writes[info.first_offset + i] = (record.key, record.value, clock.now)
    elif kind == "advance":
        clock.advance(op[1])
    elif kind == "roll":
        log.roll()
    elif kind == "clean":
        tp = log.topic_partition
        stats = manager.measure(tp, log, clock.now, log.log_end_offset)
        end, _ = cleaner.clean(stats.to_clean)
        manager.done_cleaning(stats.to_clean, end)
        for offset, (_, value, _) in model.writes.items():
            if value is None and offset < end:
                model.first_cleaned.setdefault(offset, clock.now)
        model.cleaned_to = max(model.cleaned_to, end)
        # Expired tombstones in the recopied range are gone now.
        present = {r[0] for r in records_in(log)}
        for offset, first in model.first_cleaned.items():
            if clock.now >= first + DELETE_RETENTION_MS:
                assert offset not in present
    elif kind == "reopen":
        clean = op[1]
        log.close()
        log = Log.open(log.dir, log.config, clean_shutdown=clean, time=clock)
        assert log.recovery_report == []
    return log


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operations, max_size=40), segment_bytes=st.sampled_from([300, 700, 2000]))
def test_cleaning_keeps_the_newest_record_per_key(ops: list[tuple], segment_bytes: int) -> None:
    clock = FakeClock(1_000_000)
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=64, cleanup_policy=("compact",),
                       delete_retention_ms=DELETE_RETENTION_MS)
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / "t-0", config, time=clock)
        manager = LogCleanerManager([Path(tmp)], lambda: {log.topic_partition: log}, clock)
        cleaner = Cleaner(0, SkimpyOffsetMap(1 << 16), Throttler(float("inf")), clock)
        model = Model()
        for op in ops:
            log = apply(log, model, op, clock, cleaner, manager)
            check(log, model, clock.now)
        log.close()


def test_a_full_offset_map_cleans_what_it_covers_and_the_next_cleaning_goes_on() -> None:
    clock = FakeClock(1_000_000)
    config = LogConfig(segment_bytes=400, cleanup_policy=("compact",))
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / "t-0", config, time=clock)
        for i in range(60):
            log.append_as_leader(build_batch([ProducerRecord(b"v%d" % i, b"k%d" % (i % 20))]), 0)
        log.roll()
        # 24 bytes per key and a 0.9 load factor: room for 9 keys per cleaning.
        cleaner = Cleaner(0, SkimpyOffsetMap(10 * 24), Throttler(float("inf")), clock)
        start = 0
        ends = []
        while start < 60:
            end, _ = cleaner.clean(LogToClean(log, start, log.active_segment.base_offset))
            assert end > start
            ends.append(end)
            start = end
        assert len(ends) > 1
        records = records_in(log)
        assert [r[0] for r in records] == list(range(40, 60))


def test_a_tombstone_lives_delete_retention_ms_after_its_first_cleaning() -> None:
    clock = FakeClock(1_000_000)
    config = LogConfig(segment_bytes=400, cleanup_policy=("compact",), delete_retention_ms=DELETE_RETENTION_MS)
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / "t-0", config, time=clock)
        log.append_as_leader(build_batch([ProducerRecord(b"old", b"k"), ProducerRecord(b"x", b"other")]), 0)
        log.append_as_leader(build_batch([ProducerRecord(None, b"k")]), 0)
        log.roll()
        cleaner = Cleaner(0, SkimpyOffsetMap(1 << 16), Throttler(float("inf")), clock)
        clock.advance(5000)  # time before the first cleaning does not count
        end, _ = cleaner.clean(LogToClean(log, 0, log.active_segment.base_offset))
        assert [(r[0], r[2]) for r in records_in(log)] == [(1, b"x"), (2, None)]
        clock.advance(DELETE_RETENTION_MS - 1)
        cleaner.clean(LogToClean(log, end, log.active_segment.base_offset))
        assert [(r[0], r[2]) for r in records_in(log)] == [(1, b"x"), (2, None)]
        clock.advance(1)
        cleaner.clean(LogToClean(log, end, log.active_segment.base_offset))
        assert [(r[0], r[2]) for r in records_in(log)] == [(1, b"x")]
        log.close()

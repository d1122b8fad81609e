"""Property test: any sequence of appends, truncations, rolls, retention and reopens (clean or not)
leaves a log whose reads equal a plain in-memory model (a list of batches)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from log_helpers import make_batch, read_raw

from broker.config.log_config import LogConfig
from broker.log.log import Log
from common.record import iter_headers, patch_base_offset_and_epoch


@dataclass(frozen=True)
class Batch:
    base: int
    last: int
    data: bytes

    @property
    def next(self) -> int:
        return self.last + 1


@dataclass
class Model:
    """Every batch written since the log last started over, its start and end, and the recovery-point checkpoint."""

    batches: list[Batch] = field(default_factory=list)
    log_start: int = 0
    log_end: int = 0
    checkpoint: int = 0
    tag: int = 0

    def visible(self) -> list[bytes]:
        return [b.data for b in self.batches if b.last >= self.log_start]


# At most ~1000 bytes per request: a leader refuses requests larger than a segment.
batch_specs = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 60)), min_size=1, max_size=3)

operations = st.one_of(
    st.tuples(st.just("leader"), batch_specs, st.integers(0, 3)),
    st.tuples(st.just("follower"), batch_specs, st.integers(0, 3)),
    st.tuples(st.just("truncate"), st.floats(0, 1.2)),
    st.tuples(st.just("delete_records"), st.floats(0, 1)),
    st.tuples(st.just("retention")),
    st.tuples(st.just("roll")),
    st.tuples(st.just("flush")),
    st.tuples(st.just("reopen"), st.booleans()),
)

configs = st.builds(
    LogConfig,
    segment_bytes=st.sampled_from([1024, 1500, 4096]),
    index_interval_bytes=st.sampled_from([0, 64, 256]),
    max_index_size=st.sampled_from([24, 64, 4096]),
    retention_bytes=st.sampled_from([-1, 1500]),
    retention_ms=st.just(-1),
)


def new_batches(model: Model, specs: list[tuple[int, int]], epoch: int) -> tuple[bytes, list[Batch]]:
    """A producer's request, and the batches the leader stores for it (offsets from the log end, epoch)."""
    request = b""
    stored = []
    offset = model.log_end
    for records, value_size in specs:
        model.tag += 1
        raw = make_batch(records=records, value_size=value_size, timestamp=model.tag * 10, tag=model.tag)
        request += raw
        data = bytearray(raw)
        patch_base_offset_and_epoch(data, 0, offset, epoch)
        stored.append(Batch(offset, offset + records - 1, bytes(data)))
        offset += records
    return request, stored


def apply(log: Log, model: Model, op: tuple[object, ...], directory: Path, config: LogConfig) -> Log:
    kind = op[0]
    if kind in ("leader", "follower"):
        specs, epoch = op[1], op[2]
        request, stored = new_batches(model, specs, epoch)  # type: ignore[arg-type]
        if kind == "leader":
            info = log.append_as_leader(request, epoch)  # type: ignore[arg-type]
        else:
            info = log.append_as_follower(b"".join(b.data for b in stored))
        assert (info.first_offset, info.last_offset) == (stored[0].base, stored[-1].last)
        model.batches += stored
        model.log_end = stored[-1].next
    elif kind == "truncate":
        target = int(op[1] * (model.log_end + 1))  # type: ignore[operator]
        first_base = log.segments[0].base_offset
        assert log.truncate_to(target) == (target < model.log_end)
        if target < model.log_end:
            if first_base > target:  # nothing left to keep: the log starts over at the target
                model.batches, model.log_start, model.log_end = [], target, target
            else:  # a batch straddling the target goes whole
                model.batches = [b for b in model.batches if b.last < target]
                model.log_end = max([first_base] + [b.next for b in model.batches])
                model.log_start = min(model.log_start, model.log_end)
    elif kind == "delete_records":
        target = model.log_start + int(op[1] * (model.log_end - model.log_start))  # type: ignore[operator]
        log.maybe_increment_log_start_offset(target)
        model.log_start = max(model.log_start, target)
    elif kind == "retention":
        before = log.log_start_offset
        log.delete_old_segments()
        # Whole segments only: the new start is a batch boundary and the active segment survives.
        assert before <= log.log_start_offset <= model.log_end
        assert log.log_start_offset == before or any(b.base == log.log_start_offset for b in model.batches)
        model.log_start = log.log_start_offset
    elif kind == "roll":
        log.roll()
    elif kind == "flush":
        log.flush()
        assert log.recovery_point == model.log_end
    elif kind == "reopen":
        clean = op[1]
        model.checkpoint = log.recovery_point
        if clean:
            log.close()
        # Unclean: the old object is just dropped; nothing is trimmed, sealed or flushed.
        log = Log.open(directory, config, recovery_point=model.checkpoint, log_start_offset=model.log_start,
                       clean_shutdown=bool(clean), time=lambda: 0)
        assert log.recovery_report == []  # the log never writes what its own recovery would cut
    return log


def check(log: Log, model: Model) -> None:
    assert (log.log_start_offset, log.log_end_offset) == (model.log_start, model.log_end)
    assert read_raw(log) == model.visible()
    for batch in model.batches[-3:]:  # point reads go through the indexes
        if batch.last >= model.log_start:
            for offset in {max(batch.base, model.log_start), batch.last}:
                data = log.read(offset, 1).records.read()
                assert data[: len(batch.data)] == batch.data


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=configs, ops=st.lists(operations, max_size=30))
def test_log_matches_an_in_memory_model(config: LogConfig, ops: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "model-0"
        log = Log.open(directory, config, time=lambda: 0)
        model = Model()
        for op in ops:
            log = apply(log, model, op, directory, config)
            check(log, model)
        log = apply(log, model, ("reopen", False), directory, config)
        check(log, model)
        assert all(next(iter_headers(b)) for b in model.visible())

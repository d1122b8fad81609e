"""The perf tools' per-record bookkeeping (minibroker perf produce | consume)."""

from __future__ import annotations

from client.structs import ConsumerRecord
from minibroker.commands.perf import ProducerStats, serialized_size


def record(key: bytes | None, value: bytes | None) -> ConsumerRecord:
    return ConsumerRecord("t", 0, 0, 0, 0, key, value, (), 0, -1 if key is None else len(key),
                          -1 if value is None else len(value), -1)


def test_serialized_size_counts_keys_and_values_and_nulls_as_zero() -> None:
    records = [record(None, b"x" * 100), record(b"k", None), record(None, None), record(b"key", b"")]
    assert serialized_size(records) == 100 + 1 + 0 + 3
    assert serialized_size([]) == 0


def test_producer_stats_count_every_completion() -> None:
    stats = ProducerStats(10)
    for i in range(10):
        stats.record(i, float(i), 100, stats.start)
    assert (stats.count, stats.bytes, stats.max_latency) == (10, 1000, 9.0)
    assert "10 records sent" in stats.total()

"""The perf tools' per-record bookkeeping (minibroker perf produce | consume)."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.structs import ConsumerRecord
from minibroker.commands.client_options import UsageError
from minibroker.commands.perf import ProducerStats, read_payloads, serialized_size


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


def test_payload_file_is_split_at_the_delimiter_dropping_trailing_empties(tmp_path: Path) -> None:
    path = tmp_path / "payloads.txt"
    path.write_text("alpha\nbeta\n\ngamma\n\n")
    assert read_payloads(path, "\n") == [b"alpha", b"beta", b"", b"gamma"]
    path.write_text("a|b||")
    assert read_payloads(path, r"\|") == [b"a", b"b"]  # a regular expression, as Java's String.split takes it


def test_a_missing_or_empty_payload_file_is_refused(tmp_path: Path) -> None:
    for path in (tmp_path / "missing", tmp_path / "empty"):
        if path.name == "empty":
            path.write_text("")
        with pytest.raises(UsageError, match=r"File does not exist or empty file provided\."):
            read_payloads(path, "\n")

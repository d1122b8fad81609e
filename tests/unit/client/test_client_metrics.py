"""records-lag-max is Kafka's windowed Max: the largest lag over the last two 30 s windows, NaN when empty."""

from __future__ import annotations

import math

from client.metrics import FetchManagerMetrics, WindowedMax
from proto.types import TopicPartition
from tests.fakes import FakeClock


def test_the_max_forgets_windows_older_than_the_samples_kept() -> None:
    stat = WindowedMax(window_ms=1_000, samples=2)
    assert math.isnan(stat.measure(0))
    stat.record(50, 0)
    stat.record(20, 500)
    assert stat.measure(900) == 50
    stat.record(10, 1_000)  # a new window
    assert stat.measure(1_500) == 50
    assert stat.measure(2_000) == 10  # the first window is two windows old
    assert math.isnan(stat.measure(3_000))


def test_records_lag_max_over_partitions_and_each_partitions_lag() -> None:
    clock = FakeClock(0)
    metrics = FetchManagerMetrics(clock)
    metrics.record_partition_lag(TopicPartition("t", 0), 7)
    metrics.record_partition_lag(TopicPartition("t", 1), 3)
    metrics.record_partition_lag(TopicPartition("t", 0), 0)
    assert metrics.snapshot() == {"records-lag-max": 7, "t-0.records-lag": 0.0, "t-1.records-lag": 3.0}
    clock.advance(60_000)
    assert math.isnan(metrics.snapshot()["records-lag-max"])

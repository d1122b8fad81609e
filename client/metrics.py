"""The consumer's fetch metrics with Kafka's names (FetchManagerMetrics), over an injected clock, and the
producer's request totals (producer-metrics).

records-lag-max is Kafka's Max over sampled windows: the most any partition's
position trailed its high watermark, over the current and the previous
metrics.sample.window.ms (30 s, metrics.num.samples 2); NaN when no fetch
returned records in that time, as Kafka reports an empty Max. records-lag is
each partition's latest lag (Kafka's per-partition `{topic}-{partition}.records-lag`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from proto.types import TopicPartition

SAMPLE_WINDOW_MS = 30_000  # metrics.sample.window.ms
NUM_SAMPLES = 2  # metrics.num.samples


class WindowedMax:
    """Kafka's Max SampledStat: one maximum per window of `window_ms`, the last `samples` windows kept."""

    def __init__(self, window_ms: float = SAMPLE_WINDOW_MS, samples: int = NUM_SAMPLES) -> None:
        self._window_ms = window_ms
        self._samples = samples
        self._windows: list[tuple[float, float]] = []  # (window start, maximum), oldest first

    def record(self, value: float, now_ms: float) -> None:
        if self._windows and now_ms - self._windows[-1][0] < self._window_ms:
            start, current = self._windows[-1]
            self._windows[-1] = (start, max(current, value))
        else:
            self._windows.append((now_ms, value))
            del self._windows[:-self._samples]

    def measure(self, now_ms: float) -> float:
        live = [m for start, m in self._windows if now_ms - start < self._window_ms * self._samples]
        return max(live) if live else math.nan


class FetchManagerMetrics:
    def __init__(self, now_ms: Callable[[], float]) -> None:
        self._now_ms = now_ms
        self._lag_max = WindowedMax()
        self._lag: dict[TopicPartition, int] = {}

    def record_partition_lag(self, tp: TopicPartition, lag: int) -> None:
        self._lag[tp] = lag
        self._lag_max.record(lag, self._now_ms())

    def snapshot(self) -> dict[str, float]:
        values = {"records-lag-max": self._lag_max.measure(self._now_ms())}
        values.update({f"{tp.topic}-{tp.partition}.records-lag": float(lag) for tp, lag in sorted(self._lag.items())})
        return values


class SenderMetrics:
    """producer-metrics' request-total and outgoing-byte-total, Kafka's cumulative totals, for the Produce
    requests the sender writes: their bytes over their count is the request size the brokers see, which sets
    the brokers' CPU per MB (about 4-5 ms of a three-broker cluster's CPU per request, docs/testing.md's issue 26
    third pass). Kafka's Selector counts every request; the few metadata and transaction calls are left out."""

    def __init__(self) -> None:
        self._requests = 0
        self._bytes = 0

    def record_produce(self, size: int) -> None:
        self._requests += 1
        self._bytes += size

    def snapshot(self) -> dict[str, float]:
        return {"request-total": float(self._requests), "outgoing-byte-total": float(self._bytes)}

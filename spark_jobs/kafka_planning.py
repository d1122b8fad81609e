"""Which offsets a batch or micro-batch reads: plain functions, no Spark and no client.

The rules are the JVM connector's: Spark's KafkaMicroBatchStream (rateLimit for `maxOffsetsPerTrigger`,
the data loss checks of planning), KafkaOffsetRangeCalculator (`minPartitions`) and KafkaOffsetReader
(specific offsets must name every partition; -2 earliest, -1 latest). A position is `(topic, partition)`;
offsets travel through Spark's checkpoint as the connector's JSON, `{topic: {"partition": offset}}`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from spark_jobs.kafka_options import EARLIEST, LATEST, OffsetSpec

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]


class DataLossError(RuntimeError):
    """Offsets the query planned to read are gone (failOnDataLoss=true); the message says which."""


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [from_offset, until_offset) of one topic-partition: what one Spark task reads."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The connector's offset JSON: topics, then partitions as strings (JSON keys), in order."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(offsets: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


def resolve_offsets(spec: OffsetSpec, partitions: Sequence[TopicPartition], earliest: Mapping[TopicPartition, int],
                    latest: Mapping[TopicPartition, int], name: str) -> PartitionOffsets:
    """Concrete offsets for every partition from `earliest`, `latest` or specific offsets with -2/-1 in them."""
    if spec == "earliest":
        return {tp: earliest[tp] for tp in partitions}
    if spec == "latest":
        return {tp: latest[tp] for tp in partitions}
    if set(spec) != set(partitions):
        raise ValueError(f"If {name} contains specific offsets, you must specify all TopicPartitions.\n"
                         f"Use -1 for latest, -2 for earliest.\nSpecified: {sorted(spec)}"
                         f" Assigned: {sorted(partitions)}")
    resolved = {EARLIEST: earliest, LATEST: latest}
    return {tp: resolved[o][tp] if o in resolved else o for tp, o in spec.items()}


def offset_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                  new_partition_start: Mapping[TopicPartition, int]) -> tuple[list[OffsetRange], list[str]]:
    """The ranges from `start` to `end`, and the data losses planning sees (KafkaMicroBatchStream.planInputPartitions).

    A partition in `end` but not `start` appeared since the last batch: it is read from its earliest offset
    (`new_partition_start`), and a loss if that is not 0. A partition in `start` but not `end` was deleted.
    An end below its start means the partition's offsets went back (a topic deleted and created again).
    """
    losses = []
    for tp, offset in sorted(new_partition_start.items()):
        if offset != 0:
            losses.append(f"Added partition {_name(tp)} starts from {offset} instead of 0."
                          " Some data may have been missed")
    gone = sorted(set(start) - set(end))
    if gone:
        losses.append(f"{', '.join(_name(tp) for tp in gone)} are gone. Some data may have been missed")
    ranges = []
    for tp, until in sorted(end.items()):
        begin = start[tp] if tp in start else new_partition_start.get(tp)
        if begin is None:
            losses.append(f"Cannot find earliest offsets of {_name(tp)}. Some data may have been missed")
            continue
        if until < begin:
            losses.append(f"Partition {_name(tp)}'s offset was changed from {begin} to {until},"
                          " some data may have been missed")
            continue
        ranges.append(OffsetRange(tp[0], tp[1], begin, until))
    return ranges, losses


def split_ranges(ranges: Sequence[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """One task per non-empty range; with `minPartitions` above their number, large ranges split in equal parts.

    KafkaOffsetRangeCalculator.getRanges: a range gets round(size / total * minPartitions) parts, at least one.
    """
    non_empty = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(non_empty) >= min_partitions:
        return non_empty
    total = sum(r.size for r in non_empty)
    split: list[OffsetRange] = []
    for r in non_empty:
        parts = max(round(r.size / total * min_partitions), 1)
        bounds = [r.from_offset + r.size * i // parts for i in range(parts)] + [r.until_offset]
        split.extend(OffsetRange(r.topic, r.partition, a, b) for a, b in itertools.pairwise(bounds)
                     if b > a)
    return split


def rate_limit(limit: int, start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               new_partition_start: Mapping[TopicPartition, int]) -> PartitionOffsets:
    """End offsets that read at most about `limit` records (`maxOffsetsPerTrigger`), shared by each partition's lag.

    KafkaMicroBatchStream.rateLimit: each partition with records gets limit * its share of the backlog, rounded
    down, or up when below one so a small partition is never starved; never past its latest offset.
    """
    sizes = {}
    for tp, end in latest.items():
        begin = start.get(tp, new_partition_start.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    limited = {}
    for tp, end in latest.items():
        if tp not in sizes:
            limited[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        limited[tp] = min(end, start.get(tp, new_partition_start.get(tp, 0)) + share)
    return limited


def never_back(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> PartitionOffsets:
    """Latest offsets, but none below where the query already is.

    A new leader may answer a high watermark (or last stable offset) below the one its predecessor answered
    until its followers fetch again; planning to that would read nothing and report a loss that is not one.
    Records really gone are found by the reader, which compares the log start offset with its range.
    """
    return {tp: max(end, start.get(tp, end)) for tp, end in latest.items()}


def cap(latest: Mapping[TopicPartition, int], bound: Mapping[TopicPartition, int]) -> PartitionOffsets:
    """Latest offsets no further than `bound` (Trigger.AvailableNow: what was there when the query started)."""
    return {tp: min(end, bound[tp]) for tp, end in latest.items() if tp in bound}


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"

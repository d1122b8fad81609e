"""DescribeLogDirs' answer (Kafka's ReplicaManager.describeLogDirs): per configured log dir, its replicas' sizes
and how far each is behind its high watermark, the dir's capacity (KIP-827), or KAFKA_STORAGE_ERROR for a dir
gone offline."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from broker.log.log import Log
from proto.errors import ErrorCode
from proto.types import TopicPartition

# Kafka's DescribeLogDirsResponse.INVALID_OFFSET_LAG: a log this broker hosts no partition for.
INVALID_OFFSET_LAG = -1
UNKNOWN_BYTES = -1


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    partition: int
    size: int
    offset_lag: int
    is_future: bool = False  # no replica moves between dirs here (AlterReplicaLogDirs)


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    log_dir: str
    error: ErrorCode
    topics: dict[str, list[ReplicaInfo]] = field(default_factory=dict)
    total_bytes: int = UNKNOWN_BYTES
    usable_bytes: int = UNKNOWN_BYTES


def describe_log_dirs(log_dirs: Sequence[Path], live_log_dirs: Collection[Path], logs: Mapping[TopicPartition, Log],
                      high_watermark: Callable[[TopicPartition], int | None],
                      partitions: Collection[TopicPartition] | None) -> list[LogDirInfo]:
    """Every configured dir; in a live one, each topic with a log there, listing the replicas asked for (None:
    all). As Kafka, a topic asked for none of whose partitions are listed still appears, with no partitions."""
    described = []
    for log_dir in log_dirs:
        if log_dir not in live_log_dirs:
            described.append(LogDirInfo(str(log_dir), ErrorCode.KAFKA_STORAGE_ERROR))
            continue
        topics: dict[str, list[ReplicaInfo]] = {}
        for tp, log in sorted(logs.items()):
            if log.dir.parent != log_dir:
                continue
            replicas = topics.setdefault(tp.topic, [])
            if partitions is None or tp in partitions:
                hw = high_watermark(tp)
                lag = INVALID_OFFSET_LAG if hw is None else max(hw - log.log_end_offset, 0)
                replicas.append(ReplicaInfo(tp.partition, log.size_in_bytes, lag))
        try:
            usage = shutil.disk_usage(log_dir)
        except OSError:
            described.append(LogDirInfo(str(log_dir), ErrorCode.NONE, topics))
        else:
            # FileStore's getTotalSpace and getUsableSpace: the usable part leaves out root's reserve.
            described.append(LogDirInfo(str(log_dir), ErrorCode.NONE, topics, usage.total, usage.free))
    return described

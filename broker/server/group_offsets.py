"""Committed consumer offsets kept in ZooKeeper, as Kafka 0.8 kept them.

There is no group coordinator and no __consumer_offsets topic: an
OffsetCommit writes /consumers/<group>/offsets/<topic>/<partition>, so any
broker can answer OffsetFetch for any group. Kafka 0.8 stored the bare offset
there and dropped the commit's metadata string; here the znode holds both
(zk.paths.encode_consumer_offset) and a bare offset still reads back, with
empty metadata. The metadata is checked against offset.metadata.max.bytes, as
Kafka checks it. Blocking ZooKeeper I/O: run off the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.server.metadata_cache import MetadataCache
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from zk.client import KafkaZkClient
from zk.paths import ConsumerOffset, validate_group_id, validate_topic

OFFSET_METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes default
INVALID_OFFSET = -1


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    topic_partition: TopicPartition
    offset: int
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    topic_partition: TopicPartition
    offset: int
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


class ZkGroupOffsets:
    def __init__(self, zk: KafkaZkClient, metadata_cache: MetadataCache) -> None:
        self._zk = zk
        self._metadata_cache = metadata_cache

    def commit(self, group_id: str, commits: Sequence[OffsetCommit]) -> list[tuple[TopicPartition, ErrorCode]]:
        try:
            validate_group_id(group_id)
        except KafkaError as e:
            return [(c.topic_partition, e.code) for c in commits]
        errors: dict[TopicPartition, ErrorCode] = {}
        offsets: dict[TopicPartition, ConsumerOffset] = {}
        for commit in commits:
            tp = commit.topic_partition
            if not self._metadata_cache.contains(tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(commit.metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                offsets[tp] = ConsumerOffset(commit.offset, commit.metadata)
                errors[tp] = ErrorCode.NONE
        self._zk.set_consumer_offsets(group_id, offsets)
        return [(c.topic_partition, errors[c.topic_partition]) for c in commits]

    def fetch(self, group_id: str, partitions: Sequence[TopicPartition] | None) -> list[CommittedOffset]:
        """The group's offsets for `partitions`, or all it committed if None; INVALID_OFFSET where none."""
        validate_group_id(group_id)
        if partitions is None:
            committed = self._zk.get_consumer_offsets(group_id)
            return [CommittedOffset(tp, c.offset, c.metadata) for tp, c in sorted(committed.items())]
        # A topic name that cannot exist cannot have a znode either: answer it without asking.
        valid = [tp for tp in partitions if _is_valid_topic(tp.topic)]
        committed = self._zk.get_consumer_offsets(group_id, valid)
        none = ConsumerOffset(INVALID_OFFSET)
        return [
            CommittedOffset(tp, *committed.get(tp, none)) if _is_valid_topic(tp.topic)
            else CommittedOffset(tp, INVALID_OFFSET, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            for tp in partitions
        ]


def _is_valid_topic(topic: str) -> bool:
    try:
        validate_topic(topic)
    except KafkaError:
        return False
    return True

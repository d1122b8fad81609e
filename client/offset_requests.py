"""OffsetCommit and OffsetFetch requests and answers, built and read once for the consumer's coordinator
(client/consumer_coordinator.py) and the admin client's group calls (client/group_admin.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from client.structs import OffsetAndMetadata
from proto import minibroker_pb2 as pb
from proto.errors import error_for
from proto.types import TopicPartition


def offset_commit_request(group_id: str, generation_id: int, member_id: str,
                          offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> pb.OffsetCommitRequest:
    """generation -1 and member "": a standalone commit."""
    request = pb.OffsetCommitRequest(group_id=group_id, generation_id=generation_id, member_id=member_id)
    topics: dict[str, pb.OffsetCommitRequest.OffsetCommitRequestTopic] = {}
    for tp, om in offsets.items():
        if tp.topic not in topics:
            topics[tp.topic] = request.topics.add(name=tp.topic)
        topics[tp.topic].partitions.add(partition_index=tp.partition, committed_offset=om.offset,
                                        committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata)
    return request


def commit_errors(response: pb.OffsetCommitResponse) -> list[tuple[TopicPartition, int]]:
    """The partitions the commit failed for, with their error codes."""
    return [(TopicPartition(t.name, p.partition_index), p.error_code)
            for t in response.topics for p in t.partitions if p.error_code]


def offset_fetch_request(group_id: str, partitions: Iterable[TopicPartition] | None,
                         require_stable: bool = False) -> pb.OffsetFetchRequest:
    """None: every partition the group committed."""
    request = pb.OffsetFetchRequest(group_id=group_id, require_stable=require_stable)
    by_topic: dict[str, list[int]] = {}
    for tp in partitions or ():
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    for topic, parts in by_topic.items():
        request.topics.add(name=topic, partition_indexes=parts)
    return request


def committed_offsets(response: pb.OffsetFetchResponse, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
    """The committed offsets an OffsetFetch answered (partitions without one left out); an error is raised."""
    if response.error_code:
        raise error_for(response.error_code, f"fetching the committed offsets of group {group_id!r}")
    found: dict[TopicPartition, OffsetAndMetadata] = {}
    for t in response.topics:
        for p in t.partitions:
            if p.error_code:
                raise error_for(p.error_code, f"fetching the committed offset of {t.name}-{p.partition_index}")
            if p.committed_offset >= 0:
                found[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, p.metadata, p.committed_leader_epoch)
    return found

"""Fetch 4-11 for consumers: the same ReplicaManager.fetchMessages (purgatory long poll, KIP-320 epoch
fencing) as the gRPC door, and a response framed by hand around the log's file slices so the connection can
sendfile them (the record bytes never pass through Python unless the response is small; then they are read
into it on a disk thread, never on the event loop).

No fetch sessions (KIP-227): every response has session_id 0, which tells the client none was created, so it
keeps sending full fetches; preferred_read_replica (KIP-392) is always -1.
"""

from __future__ import annotations

import struct
from typing import Any

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, to_millis
from broker.api.operations import group_by_topic
from broker.log.file_slice import FileSlice
from broker.replication.delayed_fetch import LogReadResult, PartitionFetchInfo
from proto.errors import ErrorCode
from proto.types import TopicPartition

# Responses whose records are this small are read into the response (one write) rather than sendfile'd:
# below it, a sendfile per slice costs more than the copy.
SENDFILE_MIN_BYTES = 64 * 1024
NO_PREFERRED_READ_REPLICA = -1
# zstd came with Fetch v10 (KIP-110).
ZSTD_MIN_FETCH_VERSION = 10
NO_SESSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihq")  # partition_index, error_code, high_watermark
_I64 = struct.Struct(">q")
_ABORTED_TXN = struct.Struct(">qq")  # producer_id, first_offset


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def frame_fetch_response(version: int, error: ErrorCode, results: list[tuple[TopicPartition, LogReadResult]]
                         ) -> Reply:
    """FetchResponse v4-11 as byte strings with the records' file slices in place."""
    parts: list[bytes | FileSlice] = []
    head = bytearray(_I32.pack(0))  # throttle_time_ms
    if version >= 7:
        head += _I16.pack(error) + _I32.pack(NO_SESSION)
    grouped = group_by_topic(results)
    head += _I32.pack(len(grouped))
    inline = sum(r.size for _, r in results) < SENDFILE_MIN_BYTES
    for topic, partitions in grouped.items():
        head += _string(topic) + _I32.pack(len(partitions))
        for index, r in partitions:
            head += _PARTITION_HEAD.pack(index, r.error, r.high_watermark)
            head += _I64.pack(r.last_stable_offset)
            if version >= 5:
                head += _I64.pack(r.log_start_offset)
            # Null for READ_UNCOMMITTED, as Kafka sends it; READ_COMMITTED: (producer_id, first_offset) each.
            aborted = r.aborted_transactions
            head += _I32.pack(-1 if aborted is None else len(aborted))
            for txn in aborted or ():
                head += _ABORTED_TXN.pack(txn.producer_id, txn.first_offset)
            if version >= 11:
                head += _I32.pack(NO_PREFERRED_READ_REPLICA)
            records = r.records if r.records is not None and r.size else None
            head += _I32.pack(0 if records is None else records.size)
            if records is not None:
                if inline:
                    data = records.read()
                    if len(data) != records.size:
                        raise ConnectionError(f"{topic}-{index}: segment truncated under the read")
                    head += data
                else:
                    parts.append(bytes(head))
                    parts.append(records)
                    head = bytearray()
    if head:
        parts.append(bytes(head))
    return Reply(parts, flexible=False)


async def handle_fetch(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    requested = [
        # log_start_offset is a follower's (v5+) and current_leader_epoch KIP-320's (v9+): -1 where absent.
        PartitionFetchInfo(TopicPartition(t.topic, p.partition), p.fetch_offset, getattr(p, "log_start_offset", -1),
                           max(p.partition_max_bytes, 0), getattr(p, "current_leader_epoch", -1))
        for t in request.topics for p in t.partitions
    ]
    if request.replica_id >= 0 and not context.operations.authorize_follower(context.session):
        # KafkaApis.handleFetchRequest: a fetch from a follower needs CLUSTER_ACTION on the cluster.
        return frame_fetch_response(header.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [
            (p.topic_partition, LogReadResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)) for p in requested])
    if getattr(request, "session_id", NO_SESSION) != NO_SESSION:
        return frame_fetch_response(header.api_version, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, [])
    results = await context.operations.fetch(context.session, request.replica_id, to_millis(request.max_wait),
                                             request.min_bytes, request.max_bytes, requested,
                                             request.isolation_level)
    if header.api_version < ZSTD_MIN_FETCH_VERSION:
        results = [(tp, _refuse_zstd(context, tp, result)) for tp, result in results]
    if reads_records(results):
        # The records are copied into the response: a read of the segments, so on a disk thread.
        return await context.operations.pools.disk(frame_fetch_response, header.api_version, ErrorCode.NONE,
                                                   results)
    return frame_fetch_response(header.api_version, ErrorCode.NONE, results)


def _refuse_zstd(context: KafkaContext, tp: TopicPartition, result: LogReadResult) -> LogReadResult:
    """Kafka's maybeConvertFetchedData: a partition of a topic whose compression.type is zstd is refused to a
    Fetch older than v10, whose client cannot decode it."""
    config = context.operations.replica_manager.get_log_config(tp)
    if result.error is ErrorCode.NONE and config is not None and config.compression_type == "zstd":
        return LogReadResult(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
    return result


def reads_records(results: list[tuple[TopicPartition, LogReadResult]]) -> bool:
    """Whether framing these results reads record bytes (some, but fewer than sendfile is worth)."""
    return 0 < sum(r.size for _, r in results) < SENDFILE_MIN_BYTES

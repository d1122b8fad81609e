"""DescribeReplicaState's answer (the project's own request, for `minibroker console`): what this broker's
replicas hold and what their leaders know of their followers, and the process's recent replication events.

Plain functions from the partitions' snapshots (Partition.replica_state) and the
event ring (common/event_ring.py) to the response: the handler in grpc_apis.py
decides which topics the caller may Describe.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.replication.partition import ReplicaState
from common.event_ring import Event, event_messages
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode


def replica_state_response(broker_id: int, now_ms: int, replica_lag_time_max_ms: int,
                           states: Iterable[ReplicaState], events: Iterable[Event],
                           topics: set[str]) -> pb.DescribeReplicaStateResponse:
    """The response for the partitions and events of `topics` (the caller's describable ones); events of no one
    partition (a topic of "") go to anyone."""
    response = pb.DescribeReplicaStateResponse(error_code=ErrorCode.NONE, broker_id=broker_id, now_ms=now_ms,
                                               replica_lag_time_max_ms=replica_lag_time_max_ms)
    for state in sorted(states, key=lambda s: s.topic_partition):
        if state.topic_partition.topic not in topics:
            continue
        out = response.partitions.add(
            topic=state.topic_partition.topic, partition=state.topic_partition.partition, leader=state.leader,
            leader_epoch=state.leader_epoch, log_start_offset=state.log_start_offset,
            log_end_offset=state.log_end_offset, high_watermark=state.high_watermark,
            last_stable_offset=state.last_stable_offset, isr=state.isr)
        for f in state.followers:
            out.followers.add(broker_id=f.broker_id, log_end_offset=f.log_end_offset,
                              log_start_offset=f.log_start_offset, last_caught_up_time_ms=f.last_caught_up_time_ms,
                              last_fetch_time_ms=f.last_fetch_time_ms)
        for entry in state.epoch_entries:
            out.epoch_entries.add(epoch=entry.epoch, start_offset=entry.start_offset)
    response.events.extend(event_messages(e for e in events if not e.topic or e.topic in topics))
    return response


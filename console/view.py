"""The console's picture of replication, from what the brokers answered: plain functions, no I/O.

Input: one Metadata answer (the controller's view: leader, epoch, replicas, ISR,
offline replicas) and each broker's DescribeReplicaState (its own replicas' log
start, LEO and high watermark; for the partitions it leads, each follower's LEO
and lastCaughtUpTimeMs as the leader learnt them). Output: JSON-ready dicts the
page draws, one bar per replica on the partition's common offset axis.

A replica's state on the page:
  in-sync  in the ISR and caught up within half of replica.lag.time.max.ms (a leader: answering)
  late     in the ISR, but not caught up for half of replica.lag.time.max.ms or more, or not answering
           (paused): the leader drops it once replica.lag.time.max.ms passes
  out      not in the ISR
  offline  its broker is not in the cluster's metadata (dead: its ZooKeeper registration is gone)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from client.metadata import ClusterMetadata
from client.structs import format_address
from proto import minibroker_pb2 as pb
from proto.types import EndPoint, TopicPartition

PartitionStates = Mapping[tuple[str, int], Mapping[int, pb.DescribeReplicaStateResponse.PartitionState]]

IN_SYNC = "in-sync"
LATE = "late"
OUT = "out"
OFFLINE = "offline"


def index_replica_states(answers: Mapping[int, pb.DescribeReplicaStateResponse]
                         ) -> dict[tuple[str, int], dict[int, pb.DescribeReplicaStateResponse.PartitionState]]:
    """(topic, partition) -> broker id -> that broker's replica state."""
    states: dict[tuple[str, int], dict[int, pb.DescribeReplicaStateResponse.PartitionState]] = {}
    for broker_id, answer in answers.items():
        for p in answer.partitions:
            states.setdefault((p.topic, p.partition), {})[broker_id] = p
    return states


def replica_state(leader: bool, in_isr: bool, registered: bool, answering: bool, caught_up_ago_ms: int | None,
                  lag_max_ms: int) -> str:
    """`registered`: the broker is in the cluster's metadata (alive in ZooKeeper); `answering`: it described its
    replica this time. A registered follower that stopped answering while still in the ISR is late: its leader
    drops it once replica.lag.time.max.ms passes. A leader that stopped answering is late likewise."""
    if not registered:
        return OFFLINE
    if leader:
        return IN_SYNC if answering else LATE
    if not in_isr:
        return OUT
    if not answering or (caught_up_ago_ms is not None and caught_up_ago_ms * 2 >= lag_max_ms):
        return LATE
    return IN_SYNC


def partition_view(topic: str, partition: int, metadata: ClusterMetadata, states: PartitionStates,
                   answers: Mapping[int, pb.DescribeReplicaStateResponse],
                   sizes: Mapping[tuple[str, int], Mapping[int, int]] | None = None) -> dict[str, Any]:
    """One partition: its leader, epoch and ISR (the leader's own if it answered, else the metadata's) and a bar
    per assigned replica, with its bytes on disk where DescribeLogDirs told them (`sizes`)."""
    meta = metadata.partition(TopicPartition(topic, partition))
    replicas = meta.replicas if meta is not None else ()
    by_broker = states.get((topic, partition), {})
    leader_id = meta.leader if meta is not None else -1
    leader_state = by_broker.get(leader_id)
    leader_answer = answers.get(leader_id)
    isr = tuple(leader_state.isr) if leader_state is not None and leader_state.isr else (
        meta.isr if meta is not None else ())
    lag_max_ms = leader_answer.replica_lag_time_max_ms if leader_answer is not None else 0
    followers = {f.broker_id: f for f in leader_state.followers} if leader_state is not None else {}
    replica_bytes = (sizes or {}).get((topic, partition), {})
    bars = []
    for broker_id in replicas:
        own = by_broker.get(broker_id)
        known = followers.get(broker_id)
        answering = own is not None
        bar: dict[str, Any] = {"broker": broker_id, "leader": broker_id == leader_id, "in_isr": broker_id in isr,
                               "answering": answering}
        if broker_id in replica_bytes:
            bar["size_bytes"] = replica_bytes[broker_id]
        if own is not None:
            bar.update(log_start_offset=own.log_start_offset, log_end_offset=own.log_end_offset,
                       high_watermark=own.high_watermark, last_stable_offset=own.last_stable_offset,
                       leader_epoch=own.leader_epoch)
        caught_up_ago = None
        if broker_id != leader_id:
            if known is not None and leader_answer is not None:
                caught_up_ago = leader_answer.now_ms - known.last_caught_up_time_ms \
                    if known.last_caught_up_time_ms > 0 else None
                bar["leader_view_log_end_offset"] = known.log_end_offset
                bar["caught_up_ago_ms"] = caught_up_ago
            # A paused follower does not answer, but its leader still knows where it was.
            if own is None and known is not None and known.log_end_offset >= 0:
                bar["log_end_offset"] = known.log_end_offset
                bar["log_start_offset"] = known.log_start_offset
            if leader_state is not None and "log_end_offset" in bar and bar["log_end_offset"] >= 0:
                bar["lag_offsets"] = leader_state.log_end_offset - bar["log_end_offset"]
        bar["state"] = replica_state(broker_id == leader_id, broker_id in isr, broker_id in metadata.brokers,
                                     answering, caught_up_ago, lag_max_ms)
        bars.append(bar)
    return {
        "topic": topic, "partition": partition, "leader": leader_id,
        "leader_epoch": leader_state.leader_epoch if leader_state is not None else (
            meta.leader_epoch if meta is not None else -1),
        "replicas": list(replicas), "isr": list(isr),
        "offline_replicas": list(meta.offline_replicas) if meta is not None else [],
        "high_watermark": leader_state.high_watermark if leader_state is not None else None,
        "last_stable_offset": leader_state.last_stable_offset if leader_state is not None else None,
        "log_end_offset": leader_state.log_end_offset if leader_state is not None else None,
        "replica_lag_time_max_ms": lag_max_ms,
        "epochs": [[e.epoch, e.start_offset] for e in leader_state.epoch_entries] if leader_state is not None else [],
        "bars": bars,
    }


def partition_views(metadata: ClusterMetadata, answers: Mapping[int, pb.DescribeReplicaStateResponse],
                    topics: Iterable[str], sizes: Mapping[tuple[str, int], Mapping[int, int]] | None = None
                    ) -> list[dict[str, Any]]:
    states = index_replica_states(answers)
    return [partition_view(tp.topic, tp.partition, metadata, states, answers, sizes)
            for topic in sorted(topics) for tp in metadata.topic_partitions(topic) or ()]


def cluster_summary(metadata: ClusterMetadata, answers: Mapping[int, pb.DescribeReplicaStateResponse],
                    partitions: Iterable[Mapping[str, Any]],
                    listeners: Mapping[int, Sequence[EndPoint]] | None = None) -> dict[str, Any]:
    """Brokers (with the listeners each advertises, where known), the controller, and the offline and
    under-replicated partition counts of `partitions` (views: their ISR is the leader's own, ahead of the metadata
    the controller propagates)."""
    views = list(partitions)
    return {
        "cluster_id": metadata.cluster_id, "controller_id": metadata.controller_id,
        "brokers": [{"id": b.node_id, "address": b.address, "rack": b.rack, "answering": b.node_id in answers,
                     "listeners": [f"{e.listener_name}://{format_address(e.host, e.port)}"
                                   for e in (listeners or {}).get(b.node_id, ())]}
                    for b in sorted(metadata.brokers.values())],
        "offline_partitions": sum(1 for v in views if v["leader"] < 0),
        "under_replicated_partitions": sum(1 for v in views if v["leader"] >= 0 and len(v["isr"]) < len(v["replicas"])),
    }


def topic_summaries(metadata: ClusterMetadata, answers: Mapping[int, pb.DescribeReplicaStateResponse],
                    configs: Mapping[str, Mapping[str, str]],
                    sizes: Mapping[tuple[str, int], Mapping[int, int]] | None = None) -> list[dict[str, Any]]:
    """Each topic: partitions, replication factor, records held (LEO - log start over the leaders), bytes on
    disk over all its replicas as DescribeLogDirs told them (None when the console cannot ask it), the configs
    set on it (not the defaults)."""
    states = index_replica_states(answers)
    out = []
    for topic in sorted(metadata.topics):
        tps = metadata.topic_partitions(topic) or ()
        records = 0
        for tp in tps:
            p = metadata.partition(tp)
            leader = states.get((topic, tp.partition), {}).get(p.leader) if p is not None else None
            if leader is not None:
                records += leader.log_end_offset - leader.log_start_offset
        first = metadata.partition(tps[0]) if tps else None
        out.append({"name": topic, "internal": topic in metadata.internal_topics, "partitions": len(tps),
                    "replication_factor": len(first.replicas) if first is not None else 0, "records": records,
                    "bytes": None if sizes is None else sum(
                        sum(sizes.get((topic, tp.partition), {}).values()) for tp in tps),
                    "configs": dict(configs.get(topic, {}))})
    return out


def group_lag(committed: Mapping[tuple[str, int], int], states: PartitionStates,
              metadata: ClusterMetadata) -> list[dict[str, Any]]:
    """Per partition a group committed: its offset, the leader's high watermark and the lag between them (as
    kafka-consumer-groups.sh's LAG: end offset for a read_uncommitted consumer minus the committed offset)."""
    rows = []
    for (topic, partition), offset in sorted(committed.items()):
        p = metadata.partition(TopicPartition(topic, partition))
        leader = states.get((topic, partition), {}).get(p.leader) if p is not None else None
        hw = leader.high_watermark if leader is not None else None
        rows.append({"topic": topic, "partition": partition, "committed": offset, "high_watermark": hw,
                     "lag": None if hw is None or offset < 0 else max(hw - offset, 0)})
    return rows

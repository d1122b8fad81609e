"""The leader's ISR rules, as pure functions (Kafka 2.x's Partition.getOutOfSyncReplicas / isFollowerInSync).

Nothing here reads a clock or touches ZooKeeper: the caller passes the
follower's state and the time, so every rule is unit-testable as it stands.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker.replication.replica import Replica


def is_follower_out_of_sync(replica: Replica, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
    """Kafka's isFollowerOutOfSync: not caught up to the leader's log end for more than replica.lag.time.max.ms.

    lastCaughtUpTimeMs covers both a stuck follower (no fetch at all) and a
    slow one (fetching, but never reaching the log end). A follower already at
    the leader's log end is in sync however long ago it last fetched: an idle
    partition must not shrink its ISR.
    """
    return replica.log_end_offset != leader_end_offset and now_ms - replica.last_caught_up_time_ms > max_lag_ms


def out_of_sync_replicas(isr: Iterable[int], local_broker_id: int, replicas: Mapping[int, Replica],
                         leader_end_offset: int, now_ms: int, max_lag_ms: int) -> frozenset[int]:
    """The followers of `isr` to drop (Kafka's getOutOfSyncReplicas); the leader itself never is."""
    return frozenset(
        broker_id for broker_id in isr
        if broker_id != local_broker_id and broker_id in replicas
        and is_follower_out_of_sync(replicas[broker_id], leader_end_offset, now_ms, max_lag_ms)
    )


def is_follower_in_sync(follower_fetch_offset: int, high_watermark: int, leader_epoch_start_offset: int | None) -> bool:
    """May a follower outside the ISR rejoin it (Kafka's isFollowerInSync, with KAFKA-7128)?

    It must have reached the high watermark, and also the start of the current
    leader epoch: a follower below it may still hold records of an older epoch
    that this leader never had, which its next OffsetsForLeaderEpoch would make
    it truncate. Admitted before that, it could be elected and serve them.
    """
    return (leader_epoch_start_offset is not None and follower_fetch_offset >= high_watermark
            and follower_fetch_offset >= leader_epoch_start_offset)


def describe_isr(isr: Iterable[int]) -> str:
    """An ISR as Kafka's log lines print it: `1,2,3`."""
    return ",".join(str(broker_id) for broker_id in sorted(isr))

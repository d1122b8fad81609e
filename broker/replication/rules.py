"""Every rule that decides the ISR and the high watermark, as plain functions over plain state.

Kafka 2.x keeps these in kafka.cluster.Partition and Replica (getOutOfSyncReplicas,
isFollowerInSync, updateFetchState, maybeIncrementLeaderHW, the min.insync.replicas
checks); here Partition and Replica hold the state and the lock and call these.
Nothing here reads a clock, takes a lock or touches ZooKeeper: the caller passes
the state and the time, so every rule is unit-testable as it stands.

- lastCaughtUpTimeMs after a follower's fetch ........ caught_up_time_after_fetch
- ISR shrink (replica.lag.time.max.ms) ................ is_follower_out_of_sync, out_of_sync_replicas
- which leaders the shrink check must look at ......... is_follower_behind, any_isr_follower_behind
- ISR expand (the HW and the epoch start, KAFKA-7128) . is_follower_in_sync
- the ISR the HW respects while a write is pending .... maximal_isr
- leader HW = min LEO over the ISR, only forward ...... leader_high_watermark
- follower HW = min(own LEO, leader HW) ............... follower_high_watermark
- the acks a produce may ask for (both doors) ......... is_valid_required_acks
- min.insync.replicas before and after an append ...... acks_all_append_allowed, acks_all_completion
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from broker.log.log import LogOffsetMetadata
from broker.replication.offset_metadata import position_known
from proto.errors import ErrorCode

if TYPE_CHECKING:
    # Replica calls caught_up_time_after_fetch: its type is only named here.
    from broker.replication.replica import Replica


def caught_up_time_after_fetch(last_caught_up_time_ms: int, fetch_offset: int, fetch_time_ms: int,
                               leader_end_offset: int, last_fetch_leader_end_offset: int,
                               last_fetch_time_ms: int) -> int:
    """Kafka's Replica.updateFetchState: a follower's lastCaughtUpTimeMs after a fetch at `fetch_offset`.

    A fetch at the leader's log end means caught up now; a fetch at or past the
    leader's log end at the time of the previous fetch means the follower was
    caught up then, even if the leader has appended since. It never goes back.
    """
    if fetch_offset >= leader_end_offset:
        return max(last_caught_up_time_ms, fetch_time_ms)
    if fetch_offset >= last_fetch_leader_end_offset:
        return max(last_caught_up_time_ms, last_fetch_time_ms)
    return last_caught_up_time_ms


def is_follower_behind(replica: Replica, leader_end_offset: int) -> bool:
    """Kafka's Replica.isCaughtUp, first half: a follower whose log end is not the leader's. Only such a follower
    can ever be out of sync; one at the leader's log end is caught up whenever it last fetched."""
    return replica.log_end_offset != leader_end_offset


def any_isr_follower_behind(isr: Iterable[int], local_broker_id: int, replicas: Mapping[int, Replica],
                            leader_end_offset: int) -> bool:
    """Whether the ISR shrink could ever drop a member of `isr` without a change to it or to the leader's log end:
    the isr-expiration task looks only at leaders for which this holds (issue 27)."""
    return any(broker_id != local_broker_id and broker_id in replicas
               and is_follower_behind(replicas[broker_id], leader_end_offset) for broker_id in isr)


def is_follower_out_of_sync(replica: Replica, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
    """Kafka's isFollowerOutOfSync: not caught up to the leader's log end for more than replica.lag.time.max.ms.

    lastCaughtUpTimeMs covers both a stuck follower (no fetch at all) and a
    slow one (fetching, but never reaching the log end). A follower already at
    the leader's log end is in sync however long ago it last fetched: an idle
    partition must not shrink its ISR.
    """
    return is_follower_behind(replica, leader_end_offset) and now_ms - replica.last_caught_up_time_ms > max_lag_ms


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


def maximal_isr(isr: frozenset[int], pending_isr: frozenset[int] | None) -> frozenset[int]:
    """Kafka 2.7's maximal ISR: the current ISR plus any member an ISR write in flight adds, so no record
    counts as committed by a replica set that ZooKeeper might not hold."""
    return isr if pending_isr is None else isr | pending_isr


def leader_high_watermark(old_hw: LogOffsetMetadata, leader_end: LogOffsetMetadata,
                          replicas: Iterable[Replica], isr: frozenset[int]) -> LogOffsetMetadata | None:
    """Kafka's maybeIncrementLeaderHW: the new HW, min LEO over `isr` (the leader's own LEO included), or None
    when it stays. It only moves forward, or learns its place in the log at the same offset."""
    new_hw = leader_end
    for replica in replicas:
        if replica.broker_id in isr and replica.log_end_offset < new_hw.message_offset:
            new_hw = replica.log_end_offset_metadata
    if new_hw.message_offset > old_hw.message_offset or (
        new_hw.message_offset == old_hw.message_offset and not position_known(old_hw) and position_known(new_hw)
    ):
        return new_hw
    return None


def follower_high_watermark(leader_high_watermark: int, log_end_offset: int) -> int:
    """A follower's HW after an append: the leader's, but never past what the follower holds."""
    return min(leader_high_watermark, log_end_offset)


VALID_ACKS = (-1, 0, 1)


def is_valid_required_acks(required_acks: int) -> bool:
    """Kafka's ReplicaManager.isValidRequiredAcks: acks=all (-1), none (0) or the leader (1)."""
    return required_acks in VALID_ACKS


def acks_all_append_allowed(required_acks: int, isr_size: int, min_insync_replicas: int) -> bool:
    """An acks=all write the ISR cannot make safe must not land at all (Kafka: NOT_ENOUGH_REPLICAS)."""
    return required_acks != -1 or isr_size >= min_insync_replicas


def acks_all_completion(high_watermark: int, required_offset: int, isr_size: int,
                        min_insync_replicas: int) -> tuple[bool, ErrorCode]:
    """Kafka's checkEnoughReplicasReachOffset for a leader: (done, error) of a waiting acks=all produce.

    Done once the HW reaches `required_offset`; the ISR may have shrunk below
    min.insync.replicas after the append: the records are in, but not as safe
    as asked (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    """
    if high_watermark < required_offset:
        return False, ErrorCode.NONE
    if isr_size < min_insync_replicas:
        return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return True, ErrorCode.NONE


def describe_isr(isr: Iterable[int]) -> str:
    """An ISR as Kafka's log lines print it: `1,2,3`."""
    return ",".join(str(broker_id) for broker_id in sorted(isr))

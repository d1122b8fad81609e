"""Where a follower truncates its log, as pure decisions (Kafka 2.x's AbstractFetcherThread
getOffsetTruncationState and fetchOffsetAndTruncate).

With leader epochs (KIP-101) a follower never trusts its own high watermark
to decide what to keep: it asks the leader where its latest epoch ended and
keeps what both logs agree on. KIP-279 makes that safe when the two logs
diverged over several epochs: if the leader answers with an epoch the follower
does not have, the follower cuts back to the end of its own largest epoch below
that one and asks again, until both name the same epoch.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

from broker.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OffsetTruncationState:
    """Truncate to `offset`; if not `truncation_completed`, ask the leader again afterwards (KIP-279)."""

    offset: int
    truncation_completed: bool


# The follower's own Log.endOffsetForEpoch: (largest epoch <= the one asked, where it ended), or None.
EndOffsetForEpoch = Callable[[int], "tuple[int, int] | None"]


def offset_truncation_state(tp: object, leader_epoch: int, leader_end_offset: int, initial_fetch_offset: int,
                            replica_end_offset: int, end_offset_for_epoch: EndOffsetForEpoch) -> OffsetTruncationState:
    """Kafka's getOffsetTruncationState for the leader's OffsetsForLeaderEpoch answer (leader_epoch, end offset).

    - The leader knows no end offset (UNDEFINED): it has no epoch at or below
      the one asked (its log starts later). Fall back to the initial fetch
      offset, the follower's high watermark, as Kafka 2.x does.
    - The leader answered an epoch the follower does not have: cut back to
      where the follower's own largest epoch below it ends, and ask again.
    - Same epoch on both sides: keep min(where it ended on the leader, where
      it ended here, the log end).
    - The follower tracks no epoch that old: trust the leader's offset.
    """
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        logger.warning("Based on replica's leader epoch, leader replied with an unknown offset in %s. The initial"
                       " fetch offset %d will be used for truncation.", tp, initial_fetch_offset)
        return OffsetTruncationState(initial_fetch_offset, truncation_completed=True)
    if leader_epoch == UNDEFINED_EPOCH:
        # A leader answering an offset without its epoch: KIP-101 without KIP-279's refinement.
        return OffsetTruncationState(min(leader_end_offset, replica_end_offset), truncation_completed=True)
    found = end_offset_for_epoch(leader_epoch)
    if found is None:
        logger.warning("Based on replica's leader epoch, leader replied with epoch %d below any replica's tracked"
                       " epochs for %s. The leader's offset only %d will be used for truncation.", leader_epoch, tp,
                       leader_end_offset)
        return OffsetTruncationState(min(leader_end_offset, replica_end_offset), truncation_completed=True)
    follower_epoch, follower_end_offset = found
    if follower_epoch != leader_epoch:
        intermediate = min(follower_end_offset, replica_end_offset)
        logger.info("Based on replica's leader epoch, leader replied with epoch %d unknown to the replica for %s."
                    " Will truncate to %d and send another leader epoch request to the leader.", leader_epoch, tp,
                    intermediate)
        return OffsetTruncationState(intermediate, truncation_completed=False)
    return OffsetTruncationState(min(follower_end_offset, leader_end_offset, replica_end_offset),
                                 truncation_completed=True)


class OutOfRangeAction(enum.Enum):
    TRUNCATE_TO = "truncate to"  # the leader's log ends below ours (an unclean election happened)
    TRUNCATE_FULLY_AND_START_AT = "truncate fully and start at"  # ours ends below the leader's log start
    FETCH_FROM = "fetch from"  # keep the log, fetch from this offset


@dataclass(frozen=True, slots=True)
class OutOfRangeReset:
    action: OutOfRangeAction
    offset: int


def out_of_range_reset(replica_end_offset: int, leader_end_offset: int,
                       leader_start_offset: int) -> OutOfRangeReset:
    """Kafka's fetchOffsetAndTruncate after OFFSET_OUT_OF_RANGE on a fetch at our log end."""
    if leader_end_offset < replica_end_offset:
        return OutOfRangeReset(OutOfRangeAction.TRUNCATE_TO, leader_end_offset)
    if leader_start_offset > replica_end_offset:
        return OutOfRangeReset(OutOfRangeAction.TRUNCATE_FULLY_AND_START_AT, leader_start_offset)
    return OutOfRangeReset(OutOfRangeAction.FETCH_FROM, replica_end_offset)

"""DelayedJoin and InitialDelayedJoin: a group's rebalance waiting for its members to (re)join (Kafka's
coordinator/group/DelayedJoin.scala).

The group coordinator watches a DelayedJoin under the group's key when the group enters PreparingRebalance,
with the largest rebalance timeout of its members. Each JoinGroup or LeaveGroup checks it again: it completes
as soon as every known member has rejoined (and no KIP-394 pending member is outstanding), or at its deadline,
when members that did not rejoin are dropped. Either way the coordinator then starts the next generation.

InitialDelayedJoin (group.initial.rebalance.delay.ms) is for a group rebalancing out of Empty: it never
completes early, and when it expires while new members keep arriving it waits again, for the delay or what
remains of the rebalance timeout, so a group of consumers started together settles in one rebalance.

The purgatory holds them; the coordinator they call back is a protocol here, so the purgatory layer does not
import the coordinator.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from broker.purgatory.purgatory import DelayedOperation, DelayedOperationPurgatory


class JoinCoordinator(Protocol):
    def try_complete_join(self, group_id: str) -> bool:
        """True when every member the group waits for has joined."""
        ...

    def on_complete_join(self, group_id: str) -> None:
        """Start the next generation with whoever joined."""
        ...

    def new_member_added(self, group_id: str) -> bool:
        """Did a new member join during the initial delay? (Clears the flag.)"""
        ...


def group_join_key(group_id: str) -> Hashable:
    return ("join", group_id)


class DelayedJoin(DelayedOperation):
    def __init__(self, coordinator: JoinCoordinator, group_id: str, rebalance_timeout_ms: int) -> None:
        super().__init__(rebalance_timeout_ms)
        self.coordinator = coordinator
        self.group_id = group_id

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_join(self.group_id) and self.force_complete()

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group_id)


class InitialDelayedJoin(DelayedJoin):
    def __init__(self, coordinator: JoinCoordinator, purgatory: DelayedOperationPurgatory[DelayedJoin],
                 group_id: str, configured_rebalance_delay_ms: int, delay_ms: int, remaining_ms: int) -> None:
        super().__init__(coordinator, group_id, delay_ms)
        self._purgatory = purgatory
        self._configured_delay_ms = configured_rebalance_delay_ms
        self._remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False  # only its timer ends it

    def on_complete(self) -> None:
        if self.coordinator.new_member_added(self.group_id) and self._remaining_ms != 0:
            delay = min(self._configured_delay_ms, self._remaining_ms)
            remaining = max(self._remaining_ms - delay, 0)
            self._purgatory.try_complete_else_watch(
                InitialDelayedJoin(self.coordinator, self._purgatory, self.group_id, self._configured_delay_ms,
                                   delay, remaining), [group_join_key(self.group_id)])
        else:
            self.coordinator.on_complete_join(self.group_id)

"""DelayedHeartbeat: a group member's session (Kafka's coordinator/group/DelayedHeartbeat.scala).

Each heartbeat (and each JoinGroup, SyncGroup and OffsetCommit of a member) completes the member's
DelayedHeartbeat as satisfied and watches a new one, due at the member's session timeout; if it expires
instead, the member is gone and the coordinator removes it, which starts a rebalance. A KIP-394 pending member
(given a member id by MEMBER_ID_REQUIRED) has one too: if it never joins with the id, the id is dropped.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from broker.purgatory.purgatory import DelayedOperation


class HeartbeatCoordinator(Protocol):
    def try_complete_heartbeat(self, group_id: str, member_id: str, is_pending: bool) -> bool:
        """True when the member heartbeat (or left, or the pending member joined) since this was armed."""
        ...

    def on_expire_heartbeat(self, group_id: str, member_id: str, is_pending: bool) -> None: ...


def member_key(group_id: str, member_id: str) -> Hashable:
    return ("heartbeat", group_id, member_id)


class DelayedHeartbeat(DelayedOperation):
    def __init__(self, coordinator: HeartbeatCoordinator, group_id: str, member_id: str, is_pending: bool,
                 timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.coordinator = coordinator
        self.group_id = group_id
        self.member_id = member_id
        self.is_pending = is_pending
        self._satisfied = False

    def try_complete(self) -> bool:
        if self.coordinator.try_complete_heartbeat(self.group_id, self.member_id, self.is_pending):
            self._satisfied = True
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        # Completed by its timer rather than by a heartbeat: Kafka's onExpiration.
        if not self._satisfied:
            self.coordinator.on_expire_heartbeat(self.group_id, self.member_id, self.is_pending)

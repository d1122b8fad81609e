"""The controller's ZooKeeper watches (Kafka's ZNodeChangeHandlers / ZNodeChildChangeHandlers).

Each watch turns a notification into an event on the controller's queue and
does nothing else: watch callbacks run on kazoo's thread, and all controller
work happens on the controller's event thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from controller.events import (
    BrokerChange,
    ControllerChange,
    ControllerEvent,
    Expire,
    IsrChangeNotification,
    LogDirEventNotification,
    PartitionModifications,
    PartitionReassignment,
    PreferredReplicaLeaderElection,
    Reelect,
    TopicChange,
    TopicDeletion,
)
from zk.client import KafkaZkClient, Watch

Put = Callable[[ControllerEvent], None]


class ControllerZkWatches:
    def __init__(self, zk: KafkaZkClient, put: Put, clear_and_put: Put, put_coalesced: Put) -> None:
        self._zk = zk
        self._put = put
        self._clear_and_put = clear_and_put
        # For the watches whose events re-read ZooKeeper: one queued covers any number of notifications.
        self._put_coalesced = put_coalesced
        self._active_watches: list[Watch] = []
        # Kafka's PartitionModificationsHandlers: one per topic, while active.
        self._topic_watches: dict[str, Watch] = {}

    def register_election_handlers(self) -> None:
        """For the life of the process: /controller (whoever holds it) and this controller's session."""
        self._zk.watch_controller(
            lambda controller_id: self._put(Reelect() if controller_id is None else ControllerChange())
        )
        self._zk.on_session_expired(lambda: self._clear_and_put(Expire()))
        self._zk.on_new_session(lambda: self._put(Reelect()))

    def register_active_handlers(self) -> None:
        """While active (Kafka's onControllerFailover registrations). Each fires once at once, too."""
        self._active_watches = [
            self._zk.watch_broker_ids(lambda _: self._put_coalesced(BrokerChange())),
            self._zk.watch_topics(lambda _: self._put_coalesced(TopicChange())),
            self._zk.watch_isr_change_notifications(lambda _: self._put_coalesced(IsrChangeNotification())),
            self._zk.watch_log_dir_event_notifications(lambda _: self._put_coalesced(LogDirEventNotification())),
            self._zk.watch_topic_deletions(lambda _: self._put_coalesced(TopicDeletion())),
            self._zk.watch_preferred_replica_election(lambda _: self._put(PreferredReplicaLeaderElection())),
            self._zk.watch_partition_reassignment(lambda _: self._put(PartitionReassignment())),
        ]

    def register_partition_modifications_handlers(self, topics: Iterable[str]) -> None:
        """Armed for all the topics at once, before the controller reads their assignments: a change after
        the read fires, and the registration itself fires nothing."""
        new = [topic for topic in topics if topic not in self._topic_watches]
        self._topic_watches.update(
            self._zk.watch_topic_assignments(new, lambda topic: self._put(PartitionModifications(topic))))

    def unregister_partition_modifications_handlers(self, topics: Iterable[str]) -> None:
        for topic in topics:
            watch = self._topic_watches.pop(topic, None)
            if watch is not None:
                watch.cancel()

    def unregister_active_handlers(self) -> None:
        for watch in self._active_watches:
            watch.cancel()
        self._active_watches = []
        self.unregister_partition_modifications_handlers(list(self._topic_watches))

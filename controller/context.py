"""ControllerContext: the active controller's picture of the cluster (Kafka's ControllerContext.scala).

Loaded from ZooKeeper when a controller takes over and kept current by its
events; ZooKeeper stays the source of truth, this is the cache decisions are
made from. Plain data with no I/O, touched only by the controller's event
thread, so it needs no locks.

Partition states, leaderships, assignments and deletions are written through its methods, which keep the
counts the controller's gauges show (offline partitions, preferred-replica imbalance, partitions) as each
partition changes, as Kafka's putPartitionState and updatePreferredReplicaImbalanceMetric do: the gauges are
read after every event, and a count over 10,000 partitions after each was most of the controller's CPU.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from controller.states import PartitionState, ReplicaState
from proto.types import TopicPartition
from zk.paths import (
    INITIAL_CONTROLLER_EPOCH,
    INITIAL_CONTROLLER_EPOCH_ZK_VERSION,
    BrokerInfo,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)


class PartitionAndReplica(NamedTuple):
    """One replica: a partition on a broker (Kafka's PartitionAndReplica)."""

    topic_partition: TopicPartition
    replica: int

    def __str__(self) -> str:
        return f"[Topic={self.topic_partition.topic},Partition={self.topic_partition.partition},Replica={self.replica}]"


class ControllerContext:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything (resignation): a controller that takes over again reloads from ZooKeeper."""
        self.epoch = INITIAL_CONTROLLER_EPOCH
        # The /controller_epoch znode version this controller wrote: every fenced write expects it.
        self.epoch_zk_version = INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        self.live_brokers: dict[int, BrokerInfo] = {}
        # Live brokers that asked for a controlled shutdown: still registered, but no longer elected leader
        # (Kafka's shuttingDownBrokerIds). They leave with their registration.
        self.shutting_down_broker_ids: set[int] = set()
        # Per broker, its replicas on an offline log dir, as its LeaderAndIsr answers said (Kafka's
        # replicasOnOfflineDirs): offline to elections until the broker registers again.
        self.replicas_on_offline_dirs: dict[int, set[TopicPartition]] = {}
        self.all_topics: set[str] = set()
        self.partition_assignments: dict[str, dict[int, ReplicaAssignment]] = {}
        self.partition_leadership_info: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.partition_states: dict[TopicPartition, PartitionState] = {}
        self.replica_states: dict[PartitionAndReplica, ReplicaState] = {}
        # Topic deletion (Kafka keeps these in its context too): requested, StopReplica sent at least once,
        # and waiting for a broker that is down.
        self.topics_to_be_deleted: set[str] = set()
        self.topics_with_deletion_started: set[str] = set()
        self.topics_ineligible_for_deletion: set[str] = set()
        # Partitions whose topic znode records adding/removing replicas (Kafka's partitionsBeingReassigned).
        self.partitions_being_reassigned: set[TopicPartition] = set()
        # The gauges' counts, kept per change. Topics queued for deletion are left out of the first two.
        self.offline_partition_count = 0
        self.preferred_replica_imbalance_count = 0
        self.partition_count = 0

    # --- brokers ---

    @property
    def live_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    def add_live_brokers(self, brokers: Iterable[BrokerInfo]) -> None:
        for broker in brokers:
            self.live_brokers[broker.id] = broker

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self.live_brokers.pop(broker_id, None)
            self.shutting_down_broker_ids.discard(broker_id)

    def is_broker_online(self, broker_id: int, include_shutting_down: bool = False) -> bool:
        """A broker that is shutting down is offline to elections unless asked for."""
        if broker_id in self.shutting_down_broker_ids and not include_shutting_down:
            return False
        return broker_id in self.live_brokers

    def is_replica_online(self, broker_id: int, tp: TopicPartition, include_shutting_down: bool = False) -> bool:
        """On a live broker, and not on one of its offline log dirs."""
        return (self.is_broker_online(broker_id, include_shutting_down)
                and tp not in self.replicas_on_offline_dirs.get(broker_id, ()))

    # --- topics and assignments ---

    def set_all_topics(self, topics: Iterable[str]) -> None:
        self.all_topics = set(topics)

    def remove_topic(self, topic: str) -> None:
        if not self.is_topic_queued_up_for_deletion(topic):  # a queued topic's partitions left the counts then
            self._uncount_partitions_of(topic)
        self.all_topics.discard(topic)
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        partitions = self.partition_assignments.pop(topic, {})
        self.partition_count -= len(partitions)
        for partition, assignment in partitions.items():
            tp = TopicPartition(topic, partition)
            self.partition_leadership_info.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
            for replica in assignment.replicas:
                self.replica_states.pop(PartitionAndReplica(tp, replica), None)

    def update_partition_full_replica_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        assignments = self.partition_assignments.setdefault(tp.topic, {})
        previous = assignments.get(tp.partition)
        assignments[tp.partition] = assignment
        if previous is None:
            self.partition_count += 1
        leadership = self.partition_leadership_info.get(tp)
        self._update_preferred_replica_imbalance_count(
            tp, () if previous is None else previous.replicas, leadership, assignment.replicas, leadership)

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return self.partition_assignments.get(tp.topic, {}).get(tp.partition, ReplicaAssignment(()))

    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.partition_full_replica_assignment(tp).replicas

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return sorted(TopicPartition(topic, partition) for partition in self.partition_assignments.get(topic, {}))

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def queue_topic_deletion(self, topics: Iterable[str]) -> None:
        """Kafka's queueTopicDeletion: a topic queued twice leaves the counts once."""
        for topic in set(topics) - self.topics_to_be_deleted:
            self._uncount_partitions_of(topic)
            self.topics_to_be_deleted.add(topic)

    def is_topic_being_reassigned(self, topic: str) -> bool:
        return any(tp.topic == topic for tp in self.partitions_being_reassigned)

    def all_partitions(self) -> list[TopicPartition]:
        return sorted(
            TopicPartition(topic, partition)
            for topic, partitions in self.partition_assignments.items()
            for partition in partitions
        )

    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> list[PartitionAndReplica]:
        return [
            PartitionAndReplica(tp, replica) for tp in partitions for replica in self.partition_replica_assignment(tp)
        ]

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> list[PartitionAndReplica]:
        brokers = set(broker_ids)
        return [r for r in self.replicas_for_partitions(self.all_partitions()) if r.replica in brokers]

    def partitions_on_brokers(self, broker_ids: Iterable[int]) -> list[TopicPartition]:
        return sorted({r.topic_partition for r in self.replicas_on_brokers(broker_ids)})

    # --- partition and replica states ---

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, PartitionState.NonExistentPartition)

    def put_partition_state(self, tp: TopicPartition, state: PartitionState) -> None:
        """Kafka's putPartitionState (NonExistentPartition forgets the partition's state)."""
        previous = self.partition_state(tp)
        if state is PartitionState.NonExistentPartition:
            self.partition_states.pop(tp, None)
        else:
            self.partition_states[tp] = state
        if not self.is_topic_queued_up_for_deletion(tp.topic):
            offline = PartitionState.OfflinePartition
            self.offline_partition_count += (state is offline) - (previous is offline)

    def put_partition_leadership_info(self, tp: TopicPartition, leadership: LeaderIsrAndControllerEpoch) -> None:
        previous = self.partition_leadership_info.get(tp)
        self.partition_leadership_info[tp] = leadership
        replicas = self.partition_replica_assignment(tp)
        self._update_preferred_replica_imbalance_count(tp, replicas, previous, replicas, leadership)

    def _update_preferred_replica_imbalance_count(
        self, tp: TopicPartition, old_replicas: tuple[int, ...], old: LeaderIsrAndControllerEpoch | None,
        new_replicas: tuple[int, ...], new: LeaderIsrAndControllerEpoch | None,
    ) -> None:
        if not self.is_topic_queued_up_for_deletion(tp.topic):
            self.preferred_replica_imbalance_count += (
                _not_led_by_preferred(new_replicas, new) - _not_led_by_preferred(old_replicas, old))

    def _uncount_partitions_of(self, topic: str) -> None:
        """Take a topic's partitions out of the offline and imbalance counts (Kafka's
        cleanPreferredReplicaImbalanceMetric): it is queued for deletion, or gone."""
        for partition, assignment in self.partition_assignments.get(topic, {}).items():
            tp = TopicPartition(topic, partition)
            if self.partition_states.get(tp) is PartitionState.OfflinePartition:
                self.offline_partition_count -= 1
            if _not_led_by_preferred(assignment.replicas, self.partition_leadership_info.get(tp)):
                self.preferred_replica_imbalance_count -= 1

    def replica_state(self, replica: PartitionAndReplica) -> ReplicaState:
        return self.replica_states.get(replica, ReplicaState.NonExistentReplica)

    def replicas_for_topic_in_state(self, topic: str, state: ReplicaState) -> list[PartitionAndReplica]:
        return [
            r for r in self.replicas_for_partitions(self.partitions_for_topic(topic)) if self.replica_state(r) is state
        ]

    def partitions_with_leaders(self) -> list[TopicPartition]:
        return sorted(self.partition_leadership_info)


def _not_led_by_preferred(replicas: tuple[int, ...], leadership: LeaderIsrAndControllerEpoch | None) -> bool:
    """A partition with a leader other than its preferred (first assigned) replica."""
    return leadership is not None and bool(replicas) and leadership.leader != replicas[0]

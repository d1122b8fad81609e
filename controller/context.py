"""ControllerContext: the active controller's picture of the cluster (Kafka's ControllerContext.scala).

Loaded from ZooKeeper when a controller takes over and kept current by its
events; ZooKeeper stays the source of truth, this is the cache decisions are
made from. Plain data with no I/O, touched only by the controller's event
thread, so it needs no locks.
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
        self.all_topics.discard(topic)
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        partitions = self.partition_assignments.pop(topic, {})
        for partition, assignment in partitions.items():
            tp = TopicPartition(topic, partition)
            self.partition_leadership_info.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
            for replica in assignment.replicas:
                self.replica_states.pop(PartitionAndReplica(tp, replica), None)

    def update_partition_full_replica_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.partition_assignments.setdefault(tp.topic, {})[tp.partition] = assignment

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return self.partition_assignments.get(tp.topic, {}).get(tp.partition, ReplicaAssignment(()))

    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.partition_full_replica_assignment(tp).replicas

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return sorted(TopicPartition(topic, partition) for partition in self.partition_assignments.get(topic, {}))

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

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

    def replica_state(self, replica: PartitionAndReplica) -> ReplicaState:
        return self.replica_states.get(replica, ReplicaState.NonExistentReplica)

    def replicas_for_topic_in_state(self, topic: str, state: ReplicaState) -> list[PartitionAndReplica]:
        return [
            r for r in self.replicas_for_partitions(self.partitions_for_topic(topic)) if self.replica_state(r) is state
        ]

    def partitions_with_leaders(self) -> list[TopicPartition]:
        return sorted(self.partition_leadership_info)

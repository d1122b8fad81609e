"""The controller's events (Kafka's ControllerEvent case objects in KafkaController.scala).

ZooKeeper watches and session callbacks create them and do nothing else; the
controller's event thread processes them one at a time, in order. Events carry
no ZooKeeper data: the handler reads the current state itself, so a burst of
watch notifications costs one read each and can never apply stale data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from proto.errors import ErrorCode
from proto.types import TopicPartition


@dataclass(frozen=True)
class ControllerEvent:
    def __str__(self) -> str:
        return type(self).__name__

    def preempt(self) -> None:
        """Dropped unprocessed (session expiry, shutdown): an event somebody waits on answers here (Kafka's
        PreemptableControllerEvent)."""


@dataclass(frozen=True)
class Startup(ControllerEvent):
    """Start watching /controller and run for controller."""


@dataclass(frozen=True)
class ControllerChange(ControllerEvent):
    """/controller was created or changed: resign if it no longer names this controller."""


@dataclass(frozen=True)
class Reelect(ControllerEvent):
    """/controller is gone (its owner's session ended or it resigned), or this controller's ZooKeeper session was
    re-established: resign if needed, then run for controller."""


@dataclass(frozen=True)
class Expire(ControllerEvent):
    """This controller's ZooKeeper session expired: its /controller znode is gone, so it is no longer active."""


@dataclass(frozen=True)
class BrokerChange(ControllerEvent):
    """The children of /brokers/ids changed: brokers registered, deregistered or re-registered."""


@dataclass(frozen=True)
class TopicChange(ControllerEvent):
    """The children of /brokers/topics changed: topics created (or their znodes removed)."""


@dataclass(frozen=True)
class PartitionModifications(ControllerEvent):
    """/brokers/topics/<topic> changed: partitions may have been added (Kafka's PartitionModifications)."""

    topic: str


@dataclass(frozen=True)
class IsrChangeNotification(ControllerEvent):
    """Leaders changed ISRs and said so under /isr_change_notification."""


@dataclass(frozen=True)
class LogDirEventNotification(ControllerEvent):
    """Brokers said under /log_dir_event_notification that a log dir of theirs went offline."""


@dataclass(frozen=True)
class LeaderAndIsrResponseReceived(ControllerEvent):
    """A broker answered a LeaderAndIsr: KAFKA_STORAGE_ERROR for a partition means its replica there is on an
    offline log dir (Kafka's LeaderAndIsrResponseReceived)."""

    broker_id: int
    error: int
    partition_errors: tuple[tuple[TopicPartition, int], ...]

    def __str__(self) -> str:
        return f"{type(self).__name__}(broker_id={self.broker_id}, error={self.error})"


@dataclass(frozen=True)
class TopicDeletion(ControllerEvent):
    """The children of /admin/delete_topics changed: topics were marked for deletion."""


@dataclass(frozen=True)
class TopicDeletionStopReplicaResponseReceived(ControllerEvent):
    """A broker answered a StopReplica(delete_partitions): `partition_errors` holds each partition's error code,
    `error` the request's."""

    replica_id: int
    error: int
    partition_errors: tuple[tuple[TopicPartition, int], ...]

    def __str__(self) -> str:
        return f"{type(self).__name__}(replica_id={self.replica_id}, error={self.error})"


@dataclass(frozen=True)
class PreferredReplicaLeaderElection(ControllerEvent):
    """/admin/preferred_replica_election was written (or deleted): elect the preferred replicas it names."""


# The answer to an ElectLeaders: per partition, (error code, error message); ErrorCode.NONE when elected.
ElectLeadersCallback = Callable[[dict[TopicPartition, tuple[int, str]]], None]


@dataclass(frozen=True)
class ReplicaLeaderElection(ControllerEvent):
    """An ElectLeaders request (the KafkaController service, KIP-460): `unclean` elects a live replica outside the
    ISR for partitions whose leader is gone; else the preferred replicas. `partitions` None: all of them."""

    partitions: tuple[TopicPartition, ...] | None
    unclean: bool
    callback: ElectLeadersCallback = field(compare=False)

    def __str__(self) -> str:
        return f"{type(self).__name__}(unclean={self.unclean})"

    def preempt(self) -> None:
        self.callback({tp: (ErrorCode.NOT_CONTROLLER, "") for tp in self.partitions or ()})


@dataclass(frozen=True)
class PartitionReassignment(ControllerEvent):
    """/admin/reassign_partitions was written (or deleted): start the reassignments it asks for (Kafka's
    ZkPartitionReassignment)."""


@dataclass(frozen=True)
class PartitionReassignmentIsrChange(ControllerEvent):
    """The state znode of a partition being reassigned changed: its new replicas may all be in sync now."""

    topic_partition: TopicPartition

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.topic_partition})"


@dataclass(frozen=True)
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    """The auto-leader-rebalance-task's turn: check each broker's leader imbalance."""


# The answer to a ControlledShutdown: (error code, partitions the broker still leads).
ControlledShutdownCallback = Callable[[int, tuple[TopicPartition, ...]], None]


@dataclass(frozen=True)
class ControlledShutdown(ControllerEvent):
    """A broker asked to shut down in a controlled way (the KafkaController service): move its leadership away,
    then answer through `callback` (on the event thread)."""

    broker_id: int
    broker_epoch: int
    callback: ControlledShutdownCallback = field(compare=False)

    def __str__(self) -> str:
        return f"{type(self).__name__}(broker_id={self.broker_id}, broker_epoch={self.broker_epoch})"

    def preempt(self) -> None:
        # The broker is told at once to find the new controller, rather than waiting out its timeout.
        self.callback(ErrorCode.NOT_CONTROLLER, ())

"""MetadataCache: the cluster as the controller last described it (Kafka 2.x's server/MetadataCache.scala).

Fed only by UpdateMetadata, read by Metadata requests and by the produce and
fetch paths (a partition the cache does not know is UNKNOWN_TOPIC_OR_PARTITION
even if a log for it lingers here). Each update builds a new snapshot and
swaps it in, so a reader on another thread never sees half of one.

Brokers are described as reachable on one listener: the one the asking client
connected to (Kafka's rule), so a client outside a container network is told the
advertised host addresses and a broker inside it the internal ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from proto.errors import ErrorCode
from proto.types import TopicPartition
from zk.paths import LEADER_DURING_DELETE, NO_LEADER


@dataclass(frozen=True, slots=True)
class UpdateMetadataPartitionState:
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EndPoint:
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class LiveBroker:
    id: int
    endpoints: Mapping[str, EndPoint]  # by listener name
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """A broker as clients are told to reach it on one listener."""

    id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    error: ErrorCode
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    error: ErrorCode
    name: str
    partitions: tuple[PartitionMetadata, ...] = ()


@dataclass(frozen=True, slots=True)
class _Snapshot:
    partition_states: Mapping[str, Mapping[int, UpdateMetadataPartitionState]] = field(default_factory=dict)
    controller_id: int | None = None
    alive_brokers: Mapping[int, LiveBroker] = field(default_factory=dict)


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._snapshot = _Snapshot()

    # ------------------------------------------------------------------ updates

    def update_metadata(self, controller_id: int,
                        partition_states: Iterable[tuple[TopicPartition, UpdateMetadataPartitionState]],
                        live_brokers: Iterable[LiveBroker]) -> list[TopicPartition]:
        """Apply an UpdateMetadata: live brokers are replaced, partition states merged.

        Returns the partitions it deleted (those the controller marked LEADER_DURING_DELETE).
        """
        current = self._snapshot
        states = {topic: dict(partitions) for topic, partitions in current.partition_states.items()}
        deleted: list[TopicPartition] = []
        for tp, state in partition_states:
            if state.leader == LEADER_DURING_DELETE:
                topic_states = states.get(tp.topic)
                if topic_states is not None and topic_states.pop(tp.partition, None) is not None:
                    deleted.append(tp)
                    if not topic_states:
                        del states[tp.topic]
            else:
                states.setdefault(tp.topic, {})[tp.partition] = state
        self._snapshot = _Snapshot(
            partition_states=states,
            controller_id=controller_id if controller_id >= 0 else None,
            alive_brokers={broker.id: broker for broker in live_brokers},
        )
        return deleted

    # ------------------------------------------------------------------ queries

    @property
    def controller_id(self) -> int | None:
        return self._snapshot.controller_id

    def contains_topic(self, topic: str) -> bool:
        return topic in self._snapshot.partition_states

    def contains(self, tp: TopicPartition) -> bool:
        return tp.partition in self._snapshot.partition_states.get(tp.topic, {})

    def get_all_topics(self) -> set[str]:
        return set(self._snapshot.partition_states)

    def get_partition_info(self, tp: TopicPartition) -> UpdateMetadataPartitionState | None:
        return self._snapshot.partition_states.get(tp.topic, {}).get(tp.partition)

    def partition_count(self, topic: str) -> int:
        return len(self._snapshot.partition_states.get(topic, {}))

    def get_alive_brokers(self, listener_name: str) -> list[Node]:
        """Live brokers that have the listener, as reached on it, by id."""
        snapshot = self._snapshot
        nodes = (self._node(broker, listener_name) for _, broker in sorted(snapshot.alive_brokers.items()))
        return [node for node in nodes if node is not None]

    def alive_broker_ids(self) -> list[int]:
        return sorted(self._snapshot.alive_brokers)

    @staticmethod
    def _node(broker: LiveBroker, listener_name: str) -> Node | None:
        endpoint = broker.endpoints.get(listener_name)
        return None if endpoint is None else Node(broker.id, endpoint.host, endpoint.port, broker.rack)

    def get_topic_metadata(self, topics: Iterable[str], listener_name: str) -> list[TopicMetadata]:
        """Metadata of the requested topics the cache knows, for a client on `listener_name`; unknown ones are
        left out for the caller to handle."""
        snapshot = self._snapshot
        result = []
        for topic in topics:
            partitions = snapshot.partition_states.get(topic)
            if partitions is not None:
                result.append(TopicMetadata(ErrorCode.NONE, topic, tuple(
                    self._partition_metadata(snapshot, index, state, listener_name)
                    for index, state in sorted(partitions.items())
                )))
        return result

    @staticmethod
    def _partition_metadata(snapshot: _Snapshot, index: int, state: UpdateMetadataPartitionState,
                            listener_name: str) -> PartitionMetadata:
        leader = snapshot.alive_brokers.get(state.leader)
        if leader is None or listener_name not in leader.endpoints:
            # A live leader without the client's listener is a misconfigured cluster, not a leader election.
            error = ErrorCode.LEADER_NOT_AVAILABLE if leader is None else ErrorCode.LISTENER_NOT_FOUND
            return PartitionMetadata(error, index, NO_LEADER, state.leader_epoch, state.replicas, state.isr,
                                     state.offline_replicas)
        return PartitionMetadata(ErrorCode.NONE, index, state.leader, state.leader_epoch, state.replicas,
                                 state.isr, state.offline_replicas)

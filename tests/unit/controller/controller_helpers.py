"""Fakes for the controller's unit tests: an in-memory ZooKeeper with Kafka's fencing, a recording channel."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

from controller.channel_manager import ControllerChannelManager
from controller.config import ControllerConfig
from controller.context import ControllerContext
from controller.controller import KafkaController
from controller.events import Startup, TopicChange
from controller.loggers import state_change_logger
from controller.request_batch import BrokerRequest, ControllerBrokerRequestBatch, ResponseCallback
from proto import minibroker_pb2 as pb
from proto.types import EndPoint, TopicPartition
from zk.client import ControllerMovedError, KafkaZkClient, UpdateLeaderAndIsrResult, Watch
from zk.paths import BrokerInfo, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicAssignment

CONTROLLER_ID = 1001


def broker(broker_id: int, epoch: int | None = None) -> BrokerInfo:
    return BrokerInfo(
        id=broker_id,
        endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9090 + broker_id),),
        epoch=100 + broker_id if epoch is None else epoch,
    )


def state(leader: int, isr: Iterable[int], leader_epoch: int = 0, controller_epoch: int = 1, zk_version: int = 0):
    return LeaderIsrAndControllerEpoch(leader, leader_epoch, tuple(isr), controller_epoch, zk_version)


def controller_config(**overrides: str) -> ControllerConfig:
    props = {"zookeeper.connect": "127.0.0.1:2181", "controller.id": str(CONTROLLER_ID)}
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return ControllerConfig.from_props(props)


def context_with(
    brokers: Iterable[BrokerInfo] = (),
    assignments: Mapping[TopicPartition, Iterable[int]] | None = None,
    states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch] | None = None,
    epoch: int = 1,
) -> ControllerContext:
    context = ControllerContext()
    context.epoch = epoch
    context.epoch_zk_version = epoch
    context.add_live_brokers(brokers)
    for tp, replicas in (assignments or {}).items():
        context.update_partition_full_replica_assignment(tp, ReplicaAssignment(tuple(replicas)))
        context.all_topics.add(tp.topic)
    context.partition_leadership_info.update(states or {})
    return context


@dataclass
class Sent:
    """What a batch handed to its `send`, in order."""

    requests: list[tuple[int, BrokerRequest]] = field(default_factory=list)
    # The response callbacks handed over with the requests, by broker.
    callbacks: dict[int, list[ResponseCallback]] = field(default_factory=dict)

    def __call__(self, broker_id: int, request: BrokerRequest, callback: ResponseCallback | None = None) -> None:
        self.requests.append((broker_id, request))
        if callback is not None:
            self.callbacks.setdefault(broker_id, []).append(callback)

    def leader_and_isr(self) -> dict[int, pb.LeaderAndIsrRequest]:
        found: dict[int, pb.LeaderAndIsrRequest] = {}
        for broker_id, request in self.requests:
            if isinstance(request, pb.LeaderAndIsrRequest):
                assert broker_id not in found, f"two LeaderAndIsr requests to broker {broker_id}"
                found[broker_id] = request
        return found

    def update_metadata(self) -> list[tuple[int, pb.UpdateMetadataRequest]]:
        return [(b, r) for b, r in self.requests if isinstance(r, pb.UpdateMetadataRequest)]

    def stop_replica(self) -> list[tuple[int, pb.StopReplicaRequest]]:
        return [(b, r) for b, r in self.requests if isinstance(r, pb.StopReplicaRequest)]

    def clear(self) -> None:
        self.requests.clear()
        self.callbacks.clear()


def batch_for(
    context: ControllerContext,
    sent: Sent,
    stop_replica_responses: list[tuple[int, Any]] | None = None,
    inter_broker_listener: str = "PLAINTEXT",
) -> ControllerBrokerRequestBatch:
    responses = [] if stop_replica_responses is None else stop_replica_responses
    return ControllerBrokerRequestBatch(
        CONTROLLER_ID, context, sent, state_change_log(), lambda b, r: responses.append((b, r)), inter_broker_listener
    )


def state_change_log() -> logging.LoggerAdapter[logging.Logger]:
    return state_change_logger(CONTROLLER_ID, lambda: 1)


class FakeChannelManager:
    """ControllerChannelManager's interface, recording."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.sent = Sent()
        self.dropped: list[tuple[int, BrokerRequest]] = []
        self.shutdowns = 0

    def add_broker(self, info: BrokerInfo) -> None:
        self.brokers.setdefault(info.id, info)

    def remove_broker(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)

    def send_request(self, broker_id: int, request: BrokerRequest, callback: ResponseCallback | None = None) -> None:
        if broker_id in self.brokers:
            self.sent(broker_id, request, callback)
        else:
            self.dropped.append((broker_id, request))

    def shutdown(self) -> None:
        self.shutdowns += 1
        self.brokers.clear()


class FakeZk:
    """The KafkaZkClient operations the controller uses, in memory, with the same fencing rule: a controller
    write whose expected /controller_epoch version is not the current one raises ControllerMovedError."""

    def __init__(self) -> None:
        self.controller: int | None = None
        self.controller_epoch = 0
        self.controller_epoch_zk_version = 0
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicAssignment] = {}
        self.partition_states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.isr_notifications: dict[str, set[TopicPartition]] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.topic_deletions: set[str] = set()
        self.preferred_replica_election: set[TopicPartition] = set()
        self.partition_reassignment: dict[TopicPartition, tuple[int, ...]] = {}
        # Partitions whose state znode the controller watches (reassignment), with their callbacks.
        self.partition_state_watches: dict[TopicPartition, Any] = {}
        # Partitions whose next conditional update meets a concurrent write (a leader's ISR change) first.
        self.concurrent_writes: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.watches: dict[str, Any] = {}
        self.session_expired_callbacks: list[Any] = []
        self.new_session_callbacks: list[Any] = []
        self.fail_next_get_all_brokers: Exception | None = None

    # --- test controls ---

    def elect_other(self, controller_id: int) -> None:
        """Another controller wins an election (its multi-op bumps the epoch)."""
        self.controller = controller_id
        self.controller_epoch += 1
        self.controller_epoch_zk_version += 1

    def create_topic(self, topic: str, replicas: Mapping[int, Iterable[int]]) -> None:
        self.topics[topic] = TopicAssignment.of(topic, {p: list(r) for p, r in replicas.items()})

    def _fence(self, expected: int) -> None:
        if expected != self.controller_epoch_zk_version:
            raise ControllerMovedError(f"expected /controller_epoch at version {expected}")

    # --- controller ---

    def get_controller_id(self) -> int | None:
        return self.controller

    def try_create_controller(self, controller_id: int, endpoint: str | None = None) -> tuple[int, int] | None:
        if self.controller is not None:
            return None
        self.controller = controller_id
        self.controller_epoch += 1
        self.controller_epoch_zk_version += 1
        return self.controller_epoch, self.controller_epoch_zk_version

    def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        self._fence(expected_controller_epoch_zk_version)
        self.controller = None

    # --- brokers and topics ---

    def get_all_brokers(self) -> list[BrokerInfo]:
        if self.fail_next_get_all_brokers is not None:
            error, self.fail_next_get_all_brokers = self.fail_next_get_all_brokers, None
            raise error
        return [self.brokers[i] for i in sorted(self.brokers)]

    def get_all_topics(self) -> set[str]:
        return set(self.topics)

    def get_topic_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        return {t: self.topics[t] for t in topics if t in self.topics}

    # --- partition state ---

    def get_partition_states(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Any]:
        return {tp: self.partition_states[tp] for tp in partitions if tp in self.partition_states}

    def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected_controller_epoch_zk_version: int
    ) -> set[TopicPartition]:
        self._fence(expected_controller_epoch_zk_version)
        created = set()
        for tp, s in states.items():
            if tp not in self.partition_states:
                self.partition_states[tp] = replace(s, zk_version=0)
                created.add(tp)
        return created

    def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected_controller_epoch_zk_version: int
    ) -> UpdateLeaderAndIsrResult:
        self._fence(expected_controller_epoch_zk_version)
        result = UpdateLeaderAndIsrResult()
        for tp, s in states.items():
            if tp in self.concurrent_writes:
                concurrent = self.concurrent_writes.pop(tp)
                self.partition_states[tp] = replace(concurrent, zk_version=self.partition_states[tp].zk_version + 1)
            if self.partition_states[tp].zk_version != s.zk_version:
                result.to_retry.append(tp)
            else:
                self.partition_states[tp] = result.finished[tp] = replace(s, zk_version=s.zk_version + 1)
        return result

    # --- topic config and deletion ---

    def get_topic_config(self, topic: str) -> dict[str, str]:
        return dict(self.topic_configs.get(topic, {}))

    def get_topic_deletions(self) -> set[str]:
        return set(self.topic_deletions)

    def delete_topic_deletions(self, topics: Iterable[str], expected_controller_epoch_zk_version: int) -> None:
        self._fence(expected_controller_epoch_zk_version)
        self.topic_deletions -= set(topics)

    def delete_topic(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        self._fence(expected_controller_epoch_zk_version)
        self.topics.pop(topic, None)
        self.topic_configs.pop(topic, None)
        self.topic_deletions.discard(topic)
        for tp in [tp for tp in self.partition_states if tp.topic == topic]:
            del self.partition_states[tp]

    # --- ISR change notifications ---

    def notify_isr_change(self, tp: TopicPartition, new_state: LeaderIsrAndControllerEpoch) -> None:
        """What a leader does: a conditional write of the state, then a notification."""
        self.partition_states[tp] = new_state
        self.isr_notifications[f"{len(self.isr_notifications):010d}"] = {tp}

    def get_isr_change_notifications(self) -> list[str]:
        return sorted(self.isr_notifications)

    def get_partitions_from_isr_change_notifications(self, sequence_numbers: Iterable[str]) -> set[TopicPartition]:
        return set().union(*(self.isr_notifications.get(s, set()) for s in sequence_numbers))

    def delete_isr_change_notifications(
        self, sequence_numbers: Iterable[str], expected_controller_epoch_zk_version: int
    ) -> None:
        sequence_numbers = list(sequence_numbers)
        if sequence_numbers:
            self._fence(expected_controller_epoch_zk_version)
        for s in sequence_numbers:
            self.isr_notifications.pop(s, None)

    # --- watches: recorded, never fired (tests call process() with the events instead) ---

    def _watch(self, name: str, callback: Any) -> Watch:
        self.watches[name] = callback
        return Watch()

    def watch_controller(self, callback: Any) -> Any:
        return self._watch("controller", callback)

    def watch_broker_ids(self, callback: Any) -> Any:
        return self._watch("brokers", callback)

    def watch_topics(self, callback: Any) -> Any:
        return self._watch("topics", callback)

    def watch_topic_assignment(self, topic: str, callback: Any) -> Any:
        return self._watch(f"topics/{topic}", callback)

    def get_topic_assignment(self, topic: str) -> TopicAssignment | None:
        return self.topics.get(topic)

    def watch_isr_change_notifications(self, callback: Any) -> Any:
        return self._watch("isr_change_notification", callback)

    def watch_topic_deletions(self, callback: Any) -> Any:
        return self._watch("delete_topics", callback)

    def watch_preferred_replica_election(self, callback: Any) -> Any:
        return self._watch("preferred_replica_election", callback)

    def get_preferred_replica_election(self) -> set[TopicPartition]:
        return set(self.preferred_replica_election)

    def delete_preferred_replica_election(self, expected_controller_epoch_zk_version: int) -> None:
        self._fence(expected_controller_epoch_zk_version)
        self.preferred_replica_election = set()

    def watch_partition_reassignment(self, callback: Any) -> Any:
        return self._watch("reassign_partitions", callback)

    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        return dict(self.partition_reassignment)

    def set_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Iterable[int]], expected_controller_epoch_zk_version: int
    ) -> None:
        self._fence(expected_controller_epoch_zk_version)
        self.partition_reassignment = {tp: tuple(r) for tp, r in reassignment.items()}

    def set_topic_assignment(self, assignment: TopicAssignment, expected_controller_epoch_zk_version: int) -> None:
        self._fence(expected_controller_epoch_zk_version)
        self.topics[assignment.topic] = assignment

    def watch_partition_state(self, tp: TopicPartition, callback: Any) -> Watch:
        watch = Watch()
        self.partition_state_watches[tp] = (watch, callback)
        return watch

    def on_session_expired(self, callback: Any) -> None:
        self.session_expired_callbacks.append(callback)

    def on_new_session(self, callback: Any) -> None:
        self.new_session_callbacks.append(callback)


def started_controller(zk: FakeZk, channels: FakeChannelManager, **config: str) -> KafkaController:
    """An active controller that has loaded the topics, with nothing sent yet."""
    controller = KafkaController(
        controller_config(**config), cast(KafkaZkClient, zk), cast(ControllerChannelManager, cast(Any, channels))
    )
    controller.process(Startup())
    controller.process(TopicChange())
    channels.sent.clear()
    return controller

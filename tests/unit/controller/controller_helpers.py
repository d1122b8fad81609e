"""Fakes for the controller's unit tests: an in-memory ZooKeeper with Kafka's fencing, a recording channel."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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
from tests.fakes import FakeZk
from zk.client import KafkaZkClient
from zk.paths import BrokerInfo, LeaderIsrAndControllerEpoch, ReplicaAssignment

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
    for tp, leadership in (states or {}).items():
        context.put_partition_leadership_info(tp, leadership)
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


def started_controller(zk: FakeZk, channels: FakeChannelManager, **config: str) -> KafkaController:
    """An active controller that has loaded the topics, with nothing sent yet."""
    controller = KafkaController(
        controller_config(**config), cast(KafkaZkClient, zk), cast(ControllerChannelManager, cast(Any, channels))
    )
    controller.process(Startup())
    controller.process(TopicChange())
    channels.sent.clear()
    return controller

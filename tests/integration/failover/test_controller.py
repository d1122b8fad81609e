"""The controller against a real ZooKeeper: real controller processes racing, SIGKILL and SIGTERM hand-overs,
fencing, and the requests it sends to brokers - received by real gRPC servers standing in for brokers."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from kazoo.client import KazooClient

from controller.config import ControllerConfig
from controller.controller import KafkaController
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.auth import CLUSTER_CREDENTIAL_METADATA_KEY
from proto.types import EndPoint, TopicPartition
from zk import paths
from zk.client import KafkaZkClient
from zk.paths import BrokerInfo, LeaderIsrAndControllerEpoch, TopicAssignment
from zk.server import free_port

if TYPE_CHECKING:
    # Fixture types only: at run time "conftest" could name another directory's conftest.
    from conftest import LoggedProcess, StartProcess, WaitUntil

pytestmark = pytest.mark.integration

Connect = Callable[..., KafkaZkClient]
SESSION_TIMEOUT_MS = 4000
CREDENTIAL = "s3cret"
P0 = TopicPartition("orders", 0)
P1 = TopicPartition("orders", 1)


# --- a broker's cluster API, recording what it is sent ---


class RecordingBroker(pb_grpc.KafkaClusterServicer):
    """A real gRPC server on the broker's registered port, answering every request with NONE."""

    def __init__(self, port: int = 0) -> None:
        self._lock = threading.Lock()
        self._requests: list[tuple[Any, str | None]] = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_KafkaClusterServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port(f"127.0.0.1:{port}")
        self._server.start()

    def stop(self) -> None:
        self._server.stop(0)

    def _record(self, request: Any, context: grpc.ServicerContext) -> None:
        credential = dict(context.invocation_metadata()).get(CLUSTER_CREDENTIAL_METADATA_KEY)
        with self._lock:
            self._requests.append((request, None if credential is None else str(credential)))

    def LeaderAndIsr(self, request: pb.LeaderAndIsrRequest, context: grpc.ServicerContext) -> pb.LeaderAndIsrResponse:
        self._record(request, context)
        return pb.LeaderAndIsrResponse()

    def UpdateMetadata(
        self, request: pb.UpdateMetadataRequest, context: grpc.ServicerContext
    ) -> pb.UpdateMetadataResponse:
        self._record(request, context)
        return pb.UpdateMetadataResponse()

    def requests(self) -> list[tuple[Any, str | None]]:
        with self._lock:
            return list(self._requests)

    def leader_and_isr(self) -> list[pb.LeaderAndIsrRequest]:
        return [r for r, _ in self.requests() if isinstance(r, pb.LeaderAndIsrRequest)]

    def update_metadata(self) -> list[pb.UpdateMetadataRequest]:
        return [r for r, _ in self.requests() if isinstance(r, pb.UpdateMetadataRequest)]

    def partition_states(self, controller_epoch: int) -> dict[TopicPartition, pb.LeaderAndIsrPartitionState]:
        """The partitions this broker was told to lead or follow by the controller of that epoch."""
        return {
            TopicPartition(s.topic_name, s.partition_index): s
            for r in self.leader_and_isr()
            if r.controller_epoch == controller_epoch
            for s in r.partition_states
        }


@pytest.fixture
def brokers() -> Iterator[Callable[..., RecordingBroker]]:
    started: list[RecordingBroker] = []

    def start(port: int = 0) -> RecordingBroker:
        broker = RecordingBroker(port)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


def register(zk_clients: Connect, broker_id: int, port: int) -> tuple[KafkaZkClient, int]:
    """A broker's registration in its own session; returns the session and the broker epoch."""
    session = zk_clients()
    info = BrokerInfo(id=broker_id, endpoints=(EndPoint("GRPC", "127.0.0.1", port),))
    return session, session.register_broker(info)


# --- controller processes ---


def start_controller(processes: StartProcess, zk_connect: str, controller_id: int, *overrides: str) -> LoggedProcess:
    argv = [sys.executable, "-m", "controller.main", "--zookeeper", zk_connect, "--controller-id", str(controller_id)]
    for override in (
        f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
        f"cluster.credential={CREDENTIAL}",
        *overrides,
    ):
        argv += ["--override", override]
    return processes(f"controller-{controller_id}", argv)


def elected(controller_id: int, epoch: int) -> str:
    return f"{controller_id} successfully elected as the controller. Epoch incremented to {epoch}"


def ready(epoch: int) -> str:
    return f"Ready to serve as the new controller with epoch {epoch}"


def standing_by(active_id: int) -> str:
    return f"Controller {active_id} has been elected as the controller, so stopping the election process."


def test_one_of_two_controllers_is_elected_and_the_other_takes_over_when_it_is_killed(
    zk_client: KafkaZkClient,
    zk_clients: Connect,
    zk_connect: str,
    processes: StartProcess,
    brokers: Callable[..., RecordingBroker],
    wait_until: WaitUntil,
) -> None:
    broker = brokers()
    _, broker_epoch = register(zk_clients, 1, broker.port)
    zk_client.create_topic(TopicAssignment.of("orders", {0: [1]}))
    started = {cid: start_controller(processes, zk_connect, cid) for cid in (1001, 1002)}

    # Exactly one wins the race; the other stands by; one election happened.
    def settled() -> bool:
        return all(
            any(elected(cid, 1) in p.log() or standing_by(other) in p.log() for other in started)
            for cid, p in started.items()
        )

    wait_until(settled, timeout=60, message="both controllers to settle")
    active_id = zk_client.get_controller_id()
    assert active_id in started
    standby_id = next(cid for cid in started if cid != active_id)
    assert elected(active_id, 1) in started[active_id].log()
    assert standing_by(active_id) in started[standby_id].log()
    assert "successfully elected" not in started[standby_id].log()
    assert zk_client.get_controller_epoch() == (1, 1)

    # The active one initialized the partition and told the broker.
    wait_until(lambda: P0 in broker.partition_states(controller_epoch=1), message="LeaderAndIsr of epoch 1")
    assert zk_client.get_partition_state(P0) == LeaderIsrAndControllerEpoch(1, 0, (1,), 1, zk_version=0)

    started[active_id].signal(signal.SIGKILL)
    killed_at = time.monotonic()
    wait_until(lambda: zk_client.get_controller_id() == standby_id, timeout=SESSION_TIMEOUT_MS / 1000 + 30)
    took_over_after = time.monotonic() - killed_at
    assert took_over_after < SESSION_TIMEOUT_MS / 1000 + 10
    assert zk_client.get_controller_epoch() == (2, 2)
    wait_until(lambda: elected(standby_id, 2) in started[standby_id].log())

    # The new controller resends the cluster's state under its own epoch; the partition itself is unchanged.
    wait_until(lambda: P0 in broker.partition_states(controller_epoch=2), message="LeaderAndIsr of epoch 2")
    resent = broker.partition_states(controller_epoch=2)[P0]
    assert (resent.leader, resent.leader_epoch, resent.controller_epoch, resent.is_new) == (1, 0, 1, False)
    request = next(r for r in broker.leader_and_isr() if r.controller_epoch == 2)
    assert (request.controller_id, request.broker_epoch) == (standby_id, broker_epoch)
    assert zk_client.get_partition_state(P0) == LeaderIsrAndControllerEpoch(1, 0, (1,), 1, zk_version=0)


def test_a_controller_stopped_with_sigterm_hands_over_at_once(
    zk_client: KafkaZkClient, zk_connect: str, processes: StartProcess, wait_until: WaitUntil
) -> None:
    # A long session: a hand-over that waited for the session to expire would fail the deadline below.
    long_session = "zookeeper.session.timeout.ms=60000"
    first = start_controller(processes, zk_connect, 1001, long_session)
    wait_until(lambda: zk_client.get_controller_id() == 1001, timeout=60)
    second = start_controller(processes, zk_connect, 1002, long_session)
    wait_until(lambda: standing_by(1001) in second.log(), timeout=60)

    first.signal(signal.SIGTERM)
    assert first.wait(30) == 0
    wait_until(lambda: zk_client.get_controller_id() == 1002, timeout=15)
    assert zk_client.get_controller_epoch() == (2, 2)
    assert "Resigning" in first.log()


def test_the_controller_initializes_new_topics_and_keeps_brokers_informed(
    zk_client: KafkaZkClient,
    zk_clients: Connect,
    zk_connect: str,
    processes: StartProcess,
    brokers: Callable[..., RecordingBroker],
    wait_until: WaitUntil,
) -> None:
    broker1, broker2 = brokers(), brokers()
    _, epoch1 = register(zk_clients, 1, broker1.port)
    session2, epoch2 = register(zk_clients, 2, broker2.port)
    # Short attempts, so a broker that is not listening yet makes the controller retry.
    controller = start_controller(processes, zk_connect, 1001, "controller.socket.timeout.ms=500")
    wait_until(lambda: zk_client.get_controller_id() == 1001, timeout=60)

    # Broker 3 is not registered: the first live replica leads, the ISR is the live replicas in assignment order.
    zk_client.create_topic(TopicAssignment.of("orders", {0: [1, 2, 3], 1: [3, 2, 1]}))
    wait_until(lambda: len(zk_client.get_partition_states([P0, P1])) == 2, message="partition states")
    assert zk_client.get_partition_states([P0, P1]) == {
        P0: LeaderIsrAndControllerEpoch(1, 0, (1, 2), 1, zk_version=0),
        P1: LeaderIsrAndControllerEpoch(2, 0, (2, 1), 1, zk_version=0),
    }

    for broker, broker_epoch in ((broker1, epoch1), (broker2, epoch2)):
        wait_until(lambda b=broker: {P0, P1} <= b.partition_states(controller_epoch=1).keys(), message="LeaderAndIsr")
        states = broker.partition_states(controller_epoch=1)
        assert [(states[tp].leader, list(states[tp].isr), list(states[tp].replicas)) for tp in (P0, P1)] == [
            (1, [1, 2], [1, 2, 3]),
            (2, [2, 1], [3, 2, 1]),
        ]
        assert all(states[tp].is_new for tp in (P0, P1))
        for request in broker.leader_and_isr():
            assert (request.controller_id, request.controller_epoch, request.broker_epoch) == (1001, 1, broker_epoch)
        assert {credential for _, credential in broker.requests()} == {CREDENTIAL}
        wait_until(lambda b=broker: _metadata_for(b, P1) is not None, message="UpdateMetadata")
        metadata = _metadata_for(broker, P1)
        assert metadata is not None
        assert (metadata.leader, list(metadata.offline_replicas)) == (2, [3])

    # Broker 3 registers before it listens: the controller retries until it answers.
    port3 = free_port()
    _, epoch3 = register(zk_clients, 3, port3)
    wait_until(lambda: "fails to send request" in controller.log() and f":{port3}" in controller.log(), timeout=30)
    broker3 = brokers(port3)
    wait_until(lambda: {P0, P1} <= broker3.partition_states(controller_epoch=1).keys(), message="broker 3's replicas")
    states3 = broker3.partition_states(controller_epoch=1)
    assert [(states3[tp].leader, states3[tp].is_new) for tp in (P0, P1)] == [(1, False), (2, False)]
    assert {r.broker_epoch for r in broker3.leader_and_isr()} == {epoch3}
    # Everyone learns of broker 3; broker 3 learns every partition.
    for broker in (broker1, broker2, broker3):
        wait_until(lambda b=broker: _live_brokers(b) == [1, 2, 3], message="live brokers 1, 2, 3")
    assert _metadata_for(broker3, P0) is not None

    # Broker 1, leader of orders-0, adds 3 to its ISR and tells the controller: everyone gets the new ISR.
    grown = LeaderIsrAndControllerEpoch(1, 0, (1, 2, 3), 1)
    assert zk_client.conditional_update_partition_state(P0, grown, expected_version=0) == (True, 1)
    zk_client.propagate_isr_changes([P0])
    for broker in (broker1, broker2, broker3):
        wait_until(lambda b=broker: _isr_of(b, P0) == [1, 2, 3], message="the new ISR")
    wait_until(lambda: zk_client.get_isr_change_notifications() == [], message="notifications deleted")

    # Broker 2 goes away: orders-1, which it led, elects broker 1 (its live ISR member), which leads it alone;
    # broker 2 leaves orders-0's ISR. Everyone learns it, the new leader by LeaderAndIsr.
    session2.close()
    for broker in (broker1, broker3):
        wait_until(lambda b=broker: _live_brokers(b) == [1, 3], message="live brokers 1, 3")
        wait_until(lambda b=broker: _isr_of(b, P1) == [1], message="orders-1's new ISR")
    metadata = _metadata_for(broker1, P1)
    assert metadata is not None
    assert (metadata.leader, metadata.leader_epoch, list(metadata.offline_replicas)) == (1, 1, [2])
    assert _isr_of(broker3, P0) == [1, 3]
    assert zk_client.get_partition_states([P1])[P1] == LeaderIsrAndControllerEpoch(1, 1, (1,), 1, zk_version=1)
    wait_until(lambda: broker1.partition_states(controller_epoch=1)[P1].leader_epoch == 1, message="LeaderAndIsr")


def _latest_update_metadata(broker: RecordingBroker) -> pb.UpdateMetadataRequest | None:
    requests = broker.update_metadata()
    return requests[-1] if requests else None


def _live_brokers(broker: RecordingBroker) -> list[int]:
    latest = _latest_update_metadata(broker)
    return [] if latest is None else sorted(b.id for b in latest.live_brokers)


def _metadata_for(broker: RecordingBroker, tp: TopicPartition) -> pb.UpdateMetadataPartitionState | None:
    """The latest state of tp any UpdateMetadata told this broker."""
    found = None
    for request in broker.update_metadata():
        for s in request.partition_states:
            if (s.topic_name, s.partition_index) == tp:
                found = s
    return found


def _isr_of(broker: RecordingBroker, tp: TopicPartition) -> list[int] | None:
    metadata = _metadata_for(broker, tp)
    return None if metadata is None else list(metadata.isr)


# --- fencing and session loss, with a controller in this process ---


InProcessController = Callable[[int], tuple[KafkaController, KafkaZkClient]]


@pytest.fixture
def in_process_controller(zk_clients: Connect) -> Iterator[InProcessController]:
    """start(controller_id): a controller running in this process, and its ZooKeeper session."""
    started: list[KafkaController] = []

    def start(controller_id: int) -> tuple[KafkaController, KafkaZkClient]:
        zk = zk_clients(session_timeout_ms=SESSION_TIMEOUT_MS)
        zk.ensure_persistent_paths()
        config = ControllerConfig.from_props({"zookeeper.connect": zk.hosts, "controller.id": str(controller_id)})
        controller = KafkaController(config, zk)
        started.append(controller)
        controller.startup()
        return controller, zk

    yield start
    for controller in started:
        controller.shutdown()


def test_an_active_controller_whose_session_expires_resigns_and_runs_again(
    in_process_controller: InProcessController,
    expire_session: Callable[[KafkaZkClient], None],
    zk_client: KafkaZkClient,
    wait_until: WaitUntil,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="controller")
    controller, session = in_process_controller(1001)
    wait_until(lambda: ready(1) in caplog.text, timeout=30, message="failover done")

    expire_session(session)
    # Nobody else runs: once its new session is up, it is elected again, with the next epoch.
    wait_until(lambda: controller.is_active and controller.context.epoch == 2, timeout=60)
    log = caplog.text
    assert log.index("Resigning") < log.index(elected(1001, 2))
    assert zk_client.get_controller_epoch() == (2, 2)


def test_a_fenced_write_makes_the_active_controller_resign(
    in_process_controller: InProcessController,
    zk_client: KafkaZkClient,
    zk_clients: Connect,
    zk_connect: str,
    brokers: Callable[..., RecordingBroker],
    wait_until: WaitUntil,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="controller")
    broker = brokers()
    register(zk_clients, 1, broker.port)
    controller, _ = in_process_controller(1001)
    wait_until(lambda: ready(1) in caplog.text, timeout=30, message="failover done")

    # A newer controller epoch appears behind the controller's back; its /controller znode stays.
    root = KazooClient(hosts=zk_connect)
    root.start(30)
    try:
        root.set(paths.CONTROLLER_EPOCH, paths.encode_controller_epoch(7))

        # Its next write - initializing the new topic's partition - is fenced: it resigns and writes nothing.
        zk_client.create_topic(TopicAssignment.of("orders", {0: [1]}))
        wait_until(lambda: not controller.is_active, timeout=30, message="resignation")
        assert "Controller moved to another controller when processing TopicChange. Resigning" in caplog.text
        assert zk_client.get_partition_state(P0) is None
        assert controller.context.all_topics == set()

        # When /controller goes, it runs again and wins the epoch after the newer one.
        root.delete(paths.CONTROLLER)
    finally:
        root.stop()
        root.close()
    wait_until(lambda: controller.is_active and controller.context.epoch == 8, timeout=30, message="re-election")
    wait_until(lambda: zk_client.get_partition_state(P0) is not None, timeout=30)
    assert zk_client.get_partition_state(P0) == LeaderIsrAndControllerEpoch(1, 0, (1,), 8, zk_version=0)
    wait_until(lambda: P0 in broker.partition_states(controller_epoch=8), message="LeaderAndIsr of epoch 8")
    assert P0 not in broker.partition_states(controller_epoch=1)

"""Broker failure, leader election and topic deletion with real processes: a real ZooKeeper, the real controller,
brokers killed with SIGKILL. Short session timeouts (conftest.BROKER_SESSION_TIMEOUT_MS) make a dead broker's
registration go within seconds; every wait has a deadline on a condition, none is a fixed sleep."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from client import Producer
from client.future import FutureRecordMetadata
from common.record import ProducerRecord, build_batch, iter_batches
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.auth import CLUSTER_CREDENTIAL_METADATA_KEY
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.integration.conftest import CLUSTER_CREDENTIAL
from tests.integration.replicated_topic import FAST_REPLICATION
from zk.client import KafkaZkClient
from zk.paths import NO_LEADER, LeaderIsrAndControllerEpoch

if TYPE_CHECKING:
    from conftest import BrokerProcess, LoggedProcess, StartBroker, StartBrokers, StartController, WaitUntil

pytestmark = pytest.mark.integration

BROKER_IDS = (1, 2, 3)
BROKER_OVERRIDES = FAST_REPLICATION
# Generous for a loaded 2-core machine: session timeout (3 s) + election + metadata propagation.
FAILOVER_DEADLINE_S = 20.0


@dataclass
class Cluster:
    brokers: dict[int, BrokerProcess]
    controller: LoggedProcess
    zk: KafkaZkClient
    start_broker: StartBroker
    channels: dict[int, grpc.Channel] = field(default_factory=dict)
    # Kept across kills and restarts (the directory a broker id uses never changes).
    log_dirs: dict[int, Path] = field(init=False)

    def __post_init__(self) -> None:
        self.log_dirs = {b.broker_id: b.log_dir for b in self.brokers.values()}

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    def client(self, broker_id: int) -> pb_grpc.KafkaClientStub:
        if broker_id not in self.channels:
            self.channels[broker_id] = grpc.insecure_channel(self.brokers[broker_id].address)
        return pb_grpc.KafkaClientStub(self.channels[broker_id])

    def state(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch:
        state = self.zk.get_partition_state(tp)
        assert state is not None, f"no state for {tp}"
        return state

    def create_topic(self, name: str, assignment: Sequence[Sequence[int]], configs: Mapping[str, str]) -> None:
        request = pb.CreateTopicsRequest(timeout_ms=20_000)
        topic = request.topics.add(name=name, num_partitions=-1, replication_factor=-1)
        for partition, replicas in enumerate(assignment):
            topic.assignments.add(partition_index=partition, broker_ids=replicas)
        for key, value in configs.items():
            topic.configs.add(name=key, value=value)
        result = self.client(min(self.brokers)).CreateTopics(request, timeout=30).topics[0]
        assert result.error_code == ErrorCode.NONE, result.error_message

    def produce(self, tp: TopicPartition, value: str) -> int:
        """One acks=all record to the partition's leader (per ZooKeeper); its error code (LEADER_NOT_AVAILABLE
        while there is none, NETWORK_EXCEPTION if the leader could not be reached)."""
        leader = self.state(tp).leader
        if leader not in self.brokers:
            return ErrorCode.LEADER_NOT_AVAILABLE
        request = pb.ProduceRequest(acks=-1, timeout_ms=5_000)
        records = build_batch([ProducerRecord(value.encode(), timestamp=1_000)])
        request.topics.add(name=tp.topic).partitions.add(index=tp.partition, records=records)
        try:
            return int(self.client(leader).Produce(request, timeout=15).responses[0].partitions[0].error_code)
        except grpc.RpcError:
            return ErrorCode.NETWORK_EXCEPTION

    def kill(self, *broker_ids: int) -> None:
        for broker_id in broker_ids:
            self.brokers[broker_id].process.signal(signal.SIGKILL)
        for broker_id in broker_ids:
            self.brokers.pop(broker_id).process.wait()
            channel = self.channels.pop(broker_id, None)
            if channel is not None:
                channel.close()

    def restart(self, broker_id: int) -> None:
        self.brokers[broker_id] = self.start_broker(broker_id, BROKER_OVERRIDES)

    def log_dir(self, broker_id: int) -> Path:
        return self.log_dirs[broker_id]

    def stored_values(self, broker_id: int, tp: TopicPartition) -> list[bytes | None]:
        partition_dir = self.log_dir(broker_id) / f"{tp.topic}-{tp.partition}"
        return [
            r.value
            for segment in sorted(partition_dir.glob("*.log"))
            for batch in iter_batches(segment.read_bytes())
            for r in batch.records
        ]


@pytest.fixture
def cluster(
    start_brokers: StartBrokers, start_broker: StartBroker, start_controller: StartController, zk_client: KafkaZkClient
) -> Iterator[Cluster]:
    brokers = start_brokers(BROKER_IDS, BROKER_OVERRIDES)
    c = Cluster(brokers, start_controller(), zk_client, start_broker)
    try:
        yield c
    finally:
        for channel in c.channels.values():
            channel.close()


def in_sync(cluster: Cluster, tp: TopicPartition, isr: Sequence[int]) -> bool:
    state = cluster.zk.get_partition_state(tp)
    return state is not None and sorted(state.isr) == sorted(isr)


# ------------------------------------------------------------------ leader failure under load


@dataclass
class Load:
    """An idempotent acks=all producer sending numbered records until stopped; what was acknowledged, when."""

    producer: Producer
    tp: TopicPartition
    acked: list[tuple[float, bytes]] = field(default_factory=list)
    failed: list[bytes] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    in_flight: threading.BoundedSemaphore = field(default_factory=lambda: threading.BoundedSemaphore(50))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            if not self.in_flight.acquire(timeout=0.1):
                continue
            value = f"r{i:06d}".encode()
            i += 1
            self.producer.send(self.tp.topic, value, partition=self.tp.partition,
                               callback=lambda f, v=value: self._done(f, v))

    def _done(self, future: FutureRecordMetadata, value: bytes) -> None:
        with self.lock:
            if future.exception(0) is None:
                self.acked.append((time.monotonic(), value))
            else:
                self.failed.append(value)
        self.in_flight.release()

    def acked_since(self, moment: float) -> list[float]:
        with self.lock:
            return [t for t, _ in self.acked if t > moment]


def test_killing_the_leader_under_acks_all_load_loses_no_acknowledged_record(
    cluster: Cluster, wait_until: WaitUntil
) -> None:
    tp = TopicPartition("load", 0)
    cluster.create_topic(tp.topic, [[1, 2, 3]], {"min.insync.replicas": "2"})
    wait_until(lambda: in_sync(cluster, tp, BROKER_IDS), message="all three replicas in sync")
    producer = Producer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                        request_timeout_ms=5_000, delivery_timeout_ms=120_000, retry_backoff_ms=50)
    load = Load(producer, tp)
    thread = threading.Thread(target=load.run, name="acks-all-load", daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(load.acked_since(0)) >= 200, message="200 records acknowledged before the kill")
        old = cluster.state(tp)
        killed_at = time.monotonic()
        cluster.kill(old.leader)
        wait_until(lambda: cluster.state(tp).leader not in (old.leader, NO_LEADER), timeout=FAILOVER_DEADLINE_S,
                   message="a new leader in ZooKeeper")
        elected_at = time.monotonic()
        new = cluster.state(tp)
        wait_until(lambda: load.acked_since(elected_at), timeout=FAILOVER_DEADLINE_S,
                   message="the first acknowledgement from the new leader")
        first_ack = load.acked_since(elected_at)[0]
        wait_until(lambda: len(load.acked_since(elected_at)) >= 200, message="200 records acknowledged after")
    finally:
        load.stop.set()
        thread.join(30)
        producer.close(timeout=30)
    print(f"\nfailover: leader {old.leader} killed; broker {new.leader} elected (leader epoch {old.leader_epoch} -> "
          f"{new.leader_epoch}, ISR {list(new.isr)}) {elected_at - killed_at:.2f}s after the kill (session timeout "
          f"3.0s); first acks=all acknowledgement {first_ack - elected_at:.2f}s after the election, "
          f"{first_ack - killed_at:.2f}s after the kill")
    assert first_ack - killed_at < FAILOVER_DEADLINE_S
    assert new.leader_epoch == old.leader_epoch + 1 and old.leader not in new.isr
    acked = [v for _, v in sorted(load.acked)]
    stored = cluster.stored_values(new.leader, tp)
    # Every acknowledged record is on the new leader, in the order it was sent, once (idempotence).
    missing = set(acked) - set(stored)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    assert [v for v in stored if v in set(acked)] == sorted(acked)
    assert len(stored) == len(set(stored)), "a retried record was written twice"


# ------------------------------------------------------------------ a paused leader


def test_a_leader_replaced_while_paused_acknowledges_nothing_after_it_resumes(
    cluster: Cluster, wait_until: WaitUntil
) -> None:
    """SIGSTOP the leader until its session expires and another replica leads, then SIGCONT it with an acks=all
    produce waiting in its socket: it still believes it leads, but its followers fetch elsewhere and its ISR write
    would fail the znode version check, so the record is never acknowledged; it becomes a follower and truncates
    it away."""
    tp = TopicPartition("paused-leader", 0)
    cluster.create_topic(tp.topic, [[1, 2, 3]], {"min.insync.replicas": "2"})
    wait_until(lambda: in_sync(cluster, tp, BROKER_IDS), message="all three replicas in sync")
    assert cluster.produce(tp, "before") == ErrorCode.NONE
    old = cluster.state(tp)
    stub = cluster.client(old.leader)
    request = pb.ProduceRequest(acks=-1, timeout_ms=5_000)
    request.topics.add(name=tp.topic).partitions.add(
        index=tp.partition, records=build_batch([ProducerRecord(b"stale", timestamp=1_000)]))
    cluster.brokers[old.leader].process.signal(signal.SIGSTOP)
    try:
        wait_until(lambda: cluster.state(tp).leader not in (old.leader, NO_LEADER), timeout=FAILOVER_DEADLINE_S,
                   message="another replica elected")
        new = cluster.state(tp)
        assert new.leader_epoch > old.leader_epoch and old.leader not in new.isr

        def produced_after() -> bool:
            # ZooKeeper names the new leader before its LeaderAndIsr reaches it: NOT_LEADER_OR_FOLLOWER meanwhile,
            # answered before any append, so a retry (as every client's) cannot write the record twice.
            error = cluster.produce(tp, "after")
            assert error in (ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER), ErrorCode(error).name
            return error == ErrorCode.NONE

        wait_until(produced_after, timeout=FAILOVER_DEADLINE_S, message="the new leader to take 'after'")
        # Sent to the frozen broker: it reads the request first thing when it wakes up.
        stale = stub.Produce.future(request, timeout=30)
    finally:
        cluster.brokers[old.leader].process.signal(signal.SIGCONT)
    error = stale.result().responses[0].partitions[0].error_code
    assert error != ErrorCode.NONE, "a replaced leader acknowledged an acks=all write"

    # It rejoins as a follower of the new leader, without the record nobody acknowledged.
    wait_until(lambda: in_sync(cluster, tp, BROKER_IDS), timeout=2 * FAILOVER_DEADLINE_S,
               message="the old leader back in the ISR")
    assert cluster.state(tp).leader == new.leader
    assert cluster.produce(tp, "last") == ErrorCode.NONE
    wait_until(lambda: b"last" in cluster.stored_values(old.leader, tp), message="the old leader caught up")
    for broker_id in BROKER_IDS:
        assert cluster.stored_values(broker_id, tp) == [b"before", b"after", b"last"], f"broker {broker_id}"
    print(f"\nthe replaced leader answered {ErrorCode(error).name}")


# ------------------------------------------------------------------ a paused controller


def test_a_paused_controller_resumed_after_its_successor_took_over_changes_nothing(
    cluster: Cluster, start_controller: StartController, wait_until: WaitUntil
) -> None:
    """SIGSTOP the active controller while it is busy (a stream of preferred replica election requests keeps its
    event thread working), let its session expire and the standby take over and elect, then SIGCONT it: it resigns
    before acting in its new session, whatever it was doing fails the controller epoch fence, and the brokers refuse
    its epoch."""
    old, old_id, new_id = cluster.controller, 1000, 1001
    wait_until(lambda: cluster.zk.get_controller_id() == old_id, message="the first controller elected")
    standby = start_controller(new_id)
    wait_until(lambda: f"Controller {old_id} has been elected as the controller" in standby.log(),
               message="the second controller standing by")
    moved, kept = TopicPartition("fenced", 0), TopicPartition("fenced", 1)
    cluster.create_topic("fenced", [[1, 2, 3], [2, 3, 1]], {"min.insync.replicas": "2"})
    for tp in (moved, kept):
        wait_until(lambda tp=tp: in_sync(cluster, tp, BROKER_IDS), message="all three replicas in sync")
    old_epoch = cluster.zk.get_controller_epoch()
    assert old_epoch is not None

    # Work for the old controller's event thread: each request is read, found already satisfied, and its znode
    # deleted with a fenced write.
    stop_requests = threading.Event()

    def request_preferred_elections() -> None:
        while not stop_requests.is_set():
            cluster.zk.create_preferred_replica_election([kept])
            stop_requests.wait(0.005)

    requests = threading.Thread(target=request_preferred_elections, name="preferred-elections", daemon=True)
    requests.start()
    wait_until(lambda: old.log().count("Valid replica already elected for partitions fenced-1") >= 3,
               message="the old controller busy with the requests")
    old.signal(signal.SIGSTOP)
    try:
        def successor_epoch() -> bool:
            epoch = cluster.zk.get_controller_epoch()
            return cluster.zk.get_controller_id() == new_id and epoch is not None and epoch[0] > old_epoch[0]

        wait_until(successor_epoch, timeout=FAILOVER_DEADLINE_S, message="the standby elected with a higher epoch")
        stop_requests.set()
        requests.join(30)
        new_epoch = cluster.zk.get_controller_epoch()
        assert new_epoch is not None
        wait_until(lambda: f"Ready to serve as the new controller with epoch {new_epoch[0]}" in standby.log(),
                   message="the successor's failover done")
        # The successor changes state: broker 1, leader of fenced-0, dies and another replica is elected.
        cluster.kill(1)
        wait_until(lambda: cluster.state(moved).leader in (2, 3) and cluster.state(moved).isr == (2, 3),
                   timeout=FAILOVER_DEADLINE_S, message="the successor's election")
        wait_until(lambda: in_sync(cluster, kept, (2, 3)), timeout=FAILOVER_DEADLINE_S, message="broker 1 out")
        wait_until(lambda: not cluster.zk.get_preferred_replica_election(), message="the last request served")
        before = {tp: cluster.state(tp) for tp in (moved, kept)}
        assert all(state.controller_epoch == new_epoch[0] for state in before.values())
    finally:
        old.signal(signal.SIGCONT)

    wait_until(lambda: f"Controller {new_id} has been elected as the controller, so stopping the election process."
               in old.log(), timeout=FAILOVER_DEADLINE_S, message="the old controller standing by")
    log = old.log()
    assert "Resigned" in log
    # It queued its resignation before its new session could bring it the broker change its successor handled.
    assert "Broker failure callback" not in log
    # Nothing the old controller did after waking up reached ZooKeeper: every znode it could write is as it was.
    assert {tp: cluster.state(tp) for tp in (moved, kept)} == before
    assert cluster.zk.get_controller_id() == new_id and cluster.zk.get_controller_epoch() == new_epoch
    fenced = "Controller moved to another controller when processing" in log
    print(f"\nold controller: {'its in-flight event failed the epoch fence' if fenced else 'no event in flight'}")

    # The brokers know the new epoch: a request of the old one is refused, and changes nothing.
    leader = before[moved].leader
    stale = pb.LeaderAndIsrRequest(
        controller_id=old_id, controller_epoch=old_epoch[0], broker_epoch=cluster.zk.get_broker(leader).epoch,
        partition_states=[pb.LeaderAndIsrPartitionState(
            topic_name=moved.topic, partition_index=moved.partition, controller_epoch=old_epoch[0],
            leader=3 if leader == 2 else 2, leader_epoch=before[moved].leader_epoch + 1, isr=[2, 3],
            replicas=[1, 2, 3])])
    with grpc.insecure_channel(cluster.brokers[leader].address) as channel:
        response = pb_grpc.KafkaClusterStub(channel).LeaderAndIsr(
            stale, metadata=((CLUSTER_CREDENTIAL_METADATA_KEY, CLUSTER_CREDENTIAL),), timeout=30)
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert cluster.produce(moved, "after the resume") == ErrorCode.NONE


# ------------------------------------------------------------------ two failures at once


def test_two_brokers_killed_at_once_refuse_acks_all_until_one_returns(cluster: Cluster, wait_until: WaitUntil) -> None:
    tp = TopicPartition("two-down", 0)
    cluster.create_topic(tp.topic, [[1, 2, 3]], {"min.insync.replicas": "2"})
    wait_until(lambda: in_sync(cluster, tp, BROKER_IDS), message="all three replicas in sync")
    acknowledged = ["before"]
    assert cluster.produce(tp, "before") == ErrorCode.NONE
    leader = cluster.state(tp).leader
    survivor, follower = sorted(b for b in BROKER_IDS if b != leader)
    cluster.kill(leader, follower)

    # Until the survivor leads alone, and after: every acks=all produce fails, none is acknowledged falsely.
    refused: list[str] = []

    def produce_refused() -> bool:
        value = f"refused-{len(refused)}"
        error = cluster.produce(tp, value)
        assert error != ErrorCode.NONE, "acks=all acknowledged with one live replica"
        refused.append(value)
        return error == ErrorCode.NOT_ENOUGH_REPLICAS

    wait_until(produce_refused, timeout=FAILOVER_DEADLINE_S, message="NOT_ENOUGH_REPLICAS from the survivor")
    state = cluster.state(tp)
    assert (state.leader, state.isr) == (survivor, (survivor,))

    cluster.restart(follower)
    wait_until(lambda: in_sync(cluster, tp, (survivor, follower)), timeout=30, message="the restarted follower in sync")
    wait_until(lambda: cluster.produce(tp, "after") == ErrorCode.NONE, message="acks=all again")
    acknowledged.append("after")
    # Refused records may be in the log (appended before the ISR shrank: NOT_ENOUGH_REPLICAS_AFTER_APPEND or a
    # timeout); acknowledged ones must be, on both in-sync replicas.
    for broker_id in (survivor, follower):
        stored = {v.decode() for v in cluster.stored_values(broker_id, tp) if v is not None}
        assert set(acknowledged) <= stored, f"broker {broker_id} lost acknowledged records"


# ------------------------------------------------------------------ unclean leader election


@pytest.mark.parametrize("unclean", [False, True], ids=["unclean-off", "unclean-on"])
def test_a_stale_replica_leads_only_with_unclean_election(cluster: Cluster, wait_until: WaitUntil,
                                                          unclean: bool) -> None:
    tp = TopicPartition("stale", 0)
    configs = {"min.insync.replicas": "1", "unclean.leader.election.enable": str(unclean).lower()}
    cluster.create_topic(tp.topic, [[1, 2]], configs)
    wait_until(lambda: in_sync(cluster, tp, (1, 2)), message="both replicas in sync")
    assert cluster.produce(tp, "in sync") == ErrorCode.NONE
    cluster.kill(2)
    wait_until(lambda: in_sync(cluster, tp, (1,)), timeout=FAILOVER_DEADLINE_S, message="broker 2 out of the ISR")
    assert cluster.produce(tp, "only on 1") == ErrorCode.NONE  # broker 2 is stale now
    cluster.kill(1)
    wait_until(lambda: cluster.state(tp).leader == NO_LEADER, timeout=FAILOVER_DEADLINE_S, message="no leader")
    assert cluster.state(tp).isr == (1,)  # the last in-sync replica stays in the ISR

    cluster.restart(2)
    if not unclean:
        wait_until(lambda: "No replica in ISR for partition stale-0 is alive. Live brokers are: [2,3]"
                   in cluster.controller.log(), timeout=FAILOVER_DEADLINE_S, message="the refused election")
        assert cluster.state(tp).leader == NO_LEADER
        assert "Unclean leader election" not in cluster.controller.log()
        return
    wait_until(lambda: cluster.state(tp).leader == 2, timeout=FAILOVER_DEADLINE_S, message="broker 2 elected")
    assert cluster.state(tp).isr == (2,)
    assert "Unclean leader election. No broker in ISR is alive for stale-0" in cluster.controller.log()
    assert "There's potential data loss" in cluster.controller.log()
    wait_until(lambda: cluster.produce(tp, "after") == ErrorCode.NONE, message="broker 2 serving")
    assert b"only on 1" not in cluster.stored_values(2, tp)


# ------------------------------------------------------------------ topic deletion


def partition_dirs(cluster: Cluster, broker_id: int, topic: str) -> list[str]:
    return sorted(p.name for p in cluster.log_dir(broker_id).iterdir() if p.name.startswith(f"{topic}-"))


def delete_topic(cluster: Cluster, topic: str) -> None:
    request = pb.DeleteTopicsRequest(topic_names=[topic], timeout_ms=0)
    (result,) = cluster.client(min(cluster.brokers)).DeleteTopics(request, timeout=30).responses
    assert result.error_code == ErrorCode.NONE, result.error_message


def deleted_from_zookeeper(cluster: Cluster, topic: str) -> bool:
    zk = cluster.zk
    return topic not in zk.get_all_topics() and topic not in zk.get_topic_deletions() and not zk.get_topic_config(topic)


@pytest.mark.parametrize("broker_down", [False, True], ids=["all-up", "broker-down"])
def test_topic_deletion_removes_logs_everywhere_and_the_znodes(cluster: Cluster, wait_until: WaitUntil,
                                                               broker_down: bool) -> None:
    cluster.create_topic("doomed", [[1, 2, 3], [2, 3, 1]], {})
    cluster.create_topic("kept", [[1, 2, 3]], {})
    for p in (0, 1):
        wait_until(lambda p=p: in_sync(cluster, TopicPartition("doomed", p), BROKER_IDS), message="in sync")
        assert cluster.produce(TopicPartition("doomed", p), "doomed record") == ErrorCode.NONE
    for b in BROKER_IDS:
        assert partition_dirs(cluster, b, "doomed") == ["doomed-0", "doomed-1"]
    if broker_down:
        cluster.kill(3)
        wait_until(lambda: 3 not in {b.id for b in cluster.zk.get_all_brokers()}, timeout=FAILOVER_DEADLINE_S,
                   message="broker 3's registration to go")

    delete_topic(cluster, "doomed")
    live = [b for b in BROKER_IDS if b in cluster.brokers]
    wait_until(lambda: all(partition_dirs(cluster, b, "doomed") == [] for b in live), timeout=30,
               message="the logs deleted on the live brokers")
    if broker_down:
        # Broker 3 still has its replicas: the topic stays until it returns.
        wait_until(lambda: "Halted deletion of topics doomed" in cluster.controller.log(), message="halted")
        assert "doomed" in cluster.zk.get_all_topics() and "doomed" in cluster.zk.get_topic_deletions()
        assert partition_dirs(cluster, 3, "doomed") == ["doomed-0", "doomed-1"]
        cluster.restart(3)
        wait_until(lambda: partition_dirs(cluster, 3, "doomed") == [], timeout=30, message="broker 3's logs deleted")
    wait_until(lambda: deleted_from_zookeeper(cluster, "doomed"), timeout=30, message="the znodes deleted")
    # The controller logs completion after its last znode delete: the log line may trail the znodes by a moment.
    wait_until(lambda: "Deletion of topic doomed successfully completed" in cluster.controller.log(), timeout=10,
               message="the controller to log the completed deletion")
    # The other topic is untouched, and the brokers no longer know the deleted one.
    assert cluster.produce(TopicPartition("kept", 0), "still here") == ErrorCode.NONE
    metadata = cluster.client(1).Metadata(pb.MetadataRequest(topics=["doomed"], allow_auto_topic_creation=False),
                                          timeout=30)
    assert [t.error_code for t in metadata.topics] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


def test_a_topic_with_the_longest_name_is_deleted(cluster: Cluster, zk_connect: str, wait_until: WaitUntil) -> None:
    """249 characters: its `<topic>-<p>.<uuid>-delete` dir name is cut to 255 bytes, as Kafka does, so the
    deletion completes; afterwards an election over all partitions has nothing pending to fail on."""
    topic = "t" * 249
    cluster.create_topic(topic, [[1, 2, 3]], {})
    tp = TopicPartition(topic, 0)
    wait_until(lambda: in_sync(cluster, tp, BROKER_IDS), message="in sync")
    assert cluster.produce(tp, "long-named record") == ErrorCode.NONE
    delete_topic(cluster, topic)
    wait_until(lambda: all(not any(p.is_dir() for p in cluster.log_dir(b).iterdir()) for b in BROKER_IDS),
               timeout=30, message="the partition dirs (and their -delete dirs) gone on every broker")
    wait_until(lambda: deleted_from_zookeeper(cluster, topic), timeout=30, message="the znodes deleted")
    # The controller logs the completion just after deleting the znodes.
    wait_until(lambda: f"Deletion of topic {topic} successfully completed" in cluster.controller.log(),
               timeout=30, message="the controller's completion line")
    for b in BROKER_IDS:
        assert "File name too long" not in cluster.brokers[b].process.log()
    election = subprocess.run(
        [sys.executable, "-m", "minibroker.cli", "leader-election", "--election-type", "preferred",
         "--all-topic-partitions", "--zookeeper", zk_connect], capture_output=True, text=True, timeout=60)
    assert election.returncode == 0, election.stdout + election.stderr

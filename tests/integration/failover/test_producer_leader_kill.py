"""Producers keep getting acknowledgements across SIGKILLed leaders (real ZooKeeper, controller and brokers).

A chaos run once saw two of four producers get nothing acknowledged for their whole delivery timeout
after a leader was SIGKILLed, while the others were back within seconds. A dead local process resets its
connections, so nothing should wait for request_timeout_ms: each producer must be acknowledged again on
every partition within the time the controller needs to elect new leaders. request_timeout_ms and
delivery_timeout_ms are set far above that bound, so a request left hanging shows up as a failure.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import grpc
import pytest

from client import Producer
from client.future import FutureRecordMetadata
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.integration.replicated_topic import FAST_REPLICATION
from zk.client import KafkaZkClient

if TYPE_CHECKING:
    from conftest import BrokerProcess, StartBroker, StartBrokers, StartController, WaitUntil

pytestmark = pytest.mark.integration

BROKER_IDS = (1, 2, 3)
BROKER_OVERRIDES = FAST_REPLICATION
TOPIC = "leader-kill"
PARTITIONS = 6
KILLS = 3
# Far above the bound below: a request that waits for its timeout cannot pass for a slow failover.
REQUEST_TIMEOUT_MS = 60_000
# Session timeout (conftest.BROKER_SESSION_TIMEOUT_MS, 3 s) + election + metadata propagation, with room for a
# loaded 2-core machine; a third of request_timeout_ms.
RECOVERY_BOUND_S = 20.0


@dataclass
class Writer:
    """One Producer sending to every partition in turn until stopped; when each partition was last acknowledged."""

    name: str
    producer: Producer
    acked_at: dict[int, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        i = 0
        while not self.stop.wait(0.005):  # ~100 records/s per partition at most, as a chaos writer
            partition = i % PARTITIONS
            self.producer.send(TOPIC, f"{self.name}-{i}".encode(), partition=partition,
                               callback=lambda f, p=partition: self._done(f, p))
            i += 1

    def _done(self, future: FutureRecordMetadata, partition: int) -> None:
        error = future.exception(0)
        with self.lock:
            if error is None:
                self.acked_at[partition] = time.monotonic()
            else:
                self.errors.append(f"{self.name} partition {partition}: {error}")

    def partitions_acked_since(self, moment: float) -> set[int]:
        with self.lock:
            return {p for p, at in self.acked_at.items() if at > moment}


@dataclass
class Cluster:
    brokers: dict[int, BrokerProcess]
    zk: KafkaZkClient
    start_broker: StartBroker

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    def create_topic(self) -> None:
        request = pb.CreateTopicsRequest(timeout_ms=20_000)
        # Every partition prefers the same broker, so one kill takes every leader of a producer at once: with
        # all its partitions waiting, nothing but the sender's own timers makes it look again.
        topic = request.topics.add(name=TOPIC, num_partitions=-1, replication_factor=-1)
        for partition in range(PARTITIONS):
            topic.assignments.add(partition_index=partition, broker_ids=BROKER_IDS)
        topic.configs.add(name="min.insync.replicas", value="2")
        with grpc.insecure_channel(self.brokers[1].address) as channel:
            result = pb_grpc.KafkaClientStub(channel).CreateTopics(request, timeout=30).topics[0]
        assert result.error_code == ErrorCode.NONE, result.error_message

    def leaders(self) -> dict[int, int]:
        states = {p: self.zk.get_partition_state(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
        return {p: s.leader for p, s in states.items() if s is not None}

    def full_isr(self) -> bool:
        states = [self.zk.get_partition_state(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)]
        return all(s is not None and sorted(s.isr) == list(BROKER_IDS) for s in states)

    def kill(self, broker_id: int) -> None:
        broker = self.brokers.pop(broker_id)
        broker.process.signal(signal.SIGKILL)
        broker.process.wait()

    def restart(self, broker_id: int) -> None:
        self.brokers[broker_id] = self.start_broker(broker_id, BROKER_OVERRIDES)


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_broker: StartBroker, start_controller: StartController,
            zk_client: KafkaZkClient) -> Cluster:
    brokers = start_brokers(BROKER_IDS, BROKER_OVERRIDES)
    start_controller()
    return Cluster(brokers, zk_client, start_broker)


@pytest.fixture
def writers(cluster: Cluster, wait_until: WaitUntil) -> Iterator[list[Writer]]:
    cluster.create_topic()
    wait_until(cluster.full_isr, message="topic created with full ISR")
    settings = dict(bootstrap_servers=cluster.bootstrap, linger_ms=5, request_timeout_ms=REQUEST_TIMEOUT_MS,
                    delivery_timeout_ms=2 * REQUEST_TIMEOUT_MS)
    writers = [Writer(f"w{i}", Producer(acks="all", enable_idempotence=True, **settings)) for i in range(3)]
    writers.append(Writer("a1", Producer(acks=1, **settings)))
    threads = [threading.Thread(target=w.run, name=w.name, daemon=True) for w in writers]
    for thread in threads:
        thread.start()
    try:
        yield writers
    finally:
        for w in writers:
            w.stop.set()
        for thread in threads:
            thread.join(10)
        for w in writers:
            w.producer.close(timeout=5)


def test_every_producer_is_acknowledged_again_soon_after_each_leader_kill(
    cluster: Cluster, writers: list[Writer], wait_until: WaitUntil
) -> None:
    start = time.monotonic()
    wait_until(lambda: all(w.partitions_acked_since(start) == set(range(PARTITIONS)) for w in writers),
               message="every writer acknowledged on every partition before the kills")
    for _ in range(KILLS):
        leaders = cluster.leaders()
        victim = max(cluster.brokers, key=lambda b: sum(1 for leader in leaders.values() if leader == b))
        led = sum(1 for leader in leaders.values() if leader == victim)
        killed_at = time.monotonic()
        cluster.kill(victim)
        deadline = killed_at + RECOVERY_BOUND_S
        recovered_at: dict[str, float] = {}
        while len(recovered_at) < len(writers) and time.monotonic() < deadline:
            for w in writers:
                if w.name not in recovered_at and w.partitions_acked_since(killed_at) == set(range(PARTITIONS)):
                    recovered_at[w.name] = time.monotonic() - killed_at
            time.sleep(0.01)
        stalled = {w.name: sorted(set(range(PARTITIONS)) - w.partitions_acked_since(killed_at))
                   for w in writers if w.name not in recovered_at}
        assert not stalled, (f"broker {victim} killed; writers with partitions not acknowledged within"
                             f" {RECOVERY_BOUND_S} s: {stalled} (recovered: {recovered_at})")
        print(f"\nbroker {victim} (leader of {led} partitions) killed: every writer acknowledged on every partition"
              f" again after {', '.join(f'{n} {s:.2f}s' for n, s in sorted(recovered_at.items()))}")
        cluster.restart(victim)
        wait_until(cluster.full_isr, timeout=60, message=f"broker {victim} back in every ISR")
    for w in writers:
        assert not w.errors, f"{w.name} failed records: {w.errors[:5]}"

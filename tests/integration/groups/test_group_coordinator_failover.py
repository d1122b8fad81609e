"""SIGKILL the broker coordinating a group (issue 15's third proof): the leader of the group's __consumer_offsets
partition, killed once during a stream of commits and once in the middle of a rebalance. The group moves to the
partition's new leader (FindCoordinator, through librdkafka's DescribeConsumerGroups, names it), no acknowledged
commit is lost (read back with kafka-python's OffsetFetch), and the members are back in a Stable group with the
same member ids: they found the new coordinator within their session timeout."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.integration.group_cluster import GroupCluster, assignments, covers_once, group_cluster
from tests.integration.kafka_cluster import KAFKA_PYTHON_GROUP_MEMBER

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_MS = 10_000
# ZooKeeper notices the dead broker (its 6 s session), the controller elects the partition's new leader, which
# loads the group; then the members have a whole session timeout to find it.
FAILOVER_BOUND_S = 6 + SESSION_TIMEOUT_MS / 1000 + 10


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupCluster]:
    with group_cluster(tmp_path_factory.mktemp("coordinator-kill") / "cluster") as started:
        yield started


def read_committed(cluster: GroupCluster, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: consumer.committed(KpTopicPartition(topic, p)) for p in range(partitions)}
    finally:
        consumer.close()


def member_config(cluster: GroupCluster, group: str, client_id: str) -> dict[str, str | int | bool]:
    return {"bootstrap.servers": cluster.bootstrap, "group.id": group, "client.id": client_id,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 1000}


def confluent_member(cluster: GroupCluster, group: str, client_id: str) -> Consumer:
    return Consumer(member_config(cluster, group, client_id))


# A confluent-kafka group member that consumes and commits until its stdin closes. It runs in a process of its
# own: should librdkafka abort on an assertion, the test fails with its message instead of losing pytest.
_CONFLUENT_MEMBER = """
import json, sys, threading
from confluent_kafka import Consumer
config, topic = json.loads(sys.argv[1]), sys.argv[2]
consumer = Consumer(config)
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
consumer.subscribe([topic])
try:
    while not stop.is_set():
        if consumer.consume(100, 0.2):
            consumer.commit(asynchronous=False)
finally:
    consumer.close()
"""


class ConfluentMemberProcess:
    def __init__(self, cluster: GroupCluster, group: str, topic: str, client_id: str) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _CONFLUENT_MEMBER, json.dumps(member_config(cluster, group, client_id)), topic],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def stop(self) -> tuple[int, str]:
        """Close its stdin and wait for it: its exit code, and what it printed (a traceback, librdkafka's logs)."""
        try:
            printed, _ = self._process.communicate("", timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            printed, _ = self._process.communicate()
            return -1, f"did not stop within 60 s\n{printed}"
        return self._process.returncode, printed


def test_coordinator_killed_during_a_stream_of_commits(cluster: GroupCluster) -> None:
    topic = group = "commit-stream"
    partitions = 3
    cluster.create_topic(topic, partitions)
    consumer = confluent_member(cluster, group, "committer")
    consumer.subscribe([topic])
    killed = -1
    try:
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < partitions:
            assert time.monotonic() < deadline, "never assigned the topic"
            consumer.poll(0.1)
        before = cluster.wait_stable(group, 1)
        killed = cluster.coordinator(group)
        assert before.coordinator.id == killed, "FindCoordinator names the leader of the group's offsets partition"
        acked = attempted = 0
        errors: list[str] = []
        killed_at = 0.0
        acked_after_kill = 0
        deadline = time.monotonic() + 120
        while acked_after_kill < 50:
            assert time.monotonic() < deadline, f"commits never resumed after the kill: {errors[-3:]}"
            attempted += 1
            try:
                answered = consumer.commit(offsets=[TopicPartition(topic, p, attempted) for p in range(partitions)],
                                           asynchronous=False)
            except KafkaException as e:  # the coordinator is gone or moving: retriable, not acknowledged
                errors.append(str(e.args[0]))
                time.sleep(0.05)
            else:
                assert answered is not None and all(tp.error is None for tp in answered), answered
                acked = attempted
                acked_after_kill += killed_at > 0
            consumer.poll(0)
            if attempted == 100:
                cluster.kill(killed)
                killed_at = time.monotonic()
        moved = cluster.wait_stable(group, 1, timeout=FAILOVER_BOUND_S)
        back_after = time.monotonic() - killed_at
        assert cluster.coordinator(group) not in (killed, -1)
        assert moved.coordinator.id == cluster.coordinator(group), "the group moved to the new leader"
        assert [m.member_id for m in moved.members] == [m.member_id for m in before.members], \
            "the member kept its membership: it reached the new coordinator within its session timeout"
        print(f"\ncommit stream: {acked} commits acknowledged, {len(errors)} refused during the failover;"
              f" group Stable on broker {moved.coordinator.id} {back_after:.1f} s after the kill")
        committed = read_committed(cluster, group, topic, partitions)
        # Every acknowledged commit kept; one sent but unanswered may have been written too.
        assert all(acked <= offset <= attempted for offset in committed.values() if offset is not None), \
            (committed, acked, attempted)
        assert None not in committed.values()
    finally:
        consumer.close()
        if killed > 0:
            cluster.restart(killed)


def test_coordinator_killed_during_a_rebalance(cluster: GroupCluster) -> None:
    topic = group = "rebalance-kill"
    partitions = 4
    cluster.create_topic(topic, partitions)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(40):
        producer.produce(topic, f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0
    stop = threading.Event()
    polling = threading.Event()  # the kafka-python member polls (and so rejoins) only while set
    polling.set()
    paused = threading.Event()  # it has seen `polling` cleared: no poll of its is under way
    errors: list[BaseException] = []

    def run_kafka_python() -> None:
        # max.poll.interval.ms is the rebalance timeout it announces: the coordinator waits that long for it.
        consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, client_id="kp-slow",
                                 enable_auto_commit=False, auto_offset_reset="earliest",
                                 session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=1000,
                                 max_poll_interval_ms=90_000, **KAFKA_PYTHON_GROUP_MEMBER)
        try:
            while not stop.is_set():
                if not polling.is_set():
                    paused.set()
                    polling.wait(0.1)
                    continue
                if consumer.poll(timeout_ms=200):
                    consumer.commit()
        except BaseException as e:
            errors.append(e)
        finally:
            consumer.close()

    threads = [threading.Thread(target=run_kafka_python)]
    threads[0].start()
    members = [ConfluentMemberProcess(cluster, group, topic, "ck-1")]
    killed = -1
    try:
        stable = cluster.wait_stable(group, 2)
        deadline = time.monotonic() + 60
        while read_committed(cluster, group, topic, partitions) != dict.fromkeys(range(partitions), 10):
            assert time.monotonic() < deadline, read_committed(cluster, group, topic, partitions)
            time.sleep(0.1)
        # A third member joins while the kafka-python member does not poll: the group waits in
        # PreparingRebalance for it to rejoin.
        polling.clear()
        assert paused.wait(30)
        members.append(ConfluentMemberProcess(cluster, group, topic, "ck-2"))
        deadline = time.monotonic() + 30
        while cluster.describe(group).state != ConsumerGroupState.PREPARING_REBALANCING:
            assert time.monotonic() < deadline, "the third member's join never started a rebalance"
            time.sleep(0.05)
        killed = cluster.coordinator(group)
        assert stable.coordinator.id == killed
        cluster.kill(killed)
        killed_at = time.monotonic()
        polling.set()
        moved = cluster.wait_stable(group, 3, timeout=FAILOVER_BOUND_S)
        print(f"\nrebalance: group Stable with 3 members on broker {moved.coordinator.id}"
              f" {time.monotonic() - killed_at:.1f} s after its coordinator (broker {killed}) was killed")
        assert moved.coordinator.id == cluster.coordinator(group) not in (killed, -1)
        assert covers_once(assignments(moved, topic), partitions), assignments(moved, topic)
        assert {m.client_id for m in moved.members} == {"ck-1", "ck-2", "kp-slow"}
        kept = {m.member_id for m in stable.members} & {m.member_id for m in moved.members}
        assert len(kept) == 2, "the two members from before the kill kept their membership"
        # Nothing new was written: the commits acknowledged before the kill are what the group has.
        assert read_committed(cluster, group, topic, partitions) == dict.fromkeys(range(partitions), 10)
    finally:
        stop.set()
        polling.set()
        for thread in threads:
            thread.join(30)
        ended = [member.stop() for member in members]
        for code, printed in ended:
            if code != 0:  # shown with whatever failed first (a librdkafka abort stalls the group)
                print(f"a confluent-kafka member exited with {code}:\n{printed}")
        if killed > 0:
            cluster.restart(killed)
    assert errors == []
    for code, printed in ended:
        assert code == 0, printed

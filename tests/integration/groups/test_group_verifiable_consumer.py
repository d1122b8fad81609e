"""Kafka's verifiable-consumer scenario (issue 15's second proof): confluent-kafka's kafkatest
verifiable_consumer processes join and leave one group (added, removed with SIGTERM, SIGKILLed) while an
idempotent acks=all producer writes. From their JSON event streams, as Kafka's system tests read them: every
acknowledged record was consumed at least once, each partition's commits never go backwards, and every rebalance
completed (each revocation followed by an assignment, the group Stable with its partitions held once after each
change). At the end the group's committed offsets, read back with OffsetFetch, are the partitions' ends.

The consumers run unchanged through tests/integration/kafkatest_py3.py (the wheel's kafkatest is Python 2 code);
the producer is confluent-kafka's Producer, as kafkatest's verifiable_producer cannot run on Python 3."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.group_cluster import GroupCluster, group_cluster

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
TOPIC, GROUP = "verifiable", "verifiable-group"
PARTITIONS = 6
RECORDS, RATE = 4000, 250  # records, per second: the producer writes through every membership change


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupCluster]:
    with group_cluster(tmp_path_factory.mktemp("verifiable") / "cluster") as started:
        yield started


class VerifiableConsumer:
    """One kafkatest verifiable_consumer process; its stdout (JSON events) and stderr go to files."""

    def __init__(self, name: str, cluster: GroupCluster, directory: Path) -> None:
        self.name = name
        self.stdout = directory / f"{name}.jsonl"
        self.stderr = directory / f"{name}.log"
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, str(REPO_ROOT / "tests/integration/kafkatest_py3.py"), "--topic", TOPIC,
                 "--group-id", GROUP, "--broker-list", cluster.bootstrap, "--session-timeout", "6000",
                 "--reset-policy", "earliest"], stdout=out, stderr=err, cwd=REPO_ROOT)

    def events(self) -> list[dict[str, Any]]:
        lines = self.stdout.read_text().splitlines()
        # A SIGKILLed process may have left half a line.
        return [json.loads(line) for line in lines if line.endswith("}")]

    def stop(self, signum: int) -> None:
        self.process.send_signal(signum)
        self.process.wait(60)


def end_offsets(cluster: GroupCluster) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "end-offsets"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def committed(cluster: GroupCluster) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in
                consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)}
    finally:
        consumer.close()


def settle(cluster: GroupCluster, members: int) -> None:
    """The group Stable with `members` members holding every partition once."""
    cluster.wait_stable(GROUP, members, timeout=60, covering=(TOPIC, PARTITIONS))


def test_members_come_and_go_while_a_producer_writes(cluster: GroupCluster, tmp_path: Path) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, {"min.insync.replicas": "2"})
    acked: list[tuple[int, int]] = []
    failed: list[str] = []

    def delivered(error: object, message: Any) -> None:
        if error is not None:
            failed.append(str(error))
        else:
            acked.append((message.partition(), message.offset()))

    def produce() -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5})
        for i in range(RECORDS):
            producer.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS, on_delivery=delivered)
            producer.poll(1 / RATE)
        producer.flush(60)

    consumers: list[VerifiableConsumer] = []
    writer = threading.Thread(target=produce)
    try:
        consumers += [VerifiableConsumer(f"c{i}", cluster, tmp_path) for i in (1, 2)]
        settle(cluster, 2)
        writer.start()
        consumers.append(VerifiableConsumer("c3", cluster, tmp_path))  # added
        settle(cluster, 3)
        consumers[0].stop(signal.SIGTERM)  # removed: it commits what it consumed and leaves the group
        settle(cluster, 2)
        consumers[1].stop(signal.SIGKILL)  # removed without a word: the coordinator expires its session
        settle(cluster, 1)
        consumers.append(VerifiableConsumer("c4", cluster, tmp_path))  # added again
        settle(cluster, 2)
        writer.join(120)
        assert not writer.is_alive() and failed == []
        ends = end_offsets(cluster)
        assert sum(ends.values()) == RECORDS == len(acked)
        # The survivors commit on every idle poll: wait for the group to have committed every partition's end.
        deadline = time.monotonic() + 60
        while committed(cluster) != ends:
            assert time.monotonic() < deadline, (committed(cluster), ends)
            time.sleep(0.2)
    finally:
        for consumer in consumers:
            if consumer.process.poll() is None:
                consumer.stop(signal.SIGTERM)
    streams = {c.name: c.events() for c in consumers}
    for name, events in streams.items():
        if name != "c2":  # SIGKILLed
            assert events[-1] == {**events[-1], "name": "shutdown_complete", "failed": False}, (name, events[-3:])

    # Every acknowledged record consumed at least once (consumed ranges as records_consumed reports them).
    consumed: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for events in streams.values():
        for event in events:
            if event["name"] == "records_consumed":
                for p in event["partitions"]:
                    consumed[p["partition"]].append((p["minOffset"], p["maxOffset"]))
    missed = [(p, o) for p, o in acked if not any(lo <= o <= hi for lo, hi in consumed[p])]
    assert missed == [], f"{len(missed)} acknowledged records never consumed, e.g. {missed[:5]}"

    # Each partition's successful commits, in the order they were reported, never go backwards.
    commits = sorted((event["_time"], name, o["partition"], o["offset"]) for name, events in streams.items()
                     for event in events if event["name"] == "offsets_committed" and event["success"]
                     for o in event["offsets"] if o["offset"] >= 0 and "error" not in o)
    assert commits, "the consumers committed"
    last: dict[int, tuple[int, str]] = {}
    for when, name, partition, offset in commits:
        before = last.get(partition)
        assert before is None or offset >= before[0], (partition, before, (offset, name, when))
        last[partition] = (offset, name)

    # Assignments and revocations alternate, from an assignment: every rebalance a member went through completed.
    for name, events in streams.items():
        changes = [e["name"] for e in events if e["name"] in ("partitions_assigned", "partitions_revoked")]
        assert changes and changes[0] == "partitions_assigned", (name, changes)
        for before, after in itertools.pairwise(changes):
            assert before != after, (name, changes)
    assert committed(cluster) == end_offsets(cluster)
    reported = sum(e["count"] for events in streams.values() for e in events if e["name"] == "records_consumed")
    rebalances = sum(e["name"] == "partitions_assigned" for events in streams.values() for e in events)
    print(f"\n{len(acked)} records acknowledged, {reported} consumed by {len(streams)} members"
          f" ({reported - len(acked)} again after a rebalance), {len(commits)} partition commits,"
          f" {rebalances} assignments")

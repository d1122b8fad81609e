"""The admin tools Kafka users expect, against real ZooKeeper, controller and broker processes, run as a user
runs them (`minibroker ...` processes): topics --alter --partitions (CreatePartitions), delete-records
(DeleteRecords) with get-offsets, and leader-election --election-type unclean (ElectLeaders)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from broker.log.checkpoint import OffsetCheckpointFile
from broker.log.files import LOG_START_OFFSET_CHECKPOINT
from client import Admin, Consumer, OffsetOutOfRangeError, Producer, TopicPartition
from tests.integration.admin_and_cli.test_cli import minibroker, ok
from zk.client import KafkaZkClient

if TYPE_CHECKING:
    from conftest import BrokerProcess, StartBroker, StartBrokers, StartController, WaitUntil

pytestmark = pytest.mark.integration


def bootstrap_of(brokers: dict[int, BrokerProcess]) -> str:
    return ",".join(b.address for b in brokers.values())


def consume(bootstrap: str, partitions: list[TopicPartition], count: int, **config: object) -> list[tuple[int, int]]:
    """(partition, offset) of the first `count` records from the earliest offsets of `partitions`."""
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                        **config)  # type: ignore[arg-type]
    try:
        consumer.assign(partitions)
        got: list[tuple[int, int]] = []
        for _ in range(300):
            for records in consumer.poll(timeout_ms=100).values():
                got += [(r.partition, r.offset) for r in records]
            if len(got) >= count:
                return got
        pytest.fail(f"only {got} of {count} records consumed")
    finally:
        consumer.close(autocommit=False)


def test_alter_adds_partitions_the_producer_and_consumer_use(
    start_brokers: StartBrokers, start_controller: StartController, zk_client: KafkaZkClient, wait_until: WaitUntil
) -> None:
    bootstrap = bootstrap_of(start_brokers((1, 2, 3)))
    start_controller()
    topics = ("topics", "--bootstrap-server", bootstrap)
    ok(*topics, "--create", "--topic", "grow", "--partitions", "2", "--replication-factor", "2")
    producer = Producer(bootstrap_servers=bootstrap, acks="all")
    try:
        for p in (0, 1):
            producer.send("grow", b"before", partition=p).get(timeout=30)
        for count, message in ((1, "Topic currently has 2 partitions, which is higher than the requested 1."),
                               (2, "Topic already has 2 partitions.")):
            refused = minibroker(*topics, "--alter", "--topic", "grow", "--partitions", str(count))
            assert (refused.returncode, refused.stdout) == (1, f"Error while executing topic command : {message}\n")
        assert ok(*topics, "--alter", "--topic", "grow", "--partitions", "4") == ""
        # Kafka's assignment, continued from partition 0's leader, written to /brokers/topics/grow.
        assignment = zk_client.get_topic_assignment("grow")
        assert assignment is not None and sorted(assignment.partitions) == [0, 1, 2, 3]
        described = ok(*topics, "--describe", "--topic", "grow").splitlines()
        assert described[0] == "Topic: grow\tPartitionCount: 4\tReplicationFactor: 2\tConfigs: "
        for p in (2, 3):
            replicas = ",".join(map(str, assignment.replicas(p)))
            assert described[1 + p].startswith(f"\tTopic: grow\tPartition: {p}\tLeader: {assignment.replicas(p)[0]}"
                                               f"\tReplicas: {replicas}"), described
        # The producer's metadata knows two partitions: sending to the new ones refreshes it.
        for p in (2, 3):
            metadata = producer.send("grow", b"after", partition=p).get(timeout=30)
            assert (metadata.partition, metadata.offset) == (p, 0)
    finally:
        producer.close()
    got = consume(bootstrap, [TopicPartition("grow", p) for p in range(4)], 4)
    assert sorted(got) == [(0, 0), (1, 0), (2, 0), (3, 0)]


def log_start_offset_checkpoint(broker: BrokerProcess, tp: TopicPartition) -> int | None:
    return OffsetCheckpointFile(broker.log_dir / LOG_START_OFFSET_CHECKPOINT).read().get(tp)


def test_delete_records_moves_the_log_start_offset_on_every_replica(
    start_brokers: StartBrokers, start_broker: StartBroker, start_controller: StartController,
    zk_client: KafkaZkClient, tmp_path: Path, wait_until: WaitUntil
) -> None:
    brokers = start_brokers((1, 2, 3))
    bootstrap = bootstrap_of(brokers)
    start_controller()
    tp = TopicPartition("trim", 0)
    # Small segments: the ones entirely below the new log start offset are deleted.
    ok("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "trim", "--replica-assignment", "1:2:3",
       "--config", "segment.bytes=2048")
    producer = Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        for i in range(100):
            producer.send("trim", f"record-{i:03}".encode() * 4, partition=0).get(timeout=30)
    finally:
        producer.close()
    offsets_file = tmp_path / "offsets.json"
    offsets_file.write_text(json.dumps({"partitions": [{"topic": "trim", "partition": 0, "offset": 50}],
                                        "version": 1}))
    deleted = ok("delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", str(offsets_file))
    assert deleted == ("Executing records delete operation\nRecords delete operation completed:\n"
                       "partition: trim-0\tlow_watermark: 50\n")
    get_offsets = ("get-offsets", "--bootstrap-server", bootstrap, "--topic", "trim")
    assert ok(*get_offsets, "--time", "-2") == "trim:0:50\n"
    assert ok(*get_offsets, "--time", "-1") == "trim:0:100\n"
    assert consume(bootstrap, [tp], 50)[0] == (0, 50)
    # Below the log start offset: OFFSET_OUT_OF_RANGE, which a consumer without a reset policy raises.
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="none", enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 10)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(100):
                consumer.poll(timeout_ms=100)
    finally:
        consumer.close(autocommit=False)
    # Past the high watermark: Kafka's per-partition error line, exit 1.
    offsets_file.write_text(json.dumps({"partitions": [{"topic": "trim", "partition": 0, "offset": 200}],
                                        "version": 1}))
    too_far = minibroker("delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", str(offsets_file))
    assert (too_far.returncode, too_far.stdout.splitlines()[-1]) == (1, "partition: trim-0\terror: OFFSET_OUT_OF_RANGE")
    # An unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION at once from the metadata, as Kafka 2.8's
    # KafkaAdminClient.deleteRecords fails a partition its metadata answer does not know (no wait for
    # default.api.timeout.ms, 60 s: the deadline here is half of it).
    offsets_file.write_text(json.dumps({"partitions": [{"topic": "nowhere", "partition": 0, "offset": 1},
                                                       {"topic": "trim", "partition": 7, "offset": 1}],
                                        "version": 1}))
    unknown = minibroker("delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", str(offsets_file),
                         timeout=30)
    assert (unknown.returncode, sorted(unknown.stdout.splitlines()[-2:])) == (
        1, ["partition: nowhere-0\terror: UNKNOWN_TOPIC_OR_PARTITION",
            "partition: trim-7\terror: UNKNOWN_TOPIC_OR_PARTITION"]), unknown.stdout + unknown.stderr

    # Every replica: the leader wrote its checkpoint at once; a follower writes it when it stops cleanly. Each
    # deleted its segments below 50, and keeps 50 across a restart (the leader's even across a SIGKILL).
    for broker_id in (2, 3, 1):
        broker = brokers[broker_id]
        broker.process.signal(signal.SIGKILL if broker_id == 1 else signal.SIGTERM)
        broker.process.wait(60)
        assert log_start_offset_checkpoint(broker, tp) == 50
        segments = sorted(int(f.stem) for f in (broker.log_dir / "trim-0").glob("*.log"))
        assert 0 < segments[0] <= 50, segments
        brokers[broker_id] = start_broker(broker_id)
        wait_until(lambda: set(zk_client.get_partition_state(tp).isr) == {1, 2, 3}, timeout=60,  # type: ignore[union-attr]
                   message="every replica back in the ISR")
        assert ok(*get_offsets, "--time", "-2") == "trim:0:50\n"
    assert log_start_offset_checkpoint(brokers[1], tp) == 50
    assert consume(bootstrap, [tp], 50)[0] == (0, 50)


def test_unclean_election_brings_back_a_partition_with_no_live_isr_member(
    start_broker: StartBroker, start_controller: StartController, zk_client: KafkaZkClient, zk_connect: str,
    wait_until: WaitUntil
) -> None:
    leader, follower = start_broker(1), start_broker(2)
    start_controller()
    bootstrap = f"{leader.address},{follower.address}"
    tp = TopicPartition("stale", 0)
    ok("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "stale", "--replica-assignment", "1:2")

    def state() -> tuple[int, tuple[int, ...]]:
        current = zk_client.get_partition_state(tp)
        assert current is not None
        return current.leader, current.isr

    producer = Producer(bootstrap_servers=bootstrap, acks="all")
    for i in range(5):
        producer.send("stale", f"both-{i}".encode(), partition=0).get(timeout=30)
    producer.close()
    follower.process.signal(signal.SIGKILL)
    follower.process.wait(30)
    wait_until(lambda: state() == (1, (1,)), timeout=30, message="the dead follower to leave the ISR")
    producer = Producer(bootstrap_servers=leader.address, acks=1)
    for i in range(5):
        producer.send("stale", f"leader-only-{i}".encode(), partition=0).get(timeout=30)
    producer.close()
    leader.process.signal(signal.SIGKILL)
    leader.process.wait(30)
    follower = start_broker(2)
    # The controller has seen broker 2 come back once broker 2 has heard from it (UpdateMetadata).
    with Admin(follower.address) as admin:
        wait_until(lambda: [b.node_id for b in admin.describe_cluster().brokers] == [2], timeout=30,
                   message="the controller to count broker 2 live")
    # The last ISR member is dead: the partition stays offline with a stale replica alive.
    assert state() == (-1, (1,))
    election = ("leader-election", "--zookeeper", zk_connect, "--topic", "stale", "--partition", "0")
    preferred = minibroker(*election, "--election-type", "preferred")
    assert preferred.returncode == 1 and state()[0] == -1
    assert ok(*election, "--election-type", "unclean") == \
        "Successfully completed leader election (UNCLEAN) for partitions stale-0\n"
    assert state() == (2, (2,))
    # The stale replica leads with what it had: the records only the dead leader held are lost.
    got = consume(follower.address, [tp], 5)
    assert got == [(0, offset) for offset in range(5)]
    assert ok(*election, "--election-type", "unclean") == "Valid replica already elected for partitions stale-0\n"


def test_topics_with_overrides_and_perf_payload_file(data_dir: Path, tmp_path: Path) -> None:
    d = ("--data-dir", str(data_dir))
    bootstrap = ok("cluster", "up", *d, "--brokers", "1", "--controllers", "1").strip()
    # One broker could never hold a 3-replica __consumer_offsets: its config says 1, as Kafka's dev config does.
    assert "offsets.topic.replication.factor=1\n" in (data_dir / "broker-1" / "server.properties").read_text()
    ok("topics", *d, "--create", "--topic", "plain", "--partitions", "1")
    ok("topics", *d, "--create", "--topic", "tuned", "--partitions", "2", "--config", "retention.ms=600000")
    assert ok("topics", *d, "--describe", "--topics-with-overrides") == \
        "Topic: tuned\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=600000\n"
    # The overrides are read from ZooKeeper: --bootstrap-server alone cannot know them, and says so.
    blind = minibroker("topics", "--bootstrap-server", bootstrap, "--describe", "--topics-with-overrides")
    assert blind.returncode == 1 and "--topics-with-overrides needs --data-dir" in blind.stdout

    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha\nbeta\ngamma\n")
    produced = ok("perf", "produce", *d, "--topic", "payloads", "--num-records", "30", "--payload-file",
                  str(payloads), "--throughput", "-1", "--producer-props", "acks=1")
    assert f"Reading payloads from: {payloads}\nNumber of messages read: 3\n" in produced
    assert "30 records sent" in produced
    consumed = ok("console-consumer", *d, "--topic", "payloads", "--from-beginning", "--max-messages", "30")
    values = consumed.splitlines()
    assert len(values) == 30 and set(values) <= {"alpha", "beta", "gamma"} and len(set(values)) > 1
    assert ok("get-offsets", *d, "--topic", "payloads") == "payloads:0:30\n"
    both = minibroker("perf", "produce", *d, "--topic", "payloads", "--num-records", "1", "--record-size", "10",
                      "--payload-file", str(payloads), "--throughput", "-1")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr

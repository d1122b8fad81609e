"""Partition reassignment with real processes: `minibroker reassign-partitions` moves RF=3 partitions from brokers
[1,2,3] to [2,3,4] under a steady acks=all load, a reassignment onto a broker that is down finishes when it
returns, and one interrupted by a controller failover is finished by the next controller. A real ZooKeeper, real
controllers and brokers; every wait has a deadline on a condition."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from conftest import REPO_ROOT

from client import Consumer, Producer
from minibroker import cli
from minibroker.commands.reassign_partitions import EXISTING_REASSIGNMENT
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.integration.failover.test_failover import (
    BROKER_OVERRIDES,
    FAILOVER_DEADLINE_S,
    Cluster,
    Load,
    in_sync,
    partition_dirs,
)
from zk.client import KafkaZkClient
from zk.paths import BrokerInfo, EndPoint, ReplicaAssignment, TopicAssignment

if TYPE_CHECKING:
    from conftest import StartBroker, StartBrokers, StartController, WaitUntil

pytestmark = pytest.mark.integration

TARGET = (2, 3, 4)
# The longest a reassignment may take here: the new replica copies a few thousand records, then one ISR change.
REASSIGNMENT_DEADLINE_S = 60.0


@pytest.fixture
def cluster(
    start_brokers: StartBrokers, start_broker: StartBroker, start_controller: StartController, zk_client: KafkaZkClient
) -> Iterator[Cluster]:
    c = Cluster(start_brokers((1, 2, 3, 4), BROKER_OVERRIDES), start_controller(), zk_client, start_broker)
    try:
        yield c
    finally:
        for channel in c.channels.values():
            channel.close()


def reassign_partitions(zk_connect: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "minibroker.cli", "reassign-partitions", "--zookeeper", zk_connect, *args]
    return subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


def reassignment_file(tmp_path: Path, partitions: Sequence[TopicPartition], replicas: Sequence[int]) -> Path:
    path = tmp_path / f"reassignment-{'-'.join(map(str, replicas))}.json"
    entries = [{"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)} for tp in partitions]
    path.write_text(json.dumps({"version": 1, "partitions": entries}))
    return path


def log_bytes(cluster: Cluster, broker_id: int, tp: TopicPartition) -> bytes:
    partition_dir = cluster.log_dir(broker_id) / str(tp)
    return b"".join(segment.read_bytes() for segment in sorted(partition_dir.glob("*.log")))


def identical_replicas(cluster: Cluster, tp: TopicPartition, replicas: Sequence[int]) -> bool:
    copies = {log_bytes(cluster, b, tp) for b in replicas}
    return len(copies) == 1 and copies != {b""}


def consume_all(bootstrap: str, tp: TopicPartition, expected: int) -> list[bytes]:
    consumer = Consumer(bootstrap_servers=bootstrap)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values: list[bytes] = []
    try:
        for _ in range(200):
            if len(values) >= expected:
                break
            values += [r.value for records in consumer.poll(timeout_ms=500).values() for r in records if r.value]
        return values
    finally:
        consumer.close(autocommit=False)


def longest_ack_gap(load: Load, start: float, end: float) -> float:
    with load.lock:
        moments = sorted(t for t, _ in load.acked if start <= t <= end)
    return max((b - a for a, b in itertools.pairwise([start, *moments, end])), default=end - start)


def assignment_of(zk: KafkaZkClient, tp: TopicPartition) -> ReplicaAssignment | None:
    assignment = zk.get_topic_assignment(tp.topic)
    return None if assignment is None else assignment.partitions.get(tp.partition)


def assert_moved(cluster: Cluster, tp: TopicPartition, zk_connect: str, tmp_path: Path, wait_until: WaitUntil) -> None:
    """Done as Kafka's reassignment leaves a partition: on the targets only, in sync, byte-identical copies, the
    old replica's log deleted, nothing left in /admin, and --verify agrees."""
    assert assignment_of(cluster.zk, tp) == ReplicaAssignment(TARGET)
    assert cluster.state(tp).leader in TARGET
    wait_until(lambda: in_sync(cluster, tp, TARGET), message=f"{tp}'s ISR {TARGET}")
    wait_until(lambda: partition_dirs(cluster, 1, tp.topic) == [], message="broker 1's replica deleted")
    wait_until(lambda: identical_replicas(cluster, tp, TARGET), timeout=30,
               message=f"{tp}'s replicas on {TARGET} byte-identical")
    verify = reassign_partitions(
        zk_connect, "--verify", "--reassignment-json-file", str(reassignment_file(tmp_path, [tp], TARGET))
    )
    assert verify.returncode == 0, verify.stderr
    assert verify.stdout == f"Status of partition reassignment:\nReassignment of partition {tp} is complete.\n"


def test_partitions_move_to_new_brokers_under_acks_all_load_without_losing_a_record(
    cluster: Cluster, wait_until: WaitUntil, zk_connect: str, tmp_path: Path
) -> None:
    # Partition 0 keeps its leader (2 is a target); partition 1's leader, broker 1, moves away.
    cluster.create_topic("moving", [[2, 1, 3], [1, 2, 3]], {"min.insync.replicas": "2"})
    partitions = [TopicPartition("moving", 0), TopicPartition("moving", 1)]
    for tp in partitions:
        wait_until(lambda tp=tp: in_sync(cluster, tp, (1, 2, 3)), message=f"{tp} in sync")
    loads = []
    for tp in partitions:
        producer = Producer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                            request_timeout_ms=5_000, delivery_timeout_ms=120_000, retry_backoff_ms=50)
        loads.append(Load(producer, tp))
    threads = [threading.Thread(target=load.run, name=f"load-{load.tp}", daemon=True) for load in loads]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: all(len(load.acked_since(0)) >= 300 for load in loads), message="300 acks each before")
        started = time.monotonic()
        execute = reassign_partitions(
            zk_connect, "--execute", "--reassignment-json-file", str(reassignment_file(tmp_path, partitions, TARGET))
        )
        assert execute.returncode == 0, execute.stderr
        assert execute.stdout == (
            "Current partition replica assignment\n\n"
            '{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[2,1,3],"log_dirs":["any","any",'
            '"any"]},{"topic":"moving","partition":1,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}\n\n'
            "Save this to use as the --reassignment-json-file option during rollback\n"
            "Successfully started partition reassignments for moving-0,moving-1\n"
        )
        wait_until(lambda: not cluster.zk.get_partition_reassignment(), timeout=REASSIGNMENT_DEADLINE_S,
                   message="the reassignment to finish")
        finished = time.monotonic()
        done = max(t for load in loads for t, _ in load.acked)
        wait_until(lambda: all(len(load.acked_since(done)) >= 300 for load in loads), timeout=FAILOVER_DEADLINE_S,
                   message="300 acks each after the reassignment")
    finally:
        for load in loads:
            load.stop.set()
        for thread in threads:
            thread.join(30)
        for load in loads:
            load.producer.close(timeout=30)

    # The longest time without an acknowledgement while the partitions moved: at most a leader change.
    gaps = {str(load.tp): longest_ack_gap(load, started, done) for load in loads}
    print(f"\nreassignment: --execute to /admin/reassign_partitions gone {finished - started:.2f}s (including the "
          f"command's start-up); longest acks=all gap while moving: "
          f"{', '.join(f'{tp} {gap:.2f}s' for tp, gap in gaps.items())}")
    assert all(gap < FAILOVER_DEADLINE_S for gap in gaps.values()), gaps
    assert cluster.state(partitions[0]).leader == 2  # kept its leader
    assert cluster.state(partitions[1]).leader == 2  # the first target replica in sync
    log = cluster.controller.log()
    assert "Leader 1 for partition moving-1 being reassigned, is not in the new list of replicas 2,3,4" in log
    assert "Leader 2 for partition moving-0 being reassigned, is already in the new list of replicas" in log
    for tp, load in zip(partitions, loads, strict=True):
        assert_moved(cluster, tp, zk_connect, tmp_path, wait_until)
        acked = [v for _, v in sorted(load.acked)]
        consumed = consume_all(cluster.bootstrap, tp, len(acked))
        missing = set(acked) - set(consumed)
        assert not missing, f"{tp}: {len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
        assert [v for v in consumed if v in set(acked)] == sorted(acked), f"{tp}: acknowledged records reordered"
        assert len(consumed) == len(set(consumed)), f"{tp}: a retried record was written twice"


@pytest.mark.parametrize("controller_failover", [False, True], ids=["target-down", "target-down-and-failover"])
def test_a_reassignment_onto_a_broker_that_is_down_finishes_when_it_returns(
    start_brokers: StartBrokers,
    start_broker: StartBroker,
    start_controller: StartController,
    zk_client: KafkaZkClient,
    zk_connect: str,
    tmp_path: Path,
    wait_until: WaitUntil,
    controller_failover: bool,
) -> None:
    controllers = {cid: start_controller(cid) for cid in (1000, 1001)} if controller_failover else {
        1000: start_controller(1000)
    }
    cluster = Cluster(start_brokers((1, 2, 3), BROKER_OVERRIDES), controllers[1000], zk_client, start_broker)
    tp = TopicPartition("waiting", 0)
    cluster.create_topic(tp.topic, [[1, 2, 3]], {"min.insync.replicas": "2"})
    wait_until(lambda: in_sync(cluster, tp, (1, 2, 3)), message="in sync")
    for i in range(20):
        assert cluster.produce(tp, f"before-{i}") == ErrorCode.NONE

    plan = reassignment_file(tmp_path, [tp], TARGET)
    refused = reassign_partitions(zk_connect, "--execute", "--reassignment-json-file", str(plan))
    assert refused.returncode == 1
    assert refused.stderr == "Error: The proposed assignment contains non-existent brokerIDs: 4\n"
    # The request znode itself may name a broker that is down (as Kafka's controller takes it).
    assert zk_client.create_partition_reassignment({tp: TARGET})
    moving = ReplicaAssignment((2, 3, 4, 1), adding_replicas=(4,), removing_replicas=(1,))
    wait_until(lambda: assignment_of(zk_client, tp) == moving, message="the reassignment started")
    verify = reassign_partitions(zk_connect, "--verify", "--reassignment-json-file", str(plan))
    assert verify.stdout == (
        f"Status of partition reassignment:\nReassignment of partition {tp} is still in progress.\n"
        "  Waiting for target replica 4 to join the ISR [1,2,3]: broker 4 is not alive (not registered in"
        " ZooKeeper).\n")
    # One reassignment at a time, as Kafka's --zookeeper mode.
    plan_2 = reassignment_file(tmp_path, [tp], (1, 2, 3))
    again = reassign_partitions(zk_connect, "--execute", "--reassignment-json-file", str(plan_2))
    assert again.returncode == 1
    assert again.stderr == "Error: Cannot execute because there is an existing partition assignment.\n"
    assert cluster.state(tp).leader == 1

    if controller_failover:
        active = zk_client.get_controller_id()
        assert active is not None
        standby = next(cid for cid in controllers if cid != active)
        controllers[active].signal(signal.SIGKILL)
        controllers[active].wait()
        wait_until(lambda: zk_client.get_controller_id() == standby, timeout=FAILOVER_DEADLINE_S,
                   message="the standby controller took over")
        wait_until(lambda: "Ready to serve as the new controller" in controllers[standby].log(),
                   timeout=FAILOVER_DEADLINE_S, message="the standby ready")
        cluster.controller = controllers[standby]
    for i in range(20):
        assert cluster.produce(tp, f"while-waiting-{i}") == ErrorCode.NONE

    cluster.brokers[4] = start_broker(4, BROKER_OVERRIDES)
    cluster.log_dirs[4] = cluster.brokers[4].log_dir
    wait_until(lambda: not zk_client.get_partition_reassignment(), timeout=REASSIGNMENT_DEADLINE_S,
               message="the reassignment to finish")
    assert cluster.state(tp).leader == 2
    assert_moved(cluster, tp, zk_connect, tmp_path, wait_until)
    stored = [v.decode() for v in cluster.stored_values(4, tp) if v is not None]
    assert stored == [f"before-{i}" for i in range(20)] + [f"while-waiting-{i}" for i in range(20)]
    # The controller logs the completion just after it removes the reassignment znode.
    completed = "Completed reassignment of partition waiting-0 to replicas [2, 3, 4]"
    wait_until(lambda: completed in cluster.controller.log(),
               message="the controller's completion line")
    for channel in cluster.channels.values():
        channel.close()


def test_a_stuck_reassignment_is_explained_and_cancelled_and_the_next_one_runs(
    cluster: Cluster, zk_client: KafkaZkClient, zk_connect: str, tmp_path: Path, wait_until: WaitUntil
) -> None:
    """Its one new replica is on a broker that is SIGSTOPped: it cannot catch up, the reassignment never ends and
    (one at a time) blocks every other. --verify says why, --cancel puts the original replicas back."""
    tp = TopicPartition("stuck", 0)
    cluster.create_topic(tp.topic, [[1, 2, 3]], {"min.insync.replicas": "2"})
    wait_until(lambda: in_sync(cluster, tp, (1, 2, 3)), message="in sync")
    for i in range(20):
        assert cluster.produce(tp, f"before-{i}") == ErrorCode.NONE
    paused = cluster.brokers[4].process
    paused.signal(signal.SIGSTOP)
    try:
        plan = reassignment_file(tmp_path, [tp], TARGET)
        assert zk_client.create_partition_reassignment({tp: TARGET})
        moving = ReplicaAssignment((2, 3, 4, 1), adding_replicas=(4,), removing_replicas=(1,))
        wait_until(lambda: assignment_of(zk_client, tp) == moving, message="the reassignment started")
        verify = reassign_partitions(zk_connect, "--verify", "--reassignment-json-file", str(plan))
        assert verify.returncode == 0, verify.stderr
        lines = verify.stdout.splitlines()
        assert lines[1] == f"Reassignment of partition {tp} is still in progress."
        assert lines[2].startswith("  Waiting for target replica 4 to join the ISR [1,2,3]: broker 4 is ")
        # Still registered (its session has not expired yet) it is alive but not caught up; then it is gone.
        wait_until(lambda: 4 not in {b.id for b in zk_client.get_all_brokers()}, timeout=FAILOVER_DEADLINE_S,
                   message="the paused broker's session to expire")
        verify = reassign_partitions(zk_connect, "--verify", "--reassignment-json-file", str(plan))
        assert "broker 4 is not alive (not registered in ZooKeeper)" in verify.stdout
        blocked = reassign_partitions(zk_connect, "--execute", "--reassignment-json-file",
                                      str(reassignment_file(tmp_path, [tp], (3, 2, 1))))
        assert blocked.stderr == f"Error: {EXISTING_REASSIGNMENT}\n"

        cancel = reassign_partitions(zk_connect, "--cancel", "--reassignment-json-file", str(plan))
        assert cancel.returncode == 0, cancel.stderr
        assert cancel.stdout == f"Successfully cancelled partition reassignment for: {tp}\n"
        # The original replicas, in the order the znode kept them (Kafka's originReplicas), nothing being added.
        assert assignment_of(zk_client, tp) == ReplicaAssignment((2, 3, 1))
        assert zk_client.get_partition_reassignment() == {}
        # The controller logs the completion just after it removes the reassignment znode.
        completed = "Completed reassignment of partition stuck-0 to replicas [2, 3, 1]"
        wait_until(lambda: completed in cluster.controller.log(),
                   message="the controller's completion line")
        again = reassign_partitions(zk_connect, "--cancel", "--reassignment-json-file", str(plan))
        assert again.returncode == 1
        assert again.stderr == (f"Error: Error cancelling partition reassignment for:\n{tp}: No reassignment in"
                                f" progress for partition {tp}.\n")
        assert cluster.produce(tp, "after-cancel") == ErrorCode.NONE
    finally:
        paused.signal(signal.SIGCONT)
    # No longer blocked: the next reassignment runs and completes.
    plan_2 = reassignment_file(tmp_path, [tp], (3, 2, 1))
    executed = reassign_partitions(zk_connect, "--execute", "--reassignment-json-file", str(plan_2))
    assert executed.returncode == 0, executed.stderr
    wait_until(lambda: not zk_client.get_partition_reassignment(), timeout=REASSIGNMENT_DEADLINE_S,
               message="the next reassignment to finish")
    assert assignment_of(zk_client, tp) == ReplicaAssignment((3, 2, 1))
    verify = reassign_partitions(zk_connect, "--verify", "--reassignment-json-file", str(plan_2))
    assert verify.stdout == f"Status of partition reassignment:\nReassignment of partition {tp} is complete.\n"
    stored = [v.decode() for v in cluster.stored_values(cluster.state(tp).leader, tp) if v is not None]
    assert stored == [f"before-{i}" for i in range(20)] + ["after-cancel"]


def test_the_command_checks_its_input_against_zookeeper_and_writes_one_request(
    zk_client: KafkaZkClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command alone (in this process) against a real ZooKeeper: registrations and a topic, no controller."""
    for broker_id in (1, 2, 3, 4):
        zk_client.register_broker(BrokerInfo(broker_id, (EndPoint("GRPC", "127.0.0.1", 9090 + broker_id),)))
    zk_client.create_topic(TopicAssignment.of("t", {0: [1, 2, 3], 1: [2, 3, 1]}))
    connect = ["--zookeeper", zk_client.hosts]

    def run(*args: str) -> tuple[int, str, str]:
        code = cli.main(["reassign-partitions", *connect, *args])
        out, err = capsys.readouterr()
        return code, out, err

    topics = tmp_path / "topics.json"
    topics.write_text('{"version":1,"topics":[{"topic":"t"}]}')
    code, out, _ = run("--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "2,3,4")
    assert code == 0
    current_title, current, blank, proposed_title, proposed = out.splitlines()
    assert (current_title, blank, proposed_title) == (
        "Current partition replica assignment", "", "Proposed partition reassignment configuration"
    )
    assert json.loads(current)["partitions"][0] == {
        "topic": "t", "partition": 0, "replicas": [1, 2, 3], "log_dirs": ["any", "any", "any"]
    }
    plan = tmp_path / "plan.json"
    plan.write_text(proposed)
    proposal = {(p["topic"], p["partition"]): p["replicas"] for p in json.loads(proposed)["partitions"]}
    assert sorted(proposal) == [("t", 0), ("t", 1)] and all(sorted(r) == [2, 3, 4] for r in proposal.values())
    assert run("--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "2,3,9")[2] == (
        "Error: Unknown broker id 9\n"
    )
    unknown = tmp_path / "unknown.json"
    unknown.write_text('{"version":1,"topics":[{"topic":"t"},{"topic":"nope"}]}')
    code, _, err = run("--generate", "--topics-to-move-json-file", str(unknown), "--broker-list", "2,3,4")
    assert (code, err) == (1, "Error: Topic 'nope' does not exist.\n")

    refusals = {
        '{"version":1,"partitions":[{"topic":"t","partition":5,"replicas":[1]}]}':
            "Error: The proposed assignment contains non-existent partitions: t-5\n",
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,2,3]}]}':
            "Error: Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 2\n",
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3,7]}]}':
            "Error: The proposed assignment contains non-existent brokerIDs: 7\n",
        '{"version":1,"partitions":[]}': "Error: Partition reassignment list cannot be empty\n",
    }
    bad = tmp_path / "bad.json"
    for text, error in refusals.items():
        bad.write_text(text)
        assert run("--execute", "--reassignment-json-file", str(bad)) == (1, "", error)
    assert cli.main(["reassign-partitions", "--bootstrap-server", "127.0.0.1:1", "--verify",
                     "--reassignment-json-file", str(plan)]) == 1
    assert "no AlterPartitionReassignments API" in capsys.readouterr().err
    assert zk_client.get_partition_reassignment() == {}

    code, out, _ = run("--execute", "--reassignment-json-file", str(plan))
    assert code == 0 and out.endswith("Successfully started partition reassignments for t-0,t-1\n")
    assert zk_client.get_partition_reassignment() == {
        TopicPartition("t", p): tuple(proposal[("t", p)]) for p in (0, 1)
    }
    assert run("--verify", "--reassignment-json-file", str(plan))[1] == (
        "Status of partition reassignment:\nReassignment of partition t-0 is still in progress.\n"
        "  Not started by the controller yet (is a controller running?).\n"
        "Reassignment of partition t-1 is still in progress.\n"
        "  Not started by the controller yet (is a controller running?).\n"
    )
    # No controller has started it: --cancel takes the request back out of the znode.
    assert run("--cancel", "--reassignment-json-file", str(plan)) == (
        0, "Successfully cancelled partition reassignments for: t-0,t-1\n", "")
    assert zk_client.get_partition_reassignment() == {}
    assert run("--cancel", "--reassignment-json-file", str(plan))[0] == 1


def test_cancel_stops_and_deletes_a_new_replica_that_cannot_fetch(
    cluster: Cluster, zk_client: KafkaZkClient, zk_connect: str, tmp_path: Path, wait_until: WaitUntil
) -> None:
    """The issue's case: the leader's segment is damaged after its followers copied it, so the new replica's every
    fetch brings a batch that fails its CRC and it never catches up. --cancel deletes that replica again."""
    tp = TopicPartition("damaged", 0)
    cluster.create_topic(tp.topic, [[1, 2, 3]], {"min.insync.replicas": "2"})
    wait_until(lambda: in_sync(cluster, tp, (1, 2, 3)), message="in sync")
    for i in range(20):
        assert cluster.produce(tp, f"before-{i}") == ErrorCode.NONE
    wait_until(lambda: identical_replicas(cluster, tp, (1, 2, 3)), message="every follower has every record")
    assert cluster.state(tp).leader == 1
    segment = cluster.log_dir(1) / str(tp) / f"{0:020d}.log"
    with segment.open("r+b") as f:  # a byte inside the first batch's records: its CRC no longer matches
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 0xFF]))

    plan = reassignment_file(tmp_path, [tp], (1, 2, 4))
    executed = reassign_partitions(zk_connect, "--execute", "--reassignment-json-file", str(plan))
    assert executed.returncode == 0, executed.stderr
    wait_until(lambda: partition_dirs(cluster, 4, tp.topic) == [str(tp)], message="the new replica on broker 4")
    failing = "Found invalid messages during fetch for partition damaged-0"
    wait_until(lambda: failing in cluster.brokers[4].process.log(), message="broker 4's fetch failing")
    verify = reassign_partitions(zk_connect, "--verify", "--reassignment-json-file", str(plan))
    assert verify.stdout.splitlines()[2] == (
        "  Waiting for target replica 4 to join the ISR [1,2,3]: broker 4 is alive but its replica has not caught"
        " up with leader 1 (its fetches fail or lag: see broker 4's log).")

    cancel = reassign_partitions(zk_connect, "--cancel", "--reassignment-json-file", str(plan))
    assert cancel.returncode == 0, cancel.stderr
    assert cancel.stdout == f"Successfully cancelled partition reassignment for: {tp}\n"
    assert assignment_of(zk_client, tp) == ReplicaAssignment((1, 2, 3))
    assert zk_client.get_partition_reassignment() == {}
    wait_until(lambda: partition_dirs(cluster, 4, tp.topic) == [], message="the added replica deleted")
    assert in_sync(cluster, tp, (1, 2, 3))
    assert cluster.produce(tp, "after-cancel") == ErrorCode.NONE

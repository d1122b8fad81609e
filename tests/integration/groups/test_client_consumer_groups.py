"""The project's group consumer and `minibroker consumer-groups` against a real cluster (one per module, started by
`minibroker cluster up`): members in separate processes split the partitions, the group rebalances when one
leaves and when one is SIGKILLed, a member commits and a new one resumes from the committed offsets, and the
command describes, resets and deletes groups, and deletes a group's offsets, as kafka-consumer-groups.sh does."""

from __future__ import annotations

import contextlib
import io
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer as ConfluentConsumer

from client import Admin, Consumer, KafkaError, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from client.errors import CommitFailedError
from client.group_admin import ConsumerGroupDescription
from client.subscription import ConsumerRebalanceListener
from local_cluster.cluster import LocalCluster
from local_cluster.cluster_file import ClusterInfo
from minibroker.cli import main as cli_main

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
SESSION_TIMEOUT_MS = 3000
# A member's settings: a short session so a SIGKILLed member is noticed within seconds.
MEMBER_PROPS = {"session.timeout.ms": str(SESSION_TIMEOUT_MS), "heartbeat.interval.ms": "300"}


def minibroker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minibroker.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO_ROOT)


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("groups") / "cluster"
    try:
        up = minibroker("cluster", "up", "--data-dir", str(data_dir), "--brokers", "3", "--controllers", "1",
                        "--override", "group.initial.rebalance.delay.ms=0",
                        "--override", "group.min.session.timeout.ms=1000",
                        "--override", "offsets.topic.num.partitions=3")
        assert up.returncode == 0, up.stderr
        yield data_dir
    finally:
        if ClusterInfo.exists(data_dir):
            LocalCluster(data_dir).down(kill=True)


@pytest.fixture
def cluster(cluster_dir: Path) -> ClusterInfo:
    return ClusterInfo.load(cluster_dir)


@pytest.fixture
def bootstrap(cluster: ClusterInfo) -> str:
    """The gRPC listeners, for the project's client."""
    return cluster.bootstrap_servers


def wait_for(condition: Callable[[], object], timeout: float = 30.0, message: str | Callable[[], str] = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s: {message() if callable(message) else message}")
        time.sleep(0.1)  # a condition polled under a deadline


def topic_with_records(bootstrap: str, topic: str, partitions: int, count: int, prefix: str) -> list[str]:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 2)])
    return produce(bootstrap, topic, partitions, count, prefix)


def produce(bootstrap: str, topic: str, partitions: int, count: int, prefix: str) -> list[str]:
    values = [f"{prefix}-{i}" for i in range(count)]
    with Producer(bootstrap_servers=bootstrap, acks="all") as producer:
        for i, value in enumerate(values):
            producer.send(topic, value.encode(), partition=i % partitions)
        producer.flush(30)
    return values


class MemberProcess:
    """`minibroker console-consumer --group G` in a process of its own; what it printed, as it prints it."""

    def __init__(self, bootstrap: str, topic: str, group: str, client_id: str, log_dir: Path) -> None:
        props = [arg for key, value in {**MEMBER_PROPS, "client.id": client_id}.items()
                 for arg in ("--consumer-property", f"{key}={value}")]
        self.stderr_path = log_dir / f"{client_id}.stderr"
        with self.stderr_path.open("w") as stderr:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "minibroker.cli", "console-consumer", "--bootstrap-server", bootstrap,
                 "--topic", topic, "--group", group, "--from-beginning", "--property", "print.partition=true",
                 *props], stdout=subprocess.PIPE, stderr=stderr, cwd=REPO_ROOT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.append(line.rstrip("\n"))

    def values(self) -> list[str]:
        return [line.split("\t", 1)[1] for line in list(self.lines)]

    def stop(self, signum: int) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signum)
        self.popen.wait(30)
        self._reader.join(10)


@pytest.fixture
def members(bootstrap: str, tmp_path: Path) -> Iterator[Callable[[str, str, str], MemberProcess]]:
    started: list[MemberProcess] = []

    def start(topic: str, group: str, client_id: str) -> MemberProcess:
        member = MemberProcess(bootstrap, topic, group, client_id, tmp_path)
        started.append(member)
        return member

    yield start
    for member in started:
        member.stop(signal.SIGKILL)


def describe(admin: Admin, group: str) -> ConsumerGroupDescription:
    return admin.describe_consumer_groups([group])[0]


def assignment_of(description: ConsumerGroupDescription) -> dict[str, set[int]]:
    return {m.client_id: {tp.partition for tp in m.assignment} for m in description.members}


def group_view(admin: Admin, group: str) -> str:
    description = describe(admin, group)
    return f"{description.state}: {assignment_of(description)}"


def settled(admin: Admin, group: str, client_ids: set[str], partitions: int) -> bool:
    """The group is Stable with exactly these members, each holding a share, all partitions held once."""
    description = describe(admin, group)
    owned = assignment_of(description)
    held = sorted(p for parts in owned.values() for p in parts)
    return (description.state == "Stable" and set(owned) == client_ids and held == list(range(partitions))
            and all(owned.values()))


def test_members_split_the_partitions_and_take_over_from_one_that_leaves_or_is_killed(
        bootstrap: str, members: Callable[[str, str, str], MemberProcess]) -> None:
    topic, group, partitions = "scaled", "scalers", 6
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 2)])
        a, b, c = (members(topic, group, name) for name in ("member-a", "member-b", "member-c"))
        wait_for(lambda: settled(admin, group, {"member-a", "member-b", "member-c"}, partitions), 60,
                 lambda: f"three members holding two partitions each, not {group_view(admin, group)}")
        owned = assignment_of(describe(admin, group))
        assert all(len(parts) == 2 for parts in owned.values()), owned
        sent = produce(bootstrap, topic, partitions, 60, "first")
        wait_for(lambda: sorted(a.values() + b.values() + c.values()) == sorted(sent), 30,
                 "every record read once by the group")
        for member, name in ((a, "member-a"), (b, "member-b"), (c, "member-c")):
            read_from = {int(line.split("\t")[0].removeprefix("Partition:")) for line in member.lines}
            assert read_from == owned[name], "each member reads exactly its own partitions"

        began = time.monotonic()
        c.stop(signal.SIGINT)  # a clean close: LeaveGroup, so the others take over at once
        wait_for(lambda: settled(admin, group, {"member-a", "member-b"}, partitions), 30,
                 lambda: f"member-c's share moved, not {group_view(admin, group)}")
        assert time.monotonic() - began < SESSION_TIMEOUT_MS / 1000, "a leaving member is not waited for"

        b.stop(signal.SIGKILL)  # no goodbye: the coordinator notices the silence after session.timeout.ms
        wait_for(lambda: settled(admin, group, {"member-a"}, partitions), 30,
                 lambda: f"member-b's share moved, not {group_view(admin, group)}")
        assert assignment_of(describe(admin, group)) == {"member-a": set(range(partitions))}
        more = produce(bootstrap, topic, partitions, 30, "second")
        wait_for(lambda: set(more) <= set(a.values()), 30, "the survivor reads every partition")


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", set(revoked)))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", set(assigned)))


def consume(consumer: Consumer, count: int, timeout: float = 30) -> list[str]:
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200, max_records=count - len(got)).values():
            got += [r.value.decode() for r in records]
    return got


def test_a_member_commits_and_the_next_one_resumes_from_the_committed_offsets(bootstrap: str) -> None:
    topic, group = "resumed", "resumers"
    sent = topic_with_records(bootstrap, topic, 2, 40, "r")
    listener = Recorder()
    first = Consumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                     enable_auto_commit=False, partition_assignment_strategy="roundrobin", **_member_kwargs())
    first.subscribe([topic], listener=listener)
    read = consume(first, 25)
    assert len(read) == 25
    lag = first.metrics()["consumer-fetch-manager-metrics"]["records-lag-max"]
    assert 0 < lag <= 40 - 25, "records-lag-max: how far the position trails the log end"
    positions = {tp: first.position(tp) for tp in first.assignment()}
    answered: list[Exception | None] = []
    first.commit_async(callback=lambda offsets, error: answered.append(error)).result(10)
    first.poll(0)  # the callback runs inside a poll (whose records, not committed, the next member gets again)
    assert answered == [None]
    assert {tp: first.committed(tp) for tp in positions} == positions
    first.close()
    assert listener.events == [("revoked", set()), ("assigned", set(positions)), ("revoked", set(positions))]

    second = Consumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      **_member_kwargs())
    rest = consume(second, 15)
    assert sorted(read + rest) == sorted(sent), "the second member starts where the first committed: no gap, no repeat"
    second.close()  # auto-commit at close

    third = Consumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    committed = {TopicPartition(topic, p): third.committed(TopicPartition(topic, p)) for p in range(2)}
    assert committed == {TopicPartition(topic, 0): 20, TopicPartition(topic, 1): 20}
    # A standalone commit (generation -1) is taken while the group has no members.
    third.commit({TopicPartition(topic, 0): OffsetAndMetadata(5, "by hand")})
    assert third.committed(TopicPartition(topic, 0), metadata=True) == OffsetAndMetadata(5, "by hand", -1)
    third.close()


def test_a_member_the_group_moved_past_cannot_commit(bootstrap: str) -> None:
    topic, group = "stale", "stale-members"
    topic_with_records(bootstrap, topic, 1, 5, "s")
    slow = Consumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                    enable_auto_commit=False, max_poll_interval_ms=2000, **_member_kwargs())
    assert len(consume(slow, 5)) == 5
    # No poll() for longer than max_poll_interval_ms: the heartbeat thread leaves the group for it.
    with Admin(bootstrap) as admin:
        wait_for(lambda: describe(admin, group).state == "Empty", 20, "the idle member left")
    with pytest.raises(CommitFailedError):
        slow.commit()
    # The next poll rejoins; nothing was committed, so the records come again (at least once).
    assert len(consume(slow, 5)) == 5 and slow.assignment() == {TopicPartition(topic, 0)}
    slow.close(autocommit=False)


def test_a_pattern_subscription_follows_new_topics(bootstrap: str) -> None:
    topic_with_records(bootstrap, "pattern-a", 1, 3, "a")
    consumer = Consumer(bootstrap_servers=bootstrap, group_id="patterned", auto_offset_reset="earliest",
                        metadata_max_age_ms=500, **_member_kwargs())
    consumer.subscribe(pattern="pattern-.*")
    assert sorted(consume(consumer, 3)) == ["a-0", "a-1", "a-2"]
    assert consumer.subscription() == {"pattern-a"}
    later = topic_with_records(bootstrap, "pattern-b", 2, 4, "b")
    # The next metadata refresh shows the new topic: the member rejoins with it and reads it.
    assert sorted(consume(consumer, 4)) == sorted(later)
    assert consumer.assignment() == {TopicPartition("pattern-a", 0), TopicPartition("pattern-b", 0),
                                     TopicPartition("pattern-b", 1)}
    consumer.close()


def test_a_member_subscribed_to_a_topic_not_yet_created_reads_it_once_it_is(bootstrap: str) -> None:
    consumer = Consumer("created-later", bootstrap_servers=bootstrap, group_id="early", auto_offset_reset="earliest",
                        allow_auto_create_topics=False, metadata_max_age_ms=500, **_member_kwargs())
    wait_for(lambda: consumer.poll(timeout_ms=100) == {} and describe_state(bootstrap, "early") == "Stable", 30,
             "the member in the group, with nothing to read")
    assert consumer.assignment() == set()
    sent = topic_with_records(bootstrap, "created-later", 2, 6, "late")
    assert sorted(consume(consumer, 6)) == sorted(sent)
    consumer.close()


def describe_state(bootstrap: str, group: str) -> str:
    with Admin(bootstrap) as admin:
        return describe(admin, group).state


def _member_kwargs() -> dict[str, int]:
    return {"session_timeout_ms": SESSION_TIMEOUT_MS, "heartbeat_interval_ms": 300}


def command(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`minibroker consumer-groups ...`, run in this process: a new interpreter per call costs seconds."""
    argv = ["consumer-groups", "--bootstrap-server", bootstrap, *args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(argv)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def test_consumer_groups_describes_resets_and_deletes(bootstrap: str) -> None:
    topic, group = "described", "describers"
    topic_with_records(bootstrap, topic, 2, 20, "d")
    member = Consumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id="describer",
                      auto_offset_reset="earliest", enable_auto_commit=False, **_member_kwargs())
    assert len(consume(member, 14, 30)) == 14
    member.commit({TopicPartition(topic, 0): OffsetAndMetadata(7), TopicPartition(topic, 1): OffsetAndMetadata(3)})

    assert group in command(bootstrap, "--list").stdout.split()
    described = command(bootstrap, "--describe", "--group", group)
    assert described.returncode == 0, described.stderr
    header, *rows = described.stdout.strip().splitlines()
    assert header.split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                              "HOST", "CLIENT-ID"]
    cells = [row.split() for row in rows]
    assert [c[:6] for c in cells] == [[group, topic, "0", "7", "10", "3"], [group, topic, "1", "3", "10", "7"]]
    assert all(c[6].startswith("describer-") and c[7] == "/127.0.0.1" and c[8] == "describer" for c in cells)
    state = command(bootstrap, "--describe", "--group", group, "--state").stdout.strip().splitlines()
    assert state[0].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    assert state[1].split()[0] == group and state[1].split()[3:] == ["range", "Stable", "1"]
    members = command(bootstrap, "--describe", "--group", group, "--members", "--verbose").stdout.strip().splitlines()
    assert members[-1].split()[-2:] == ["2", f"{topic}(0,1)"]

    refused = command(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                      "--execute")
    assert refused.returncode == 1
    assert (f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state is"
            " Stable.") in refused.stdout
    not_empty = command(bootstrap, "--delete", "--group", group)
    assert not_empty.returncode == 1 and f"* Group '{group}' could not be deleted due to: NON_EMPTY_GROUP" in \
        not_empty.stdout
    member.close()

    empty = command(bootstrap, "--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in empty.stderr
    assert [row.split()[4:8] for row in empty.stdout.strip().splitlines()[1:]] == [["10", "3", "-", "-"],
                                                                                   ["10", "7", "-", "-"]]
    dry = command(bootstrap, "--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--shift-by", "-10",
                  "--dry-run")
    assert dry.stdout.split()[-4:] == [group, topic, "1", "0"], "shifted below the log start: the log start"
    latest = command(bootstrap, "--reset-offsets", "--group", group, "--all-topics", "--to-latest", "--execute")
    assert latest.returncode == 0, latest.stdout + latest.stderr
    assert [line.split()[-1] for line in latest.stdout.strip().splitlines()[1:]] == ["10", "10"]
    with Admin(bootstrap) as admin:
        assert admin.list_consumer_group_offsets(group) == {TopicPartition(topic, 0): OffsetAndMetadata(10, "", -1),
                                                            TopicPartition(topic, 1): OffsetAndMetadata(10, "", -1)}
    to_offset = command(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "4",
                        "--execute")
    assert to_offset.returncode == 0
    resumed = Consumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                       **_member_kwargs())
    assert len(consume(resumed, 12)) == 12, "6 + 6 records after offset 4 of each partition"
    resumed.close()

    deleted = command(bootstrap, "--delete", "--group", group)
    assert deleted.stdout.strip() == f"Deletion of requested consumer groups ('{group}') was successful."
    gone = command(bootstrap, "--describe", "--group", group)
    assert gone.stdout.strip() == f"Error: Consumer group '{group}' does not exist."
    assert group not in command(bootstrap, "--list").stdout.split()


def test_consumer_groups_deletes_offsets_of_topics_no_member_subscribes_to(bootstrap: str) -> None:
    group, kept, pruned = "pruners", "kept", "pruned"
    topic_with_records(bootstrap, kept, 1, 4, "k")
    topic_with_records(bootstrap, pruned, 2, 4, "p")
    member = Consumer(kept, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, **_member_kwargs())
    assert len(consume(member, 4)) == 4
    member.commit({TopicPartition(kept, 0): OffsetAndMetadata(4), TopicPartition(pruned, 0): OffsetAndMetadata(1),
                   TopicPartition(pruned, 1): OffsetAndMetadata(2)})
    subscribed = ("Error: GROUP_SUBSCRIBED_TO_TOPIC: Deleting offsets of a topic is forbidden while the consumer group"
                  " is actively subscribed to it.")

    partly = command(bootstrap, "--delete-offsets", "--group", group, "--topic", kept, "--topic", f"{pruned}:0",
                     "--topic", "absent")
    assert partly.returncode == 1
    assert [line.rstrip() for line in partly.stdout.splitlines()] == [
        "",
        "Error: Encounter some partition level error, see the follow-up details:",
        "",
        f"{'TOPIC':<30} {'PARTITION':<15} STATUS",
        f"{'absent':<30} {'Not Provided':<15} Error: UNKNOWN_TOPIC_OR_PARTITION: Topic absent not found.",
        f"{kept:<30} {'0':<15} {subscribed}",
        f"{pruned:<30} {'0':<15} Successful",
    ]
    with Admin(bootstrap) as admin:
        assert admin.list_consumer_group_offsets(group) == {TopicPartition(kept, 0): OffsetAndMetadata(4, "", -1),
                                                            TopicPartition(pruned, 1): OffsetAndMetadata(2, "", -1)}
    member.close()

    wait_for(lambda: describe_state(bootstrap, group) == "Empty", message="the member's LeaveGroup")
    deleted = command(bootstrap, "--delete-offsets", "--group", group, "--topic", kept)
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    assert [line.rstrip() for line in deleted.stdout.splitlines()] == [
        f"Request succeed for deleting offsets with topic {kept} group {group}", "",
        f"{'TOPIC':<30} {'PARTITION':<15} STATUS", f"{kept:<30} {'0':<15} Successful"]
    unknown = command(bootstrap, "--delete-offsets", "--group", "no-such-group", "--topic", f"{kept}:0")
    assert unknown.returncode == 1
    assert unknown.stdout.splitlines()[1] == "Error: 'no-such-group' does not exist."
    assert unknown.stdout.splitlines()[-1].split(None, 2)[2] == \
        "Error: GROUP_ID_NOT_FOUND: The group id does not exist."


def test_a_project_client_member_and_a_confluent_kafka_member_share_one_group(cluster: ClusterInfo) -> None:
    """Both write and read Kafka's ConsumerProtocol bytes: whichever is the leader assigns for both."""
    topic, group, bootstrap = "shared", "mixed", cluster.bootstrap_servers
    sent = topic_with_records(bootstrap, topic, 4, 40, "m")
    ours = Consumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id="project-member",
                    auto_offset_reset="earliest", **_member_kwargs())
    theirs = ConfluentConsumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": group,
                                "client.id": "confluent-member", "auto.offset.reset": "earliest",
                                "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 300})
    theirs.subscribe([topic])
    got: dict[str, list[str]] = {"project-member": [], "confluent-member": []}

    def poll_both() -> None:
        """Both members must keep polling for a rebalance to complete; what they read is kept."""
        for records in ours.poll(timeout_ms=100).values():
            got["project-member"] += [r.value.decode() for r in records]
        message = theirs.poll(0.1)
        if message is not None and message.error() is None:
            got["confluent-member"].append(message.value().decode())

    try:
        with Admin(bootstrap) as admin:
            wait_for(lambda: poll_both() or settled(admin, group, {"project-member", "confluent-member"}, 4), 60,
                     lambda: f"both members in the group, not {group_view(admin, group)}")
            owned = assignment_of(describe(admin, group))
            assert owned["project-member"] and owned["confluent-member"]
            read_before = {name: len(values) for name, values in got.items()}
            wait_for(lambda: poll_both() or set(got["project-member"]) | set(got["confluent-member"]) >= set(sent),
                     60, lambda: f"every record read by one member or the other: {got}")
            assert settled(admin, group, {"project-member", "confluent-member"}, 4), "no rebalance meanwhile"
        for name, values in got.items():
            # Since the split, each member reads only its own partitions (record i went to partition i % 4).
            assert {int(v.split("-")[1]) % 4 for v in values[read_before[name]:]} <= owned[name]
    finally:
        ours.close()
        theirs.close()


def test_members_follow_their_coordinator_when_it_is_killed(cluster_dir: Path, bootstrap: str) -> None:
    """SIGKILL of the broker coordinating a group (the module's last test: the broker stays down): the members
    find the new leader of the group's __consumer_offsets partition, rejoin, read on and commit there."""
    topic, group = "moving", "movers"
    topic_with_records(bootstrap, topic, 4, 20, "before")
    names = ("mover-1", "mover-2")
    got: dict[str, list[str]] = {name: [] for name in names}
    commit_errors: list[KafkaError] = []
    stop = threading.Event()

    def member(name: str) -> None:
        consumer = Consumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=name,
                            auto_offset_reset="earliest", enable_auto_commit=False, **_member_kwargs())
        try:
            while not stop.is_set():
                records = [r for batch in consumer.poll(timeout_ms=100).values() for r in batch]
                got[name] += [r.value.decode() for r in records]
                if records:
                    try:
                        consumer.commit(timeout_ms=10_000)
                    except KafkaError as e:  # the coordinator died under the commit: the records come again
                        commit_errors.append(e)
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, args=(name,), name=name) for name in names]
    for thread in threads:
        thread.start()
    try:
        with Admin(bootstrap) as admin:
            wait_for(lambda: settled(admin, group, set(names), 4), 60, lambda: group_view(admin, group))
            old = describe(admin, group).coordinator.node_id
            LocalCluster(cluster_dir).send_signal(f"broker-{old}", signal.SIGKILL)
            wait_for(lambda: describe(admin, group).coordinator.node_id != old and settled(admin, group, set(names), 4),
                     60, lambda: f"the group on a new coordinator, not {group_view(admin, group)}")
            after = produce(bootstrap, topic, 4, 20, "after")
            wait_for(lambda: set(after) <= set(got["mover-1"]) | set(got["mover-2"]), 60,
                     lambda: f"both members read on: {got}")
            partitions = [TopicPartition(topic, p) for p in range(4)]
            wait_for(lambda: admin.list_consumer_group_offsets(group) == {tp: OffsetAndMetadata(10, "", -1)
                                                                          for tp in partitions}, 30,
                     lambda: f"every partition committed to its end: {admin.list_consumer_group_offsets(group)}")
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    # A commit in flight when the coordinator died may fail; only with an error a member recovers from.
    assert all(e.retriable or isinstance(e, CommitFailedError) for e in commit_errors), commit_errors

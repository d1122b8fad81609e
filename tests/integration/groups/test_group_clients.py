"""Kafka clients' own group consumers against the group coordinator (issue 15's first proof): kafka-python,
confluent-kafka, aiokafka and `kcat -G` each join a group, are assigned every partition, consume, commit, and a
new consumer of the group resumes from the committed offsets; members of two different clients in one group
share its partitions. Committed offsets are read back through another client than the one that wrote them.
OffsetDelete (KIP-496) from kafka-python's admin client spares the topics a live confluent-kafka member
subscribes to and deletes the rest, and an Empty group's offsets, with Kafka's error codes."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, ConsumerGroupState, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError, UnknownTopicOrPartitionError

from tests.integration.group_cluster import GroupCluster, assignments, covers_once, group_cluster
from tests.integration.kafka_cluster import KAFKA_PYTHON_GROUP_MEMBER

pytestmark = pytest.mark.integration

PARTITIONS = 3
RECORDS = 30  # per round, spread over every partition
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupCluster]:
    with group_cluster(tmp_path_factory.mktemp("groups") / "cluster") as started:
        yield started


def produce(cluster: GroupCluster, topic: str, prefix: str, count: int, partitions: int = PARTITIONS) -> list[str]:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    values = [f"{prefix}-{i}" for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, value.encode(), partition=i % partitions)
    assert producer.flush(30) == 0
    return values


def committed(cluster: GroupCluster, group: str, topic: str, partitions: int = PARTITIONS) -> dict[int, int]:
    """The group's committed offsets, by kafka-python's OffsetFetch (whoever committed them)."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: consumer.committed(KpTopicPartition(topic, p)) for p in range(partitions)}
    finally:
        consumer.close()


# One session per client: join `group` on `topic`, be assigned all of it, read `count` values, commit, leave.
Session = Callable[[str, str, str, int], list[str]]


def kafka_python_session(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=10_000, heartbeat_interval_ms=1000,
                             **KAFKA_PYTHON_GROUP_MEMBER)
    try:
        got: list[str] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value.decode() for r in records)
        assert consumer.assignment() == {KpTopicPartition(topic, p) for p in range(PARTITIONS)}
        consumer.commit()
        return got
    finally:
        consumer.close()


def confluent_session(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 10_000})
    consumer.subscribe([topic])
    try:
        got: list[str] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.5):
                assert message.error() is None, message.error()
                got.append((message.value() or b"").decode())
        assert sorted(tp.partition for tp in consumer.assignment()) == list(range(PARTITIONS))
        consumer.commit(asynchronous=False)
        return got
    finally:
        consumer.close()


def aiokafka_session(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    async def run() -> list[str]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                    auto_offset_reset="earliest", session_timeout_ms=10_000)
        await consumer.start()
        try:
            got: list[str] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < count and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(r.value.decode() for r in records if r.value is not None)
            assert sorted(tp.partition for tp in consumer.assignment()) == list(range(PARTITIONS))
            await consumer.commit()
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


def kcat_session(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    """`kcat -G`: librdkafka's balanced consumer with auto-commit, exiting (and committing) at the end of every
    partition it was assigned."""
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is installed by scripts/setup.sh"
    run = subprocess.run([kcat, "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-e",
                          "-f", "%p:%s\n", topic], capture_output=True, text=True, timeout=TIMEOUT_S, check=True)
    lines = run.stdout.splitlines()
    assert {int(line.partition(":")[0]) for line in lines} == set(range(PARTITIONS)), run.stderr
    return [line.partition(":")[2] for line in lines]


SESSIONS: dict[str, Session] = {"kafka-python": kafka_python_session, "confluent-kafka": confluent_session,
                                "aiokafka": aiokafka_session, "kcat": kcat_session}


@pytest.mark.parametrize("client", list(SESSIONS))
def test_a_group_consumer_joins_consumes_commits_and_resumes_from_its_commit(cluster: GroupCluster,
                                                                             client: str) -> None:
    session = SESSIONS[client]
    topic = group = f"resume-{client}"
    cluster.create_topic(topic, PARTITIONS)
    first = produce(cluster, topic, "first", RECORDS)
    assert sorted(session(cluster.bootstrap, topic, group, RECORDS)) == sorted(first)
    assert committed(cluster, group, topic) == dict.fromkeys(range(PARTITIONS), RECORDS // PARTITIONS)
    # A new consumer of the group (a restart) starts where the group committed: only the new records.
    second = produce(cluster, topic, "second", RECORDS)
    assert sorted(session(cluster.bootstrap, topic, group, RECORDS)) == sorted(second)
    assert committed(cluster, group, topic) == dict.fromkeys(range(PARTITIONS), 2 * RECORDS // PARTITIONS)


def test_members_of_two_clients_share_the_groups_partitions(cluster: GroupCluster) -> None:
    topic = group = "shared"
    partitions = 4
    cluster.create_topic(topic, partitions)
    stop = threading.Event()
    got: dict[str, list[tuple[int, str]]] = {"ck-member": [], "kp-member": []}
    errors: list[BaseException] = []

    def confluent_member() -> None:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "client.id": "ck-member",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        try:
            while not stop.is_set():
                for message in consumer.consume(100, 0.2):
                    if message.error() is None:
                        got["ck-member"].append((message.partition() or 0, (message.value() or b"").decode()))
            consumer.commit(asynchronous=False)
        except BaseException as e:
            errors.append(e)
        finally:
            consumer.close()

    def kafka_python_member() -> None:
        consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, client_id="kp-member",
                                 enable_auto_commit=False, auto_offset_reset="earliest", **KAFKA_PYTHON_GROUP_MEMBER)
        try:
            while not stop.is_set():
                for tp, records in consumer.poll(timeout_ms=200).items():
                    got["kp-member"].extend((tp.partition, r.value.decode()) for r in records)
            consumer.commit()
        except BaseException as e:
            errors.append(e)
        finally:
            consumer.close()

    threads = [threading.Thread(target=confluent_member), threading.Thread(target=kafka_python_member)]
    for thread in threads:
        thread.start()
    try:
        description = cluster.wait_stable(group, members=2, covering=(topic, partitions))
        assigned = assignments(description, topic)
        assert {m.client_id for m in description.members} == {"ck-member", "kp-member"}
        assert all(assigned.values()), assigned
        by_client = {m.client_id: assigned[m.member_id] for m in description.members}
        values = produce(cluster, topic, "shared", 80, partitions)
        deadline = time.monotonic() + TIMEOUT_S
        while sum(len(g) for g in got.values()) < len(values) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert errors == []
    assert sorted(v for g in got.values() for _, v in g) == sorted(values), "every record once, by one member"
    for client, records in got.items():
        assert records and {p for p, _ in records} <= set(by_client[client]), (client, by_client)
    assert committed(cluster, group, topic, partitions) == dict.fromkeys(range(partitions), 20)


def test_offset_delete_spares_what_live_members_subscribe_to_and_empties_a_group(cluster: GroupCluster) -> None:
    group, subscribed, other = "offset-delete", "od-subscribed", "od-other"
    cluster.create_topic(subscribed, 2)
    cluster.create_topic(other, 1)
    values = produce(cluster, subscribed, "od", 10, partitions=2)
    member = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                       "auto.offset.reset": "earliest"})
    member.subscribe([subscribed])
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        got = 0
        deadline = time.monotonic() + TIMEOUT_S
        while got < len(values) and time.monotonic() < deadline:
            got += sum(1 for m in member.consume(100, 0.5) if m.error() is None)
        assert got == len(values)
        member.commit(asynchronous=False)
        # A member may commit for a topic it does not subscribe to: the offsets KIP-496 lets go.
        member.commit(offsets=[CkTopicPartition(other, 0, 3)], asynchronous=False)
        cluster.wait_stable(group, members=1)
        answers = admin.delete_group_offsets(group, [KpTopicPartition(subscribed, 0), KpTopicPartition(other, 0),
                                                     KpTopicPartition("od-never-created", 0)])
        assert answers == {KpTopicPartition(subscribed, 0): GroupSubscribedToTopicError,
                           KpTopicPartition(other, 0): NoError,
                           KpTopicPartition("od-never-created", 0): UnknownTopicOrPartitionError}
        assert committed(cluster, group, other, 1) == {0: None}, "OffsetFetch: -1, nothing committed"
        assert committed(cluster, group, subscribed, 2) == {0: 5, 1: 5}
        assert cluster.describe(group).state == ConsumerGroupState.STABLE
    finally:
        member.close()

    # Empty (the member left): every partition named is deleted; with no offsets left the group is gone.
    deadline = time.monotonic() + TIMEOUT_S
    while cluster.describe(group).state != ConsumerGroupState.EMPTY and time.monotonic() < deadline:
        time.sleep(0.1)  # a condition polled under a deadline: the member's LeaveGroup
    answers = admin.delete_group_offsets(group, [KpTopicPartition(subscribed, 0), KpTopicPartition(subscribed, 1)])
    assert answers == dict.fromkeys([KpTopicPartition(subscribed, 0), KpTopicPartition(subscribed, 1)], NoError)
    assert committed(cluster, group, subscribed, 2) == {0: None, 1: None}
    assert cluster.describe(group).state == ConsumerGroupState.DEAD
    for gone in (group, "od-no-such-group"):
        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets(gone, [KpTopicPartition(subscribed, 0)])
    admin.close()


def test_cooperative_sticky_members_rebalance_incrementally(cluster: GroupCluster) -> None:
    """librdkafka's cooperative-sticky (KIP-429) scaling out and in: after each rebalance every partition is held
    by exactly one member, as the coordinator also says; a member only ever gives up (or gains) the partitions that
    move, and keeps reading the partitions it retains from where it was. No member commits, so a partition whose
    fetch position were reset by a rebalance (an eager revoke of everything) would be read again from the start."""
    topic = group = "cooperative"
    partitions = 6
    cluster.create_topic(topic, partitions)
    members: dict[str, Consumer] = {}
    events: dict[str, list[tuple[str, list[int]]]] = {}
    consumed: dict[str, list[tuple[int, str]]] = {}
    produced: list[tuple[int, str]] = []

    def join(name: str) -> None:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "client.id": name,
                             "partition.assignment.strategy": "cooperative-sticky", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "session.timeout.ms": 10_000})
        events[name], consumed[name] = [], []

        def record(kind: str) -> Callable[[Consumer, list[CkTopicPartition]], None]:
            # No assign call here: confluent-kafka then applies the incremental assignment itself.
            return lambda _consumer, tps: events[name].append((kind, sorted(tp.partition for tp in tps)))

        consumer.subscribe([topic], on_assign=record("assign"), on_revoke=record("revoke"))
        members[name] = consumer

    def held() -> dict[str, list[int]]:
        return {name: sorted(tp.partition for tp in c.assignment()) for name, c in members.items()}

    def produce_round(label: str) -> None:
        values = produce(cluster, topic, label, 2 * partitions, partitions)
        produced.extend((i % partitions, value) for i, value in enumerate(values))

    def settle() -> dict[str, list[int]]:
        """Poll every member until each partition is held once, the coordinator's Stable group says the same,
        and everything produced has been read; what each member holds then."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            for name, consumer in members.items():
                consumed[name].extend((m.partition() or 0, (m.value() or b"").decode())
                                      for m in consumer.consume(100, 0.05) if m.error() is None)
            mine = held()
            read = {v for got in consumed.values() for _, v in got}
            if covers_once(mine, partitions) and all(mine.values()) and read >= {v for _, v in produced}:
                description = cluster.describe(group)
                by_client = {m.client_id: assignments(description, topic)[m.member_id] for m in description.members}
                if description.state == ConsumerGroupState.STABLE and by_client == mine:
                    return mine
            if time.monotonic() > deadline:
                raise AssertionError(f"no settled group after {TIMEOUT_S} s: {mine}, {events}")

    def moves_since(marks: dict[str, int]) -> dict[str, list[tuple[str, list[int]]]]:
        """Each member's assign / revoke callbacks since `marks`, the empty ones left out."""
        return {name: [e for e in events[name][marks.get(name, 0):] if e[1]] for name in members}

    try:
        join("a")
        produce_round("one")
        steps = [settle()]
        assert steps[0] == {"a": list(range(partitions))}

        marks = {name: len(e) for name, e in events.items()}
        join("b")
        produce_round("two")
        steps.append(settle())
        moved = steps[1]["b"]
        # Scale out: a gives up only what b takes, in one incremental revoke; a is assigned nothing anew.
        assert moves_since(marks) == {"a": [("revoke", moved)], "b": [("assign", moved)]}

        marks = {name: len(e) for name, e in events.items()}
        join("c")
        produce_round("three")
        steps.append(settle())
        moves = moves_since(marks)
        assert all(kind == "revoke" for name in ("a", "b") for kind, _ in moves[name]), moves
        assert sorted(p for name in ("a", "b") for _, ps in moves[name] for p in ps) == steps[2]["c"]
        assert moves["c"] == [("assign", steps[2]["c"])]

        # Scale in: b leaves; a and c are only given b's partitions, nothing is taken from them.
        marks = {name: len(e) for name, e in events.items() if name != "b"}
        members.pop("b").close()
        produce_round("four")
        steps.append(settle())
        moves = moves_since(marks)
        assert all(kind == "assign" for name in ("a", "c") for kind, _ in moves[name]), moves
        assert sorted(p for name in ("a", "c") for _, ps in moves[name] for p in ps) == steps[2]["b"]
        for name in ("a", "c"):
            assert set(steps[2][name]) <= set(steps[3][name]), "sticky: a survivor keeps what it held"
    finally:
        for consumer in members.values():
            consumer.close()

    # What a held from the first step to the last it read once and whole, through three rebalances.
    retained = set(steps[0]["a"]).intersection(*(step["a"] for step in steps[1:]))
    assert retained
    read = [(p, v) for p, v in consumed["a"] if p in retained]
    assert sorted(read) == sorted((p, v) for p, v in produced if p in retained), "no record of a kept partition twice"

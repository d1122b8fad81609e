"""The transaction coordinator with each of Kafka's three Python clients' transactional producers (issue 25):
confluent-kafka, kafka-python and aiokafka each commit and abort across partitions, and each library's
read_committed consumers see only what was committed while its read_uncommitted ones see everything; an open
transaction holds read_committed readers at the last stable offset while read_uncommitted readers pass it; a second
producer with the same transactional id fences the first and its transaction is aborted; a transaction nobody ends
is aborted by its timeout and readers move on; consume-transform-produce with send_offsets_to_transaction moves
each input record to the output once and the group's offsets with it (tests/integration/transaction_clients.py
puts the three libraries behind one face).

One cluster for the module (three brokers, __transaction_state with three partitions, replication factor 3,
min.isr 2, a timed-out transaction looked for every half second); each test has topics of its own."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from tests.integration.conftest import WaitUntil
from tests.integration.group_cluster import GroupCluster, group_cluster
from tests.integration.transaction_clients import (
    LIBRARIES,
    TransactionalProducer,
    committed_offsets,
    ends,
    fenced,
    group_member,
    read_all,
    transactional_producer,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3
OVERRIDES = (
    "transaction.state.log.num.partitions=3",
    "offsets.topic.num.partitions=3",
    # A timed-out transaction is looked for every half second (10 s by default).
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
)
_topics = itertools.count()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupCluster]:
    with group_cluster(tmp_path_factory.mktemp("txn-matrix") / "cluster", OVERRIDES) as started:
        yield started


def new_topic(cluster: GroupCluster, name: str) -> str:
    topic = f"{name}-{next(_topics)}"
    cluster.create_topic(topic, PARTITIONS, {"min.insync.replicas": "2"})
    return topic


def values(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


def spread(values: list[str]) -> list[tuple[int, str]]:
    """values[i] to partition i % PARTITIONS."""
    return [(i % PARTITIONS, value) for i, value in enumerate(values)]


def assert_every_reader_sees(cluster: GroupCluster, topic: str, committed: list[str], everything: list[str],
                             settled: bool = True) -> None:
    """Each library's read_committed reader reads `committed`, its read_uncommitted one `everything`."""
    for reader in LIBRARIES:
        for isolation, expected in (("read_committed", committed), ("read_uncommitted", everything)):
            got = read_all(reader, cluster.bootstrap, topic, PARTITIONS, isolation, settled=settled)
            assert sorted(got) == sorted(expected), (reader, isolation)


@pytest.fixture
def producers() -> Iterator[list[TransactionalProducer]]:
    """Producers the test opens, closed at its end whatever happened."""
    opened: list[TransactionalProducer] = []
    yield opened
    for p in opened:
        p.close()


@pytest.mark.parametrize("library", LIBRARIES)
def test_commit_and_abort_across_partitions(cluster: GroupCluster, library: str,
                                            producers: list[TransactionalProducer]) -> None:
    topic = new_topic(cluster, "commit-abort")
    p = transactional_producer(library, cluster.bootstrap, f"commit-abort-{library}")
    producers.append(p)
    for prefix, commit in (("first", True), ("aborted", False), ("second", True)):
        p.begin()
        p.send(topic, spread(values(prefix, 9)))
        if commit:
            p.commit()
        else:
            p.abort()
    assert_every_reader_sees(cluster, topic, values("first", 9) + values("second", 9),
                             values("first", 9) + values("aborted", 9) + values("second", 9))


@pytest.mark.parametrize("library", LIBRARIES)
def test_an_open_transaction_holds_read_committed_at_the_last_stable_offset(
        cluster: GroupCluster, library: str, producers: list[TransactionalProducer], wait_until: WaitUntil) -> None:
    topic = new_topic(cluster, "open")
    p = transactional_producer(library, cluster.bootstrap, f"open-{library}")
    producers.append(p)
    p.begin()
    p.send(topic, spread(values("committed", 3)))
    p.commit()
    # EndTxn is answered once PrepareCommit is durable; the markers follow.
    wait_until(lambda: ends(library, cluster.bootstrap, topic, PARTITIONS, "read_committed") == [2, 2, 2],
               message="the first commit's markers")
    p.begin()
    p.send(topic, spread(values("open", 6)))
    # Written and replicated (acks=all), but not committed: only read_uncommitted readers pass them.
    for reader in LIBRARIES:
        assert ends(reader, cluster.bootstrap, topic, PARTITIONS, "read_committed") == [2, 2, 2], reader
        assert ends(reader, cluster.bootstrap, topic, PARTITIONS, "read_uncommitted") == [4, 4, 4], reader
    assert_every_reader_sees(cluster, topic, values("committed", 3), values("committed", 3) + values("open", 6),
                             settled=False)
    p.commit()
    # The commit marker takes an offset too: the stable end passes the records and the marker.
    wait_until(lambda: ends(library, cluster.bootstrap, topic, PARTITIONS, "read_committed") == [5, 5, 5],
               message="the LSO past the committed transaction")
    everything = values("committed", 3) + values("open", 6)
    assert_every_reader_sees(cluster, topic, everything, everything)


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_second_producer_fences_the_first_and_aborts_its_transaction(
        cluster: GroupCluster, library: str, producers: list[TransactionalProducer]) -> None:
    topic, transactional_id = new_topic(cluster, "fenced"), f"fenced-{library}"
    first = transactional_producer(library, cluster.bootstrap, transactional_id)
    producers.append(first)
    first.begin()
    first.send(topic, spread(values("zombie", 6)))
    # Its InitProducerId aborts the open transaction and bumps the epoch.
    second = transactional_producer(library, cluster.bootstrap, transactional_id)
    producers.append(second)
    with pytest.raises(Exception) as raised:
        first.commit()
    assert fenced(library, raised.value), repr(raised.value)
    second.begin()
    second.send(topic, spread(values("successor", 6)))
    second.commit()
    assert_every_reader_sees(cluster, topic, values("successor", 6), values("zombie", 6) + values("successor", 6))


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_hanging_transaction_is_aborted_by_its_timeout(
        cluster: GroupCluster, library: str, producers: list[TransactionalProducer], wait_until: WaitUntil) -> None:
    topic = new_topic(cluster, "hanging")
    hanging = transactional_producer(library, cluster.bootstrap, f"hanging-{library}", timeout_ms=3000)
    producers.append(hanging)
    hanging.begin()
    hanging.send(topic, spread(values("hung", 6)))
    # Nobody ends it: the coordinator aborts it after transaction.timeout.ms and read_committed readers move on.
    wait_until(lambda: ends(library, cluster.bootstrap, topic, PARTITIONS, "read_committed") == [3, 3, 3],
               timeout=60, message="the timed-out transaction's abort markers")
    assert_every_reader_sees(cluster, topic, [], values("hung", 6))
    # The producer learns it was fenced (the abort bumped its epoch) when it tries to commit.
    with pytest.raises(Exception) as raised:
        hanging.commit()
    assert fenced(library, raised.value), repr(raised.value)


@pytest.mark.parametrize("library", LIBRARIES)
def test_consume_transform_produce_moves_each_record_once_and_the_offsets_with_it(
        cluster: GroupCluster, library: str, producers: list[TransactionalProducer]) -> None:
    """A group member of `library` reads the input; its transactional producer writes each record's upper-cased
    value to the output and the member's positions in the same transaction. A commit moves the output and the
    group's offsets together; an abort moves neither, and the work done again after the rewind reaches the output
    once."""
    source, sink, group = new_topic(cluster, "eos-input"), new_topic(cluster, "eos-output"), f"eos-{library}"
    member = group_member(library, cluster.bootstrap, source, group)
    p = transactional_producer(library, cluster.bootstrap, f"eos-app-{library}")
    producers.append(p)

    def load(inputs: list[str]) -> None:
        loader = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
        for partition, value in spread(inputs):
            loader.produce(source, value.encode(), partition=partition)
        assert loader.flush(30) == 0

    def offsets() -> list[int]:
        return committed_offsets(cluster.bootstrap, group, source, PARTITIONS)

    def transform(count: int, commit: bool) -> list[str]:
        records = member.poll(count)
        p.begin()
        p.send(sink, [(r.partition, r.value.upper()) for r in records])
        p.send_offsets(member)
        if commit:
            p.commit()
        else:
            p.abort()
        return [r.value for r in records]

    try:
        first, second = values("first", 12), values("second", 6)
        load(first)
        assert sorted(transform(len(first), commit=True)) == sorted(first)
        assert offsets() == [4, 4, 4]
        load(second)
        assert sorted(transform(len(second), commit=False)) == sorted(second)
        assert offsets() == [4, 4, 4]  # the aborted transaction's went with it
        # The application rewinds to its committed offsets and does the aborted work again.
        for partition in range(PARTITIONS):
            member.seek(partition, 4)
        assert sorted(transform(len(second), commit=True)) == sorted(second)
        assert offsets() == [6, 6, 6]
    finally:
        member.close()
    upper = [v.upper() for v in first + second]
    assert_every_reader_sees(cluster, sink, upper, upper + [v.upper() for v in second])

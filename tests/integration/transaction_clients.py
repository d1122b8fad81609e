"""Kafka's three Python clients behind one face, for the transaction tests that hold each to the same rules
(issue 25): confluent-kafka's, kafka-python's and aiokafka's transactional producers, their readers of a topic
to its end by isolation level (ListOffsets for the end, then Fetch until each partition's position reaches it),
and their group members for consume-transform-produce. aiokafka's coroutines run on one event loop in a thread
of its own, so its producers and consumers keep their background tasks (the sender, heartbeats) going between
the test's calls."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple, Protocol, TypeVar

import kafka.errors
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import ProducerFenced
from aiokafka.structs import OffsetAndMetadata as AioOffsetAndMetadata
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.structs import OffsetAndMetadata as KpOffsetAndMetadata

from tests.integration.kafka_cluster import KAFKA_PYTHON_GROUP_MEMBER

LIBRARIES = ("confluent-kafka", "kafka-python", "aiokafka")
TIMEOUT_S = 60.0
T = TypeVar("T")


@functools.cache
def _aio_loop() -> asyncio.AbstractEventLoop:
    """One event loop in a daemon thread for every aiokafka client of the test session."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="aiokafka-loop", daemon=True).start()
    return loop


def aio(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run_coroutine_threadsafe(coroutine, _aio_loop()).result(timeout=TIMEOUT_S * 2)


class Record(NamedTuple):
    partition: int
    value: str


class GroupMember(Protocol):
    """A consumer in a group, subscribed to one topic, reading read_committed from the group's offsets (earliest
    when it has none)."""

    def poll(self, count: int) -> list[Record]: ...
    def seek(self, partition: int, offset: int) -> None: ...
    def close(self) -> None: ...


class TransactionalProducer(Protocol):
    """A producer with init_transactions done."""

    def begin(self) -> None: ...
    def send(self, topic: str, records: list[tuple[int, str]]) -> None:
        """Each (partition, value), then wait until every one is written (acks=all)."""
    def send_offsets(self, member: GroupMember) -> None:
        """The member's positions in the transaction (send_offsets_to_transaction)."""
    def commit(self) -> None: ...
    def abort(self) -> None: ...
    def close(self) -> None: ...


# confluent-kafka

class _ConfluentProducer:
    def __init__(self, bootstrap: str, transactional_id: str, timeout_ms: int) -> None:
        self.p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                           "transaction.timeout.ms": timeout_ms})
        self.p.init_transactions(TIMEOUT_S)

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(self, topic: str, records: list[tuple[int, str]]) -> None:
        for partition, value in records:
            self.p.produce(topic, value.encode(), partition=partition)
        assert self.p.flush(TIMEOUT_S) == 0

    def send_offsets(self, member: GroupMember) -> None:
        assert isinstance(member, _ConfluentMember)
        c = member.consumer
        self.p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), TIMEOUT_S)

    def commit(self) -> None:
        self.p.commit_transaction(TIMEOUT_S)

    def abort(self) -> None:
        self.p.abort_transaction(TIMEOUT_S)

    def close(self) -> None:
        """librdkafka's handle closes when the object goes; a fenced producer's flush() would raise."""


class _ConfluentMember:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        self.consumer.subscribe([topic])

    def poll(self, count: int) -> list[Record]:
        records: list[Record] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(records) < count:
            assert time.monotonic() < deadline, f"{len(records)} of {count} input records in a minute"
            message = self.consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                records.append(Record(message.partition() or 0, (message.value() or b"").decode()))
        return records

    def seek(self, partition: int, offset: int) -> None:
        [tp] = [tp for tp in self.consumer.assignment() if tp.partition == partition]
        self.consumer.seek(TopicPartition(tp.topic, partition, offset))

    def close(self) -> None:
        self.consumer.close()


def _confluent_ends(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": isolation})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


def _confluent_read(bootstrap: str, topic: str, partitions: int, isolation: str, deadline: float) -> list[str]:
    """To each partition's end as librdkafka sees it (its partition EOF: the LSO for read_committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        values: list[str] = []
        at_end: set[int | None] = set()
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{isolation}: only {at_end} reached their end: {values}"
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                raise KafkaException(error)
            at_end.discard(message.partition())
            values.append((message.value() or b"").decode())
        return values
    finally:
        consumer.close()


# kafka-python

class _KafkaPythonProducer:
    def __init__(self, bootstrap: str, transactional_id: str, timeout_ms: int) -> None:
        self.p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, linger_ms=5,
                               transaction_timeout_ms=timeout_ms, max_block_ms=int(TIMEOUT_S * 1000))
        self.p.init_transactions()

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(self, topic: str, records: list[tuple[int, str]]) -> None:
        futures = [self.p.send(topic, value.encode(), partition=partition) for partition, value in records]
        for future in futures:
            future.get(timeout=TIMEOUT_S)

    def send_offsets(self, member: GroupMember) -> None:
        assert isinstance(member, _KafkaPythonMember)
        c = member.consumer
        self.p.send_offsets_to_transaction({tp: KpOffsetAndMetadata(c.position(tp), "", -1)
                                            for tp in c.assignment()}, c.group_metadata())

    def commit(self) -> None:
        self.p.commit_transaction()

    def abort(self) -> None:
        self.p.abort_transaction()

    def close(self) -> None:
        self.p.close(timeout=0)


class _KafkaPythonMember:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                      auto_offset_reset="earliest", isolation_level="read_committed",
                                      **KAFKA_PYTHON_GROUP_MEMBER)

    def poll(self, count: int) -> list[Record]:
        records: list[Record] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(records) < count:
            assert time.monotonic() < deadline, f"{len(records)} of {count} input records in a minute"
            for batch in self.consumer.poll(timeout_ms=500, max_records=count - len(records)).values():
                records.extend(Record(r.partition, r.value.decode()) for r in batch)
        return records

    def seek(self, partition: int, offset: int) -> None:
        [tp] = [tp for tp in self.consumer.assignment() if tp.partition == partition]
        self.consumer.seek(tp, offset)

    def close(self) -> None:
        self.consumer.close(autocommit=False)


def _kafka_python_reader(bootstrap: str, isolation: str) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation)


def _kafka_python_ends(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    consumer = _kafka_python_reader(bootstrap, isolation)
    try:
        tps = [KpTopicPartition(topic, p) for p in range(partitions)]
        ends = consumer.end_offsets(tps)
        return [ends[tp] for tp in tps]
    finally:
        consumer.close()


def _kafka_python_read(bootstrap: str, topic: str, partitions: int, isolation: str, deadline: float) -> list[str]:
    consumer = _kafka_python_reader(bootstrap, isolation)
    try:
        tps = [KpTopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(tps)
        values: list[str] = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, (
                f"{isolation}: positions {[consumer.position(tp) for tp in tps]}, ends {ends}: {values}")
            for batch in consumer.poll(timeout_ms=500).values():
                values.extend(r.value.decode() for r in batch)
        return values
    finally:
        consumer.close()


# aiokafka

class _AiokafkaProducer:
    def __init__(self, bootstrap: str, transactional_id: str, timeout_ms: int) -> None:
        async def start() -> AIOKafkaProducer:
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, linger_ms=5,
                                 transaction_timeout_ms=timeout_ms)
            await p.start()  # InitProducerId: aiokafka's init_transactions
            return p

        self.p = aio(start())

    def begin(self) -> None:
        aio(self.p.begin_transaction())

    def send(self, topic: str, records: list[tuple[int, str]]) -> None:
        async def send() -> None:
            futures = [await self.p.send(topic, value.encode(), partition=partition) for partition, value in records]
            await asyncio.gather(*futures)

        aio(send())

    def send_offsets(self, member: GroupMember) -> None:
        assert isinstance(member, _AiokafkaMember)
        c = member.consumer

        async def send_offsets() -> None:
            # aiokafka takes the group id alone: TxnOffsetCommit without KIP-447's generation and member id.
            offsets = {tp: AioOffsetAndMetadata(await c.position(tp), "") for tp in c.assignment()}
            await self.p.send_offsets_to_transaction(offsets, member.group)

        aio(send_offsets())

    def commit(self) -> None:
        aio(self.p.commit_transaction())

    def abort(self) -> None:
        aio(self.p.abort_transaction())

    def close(self) -> None:
        aio(self.p.stop())


class _AiokafkaMember:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.group = group

        async def start() -> AIOKafkaConsumer:
            c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                 auto_offset_reset="earliest", isolation_level="read_committed")
            await c.start()
            return c

        self.consumer = aio(start())

    def poll(self, count: int) -> list[Record]:
        async def poll() -> list[Record]:
            records: list[Record] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(records) < count:
                assert time.monotonic() < deadline, f"{len(records)} of {count} input records in a minute"
                got = await self.consumer.getmany(timeout_ms=500, max_records=count - len(records))
                for batch in got.values():
                    records.extend(Record(r.partition, (r.value or b"").decode()) for r in batch)
            return records

        return aio(poll())

    def seek(self, partition: int, offset: int) -> None:
        [tp] = [tp for tp in self.consumer.assignment() if tp.partition == partition]
        self.consumer.seek(tp, offset)

    def close(self) -> None:
        aio(self.consumer.stop())


async def _aiokafka_reader(bootstrap: str, isolation: str) -> AIOKafkaConsumer:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation)
    await consumer.start()
    return consumer


def _aiokafka_ends(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    async def ends() -> list[int]:
        consumer = await _aiokafka_reader(bootstrap, isolation)
        try:
            tps = [AioTopicPartition(topic, p) for p in range(partitions)]
            answer = await consumer.end_offsets(tps)
            return [answer[tp] for tp in tps]
        finally:
            await consumer.stop()

    return aio(ends())


def _aiokafka_read(bootstrap: str, topic: str, partitions: int, isolation: str, deadline: float) -> list[str]:
    async def read() -> list[str]:
        consumer = await _aiokafka_reader(bootstrap, isolation)
        try:
            tps = [AioTopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning()
            ends = await consumer.end_offsets(tps)
            values: list[str] = []
            while any([await consumer.position(tp) < ends[tp] for tp in tps]):
                assert time.monotonic() < deadline, f"{isolation}: ends {ends}: {values}"
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    values.extend((r.value or b"").decode() for r in batch)
            return values
        finally:
            await consumer.stop()

    return aio(read())


# One face

_PRODUCERS: dict[str, Callable[[str, str, int], TransactionalProducer]] = {
    "confluent-kafka": _ConfluentProducer, "kafka-python": _KafkaPythonProducer, "aiokafka": _AiokafkaProducer}
_MEMBERS: dict[str, Callable[[str, str, str], GroupMember]] = {
    "confluent-kafka": _ConfluentMember, "kafka-python": _KafkaPythonMember, "aiokafka": _AiokafkaMember}
_ENDS: dict[str, Callable[[str, str, int, str], list[int]]] = {
    "confluent-kafka": _confluent_ends, "kafka-python": _kafka_python_ends, "aiokafka": _aiokafka_ends}
_READS: dict[str, Callable[[str, str, int, str, float], list[str]]] = {
    "confluent-kafka": _confluent_read, "kafka-python": _kafka_python_read, "aiokafka": _aiokafka_read}


def transactional_producer(library: str, bootstrap: str, transactional_id: str,
                           timeout_ms: int = 60000) -> TransactionalProducer:
    """`library`'s producer with `transactional_id` (transaction.timeout.ms `timeout_ms`), initialised."""
    return _PRODUCERS[library](bootstrap, transactional_id, timeout_ms)


def group_member(library: str, bootstrap: str, topic: str, group: str) -> GroupMember:
    return _MEMBERS[library](bootstrap, topic, group)


def fenced(library: str, error: BaseException) -> bool:
    """Whether `error` is how `library` tells its producer another one with its transactional id took over."""
    if library == "confluent-kafka":
        return (isinstance(error, KafkaException) and error.args[0].fatal()
                and error.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH))
    if library == "kafka-python":
        return isinstance(error, (kafka.errors.ProducerFencedError, kafka.errors.InvalidProducerEpochError))
    return isinstance(error, ProducerFenced)


def ends(library: str, bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    """ListOffsets(latest) per partition as `library`'s consumer of `isolation` asks it: the LSO for
    read_committed, the high watermark for read_uncommitted."""
    return _ENDS[library](bootstrap, topic, partitions, isolation)


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offsets, per partition, once no commit of theirs is pending (librdkafka's
    read_committed committed() asks OffsetFetch with require_stable)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        answers = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        assert all(tp.error is None for tp in answers), answers
        return [tp.offset for tp in answers]
    finally:
        consumer.close()


def read_all(library: str, bootstrap: str, topic: str, partitions: int, isolation: str,
             timeout: float = TIMEOUT_S, settled: bool = True) -> list[str]:
    """Every data record a consumer of `library` and `isolation` reads from the start of each partition to its
    end; when `settled`, once no transaction is open (EndTxn is answered before its markers are written)."""
    deadline = time.monotonic() + timeout
    while settled and (_confluent_ends(bootstrap, topic, partitions, "read_committed")
                       != _confluent_ends(bootstrap, topic, partitions, "read_uncommitted")):
        assert time.monotonic() < deadline, "a transaction stayed open"
        time.sleep(0.1)  # a condition polled under a deadline: the markers of the last EndTxn
    return _READS[library](bootstrap, topic, partitions, isolation, deadline)

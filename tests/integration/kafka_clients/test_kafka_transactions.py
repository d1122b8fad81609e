"""The transaction coordinator with real transactional producers (issue 25): confluent-kafka commits and aborts
across partitions, and read_committed consumers see only what was committed while read_uncommitted ones see
everything; an open transaction holds read_committed readers at the last stable offset; a second producer with
the same transactional.id fences the first and its transaction is aborted; a transaction nobody ends is aborted by
its timeout; the coordinator SIGKILLed right after EndTxn answered, and a data partition's leader SIGKILLed
mid-transaction, leave every read_committed reader with the transaction whole; AddOffsetsToTxn puts the group's
__consumer_offsets partition in the transaction (its marker lands there). Then kafka-python's and aiokafka's
transactional producers do the same commit / abort round trip.

Three brokers, __transaction_state with three partitions (replication factor 3, min.isr 2, as by default)."""

from __future__ import annotations

import asyncio
import datetime
import logging
import signal
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kio.schema.add_offsets_to_txn.v1.request import AddOffsetsToTxnRequest
from kio.schema.add_offsets_to_txn.v1.response import AddOffsetsToTxnResponse
from kio.schema.end_txn.v1.request import EndTxnRequest
from kio.schema.end_txn.v1.response import EndTxnResponse
from kio.schema.find_coordinator.v1.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v1.response import FindCoordinatorResponse
from kio.schema.init_producer_id.v1.request import InitProducerIdRequest
from kio.schema.init_producer_id.v1.response import InitProducerIdResponse
from kio.schema.types import GroupId, TransactionalId
from kio.static.primitive import i8, i32Timedelta

from broker.coordinator.group.group_metadata_manager import partition_for as offsets_partition_for
from broker.coordinator.transaction.transaction_state_manager import partition_for
from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster
from tests.integration.kafka_wire import WireConnection, encode_request

pytestmark = pytest.mark.integration

TOPIC = "txn"
PARTITIONS = 3
STATE_PARTITIONS = 3
OFFSETS_PARTITIONS = 3
OVERRIDES = {
    "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    # A timed-out transaction is looked for every half second (10 s by default).
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController) -> KafkaCluster:
    cluster = start_kafka_cluster(start_brokers, start_controller, overrides=OVERRIDES)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[TOPIC].result(timeout=60)
    return cluster


def producer(cluster: KafkaCluster, transactional_id: str, **config: object) -> Producer:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                  **config})
    p.init_transactions(60)
    return p


def produce(p: Producer, values: list[str], partitions: int = PARTITIONS) -> None:
    for i, value in enumerate(values):
        p.produce(TOPIC, value.encode(), partition=i % partitions)
    assert p.flush(30) == 0


def read_all(cluster: KafkaCluster, isolation: str, timeout: float = 30.0, settled: bool = True,
             topic: str = TOPIC) -> list[str]:
    """Every data record of the topic a consumer of `isolation` reads, up to the partitions' (stable) ends; when
    `settled`, once no transaction is open (EndTxn is answered before its markers are written)."""
    deadline = time.monotonic() + timeout
    while settled and stable_ends(cluster, "read_committed", topic) != stable_ends(cluster, "read_uncommitted", topic):
        assert time.monotonic() < deadline, "a transaction stayed open"
        time.sleep(0.1)  # a condition polled under a deadline: the markers of the last EndTxn
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        values, at_end = [], set()
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"{isolation}: only {at_end} reached their end: {values}"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                raise KafkaException(message.error())
            at_end.discard(message.partition())
            values.append(message.value().decode())
        return values
    finally:
        consumer.close()


def stable_ends(cluster: KafkaCluster, isolation: str, topic: str = TOPIC) -> list[int]:
    """ListOffsets(latest) per partition as a consumer of `isolation` asks it: the LSO for read_committed."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused",
                         "isolation.level": isolation})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)]
    finally:
        consumer.close()


def leader_of(cluster: KafkaCluster, topic: str, partition: int) -> int:
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=10)
    return int(metadata.topics[topic].partitions[partition].leader)


def values(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


class ClientLog(logging.Handler):
    """What librdkafka logs (its `logger`): the debug lines of the facilities named in `debug`."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.logger = logging.getLogger(f"{__name__}.librdkafka.{id(self)}")
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_commit_and_abort_across_partitions(cluster: KafkaCluster) -> None:
    client_log = ClientLog()
    p = producer(cluster, "commit-abort", debug="eos", logger=client_log.logger)
    for prefix, commit in (("first", True), ("aborted", False), ("second", True)):
        p.begin_transaction()
        produce(p, values(prefix, 30))
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    # Each next transaction's AddPartitionsToTxn came while the previous one's markers were being written: the
    # coordinator let it wait for them rather than answer CONCURRENT_TRANSACTIONS (a 20 ms client backoff each).
    concurrent = KafkaError(KafkaError.CONCURRENT_TRANSACTIONS).str()
    assert [line for line in client_log.lines if concurrent in line] == []
    assert any("AddPartitionsToTxn" in line or "ADDPARTS" in line or "partitions added" in line
               for line in client_log.lines), client_log.lines[-20:]
    assert sorted(read_all(cluster, "read_committed")) == sorted(values("first", 30) + values("second", 30))
    assert sorted(read_all(cluster, "read_uncommitted")) == sorted(
        values("first", 30) + values("aborted", 30) + values("second", 30))


def test_an_open_transaction_holds_read_committed_at_the_last_stable_offset(cluster: KafkaCluster,
                                                                           wait_until: WaitUntil) -> None:
    p = producer(cluster, "open")
    p.begin_transaction()
    produce(p, values("committed", 3))
    p.commit_transaction(30)
    # EndTxn is answered once PrepareCommit is durable; the markers follow.
    wait_until(lambda: stable_ends(cluster, "read_committed") == [2, 2, 2], message="the first commit's markers")
    before = [2, 2, 2]
    p.begin_transaction()
    produce(p, values("open", 6))
    # Written and replicated (flushed, acks=all), but not committed: only read_uncommitted readers pass them.
    assert stable_ends(cluster, "read_committed") == before
    assert stable_ends(cluster, "read_uncommitted") == [end + 2 for end in before]
    assert sorted(read_all(cluster, "read_committed", settled=False)) == sorted(values("committed", 3))
    p.commit_transaction(30)
    # The commit marker takes an offset too: the stable end passes the records and the marker.
    wait_until(lambda: stable_ends(cluster, "read_committed") == [end + 3 for end in before],
               message="the LSO past the committed transaction")
    assert sorted(read_all(cluster, "read_committed")) == sorted(values("committed", 3) + values("open", 6))


def test_a_second_producer_fences_the_first_and_aborts_its_transaction(cluster: KafkaCluster) -> None:
    first = producer(cluster, "fenced")
    first.begin_transaction()
    produce(first, values("zombie", 9))
    second = producer(cluster, "fenced")  # its InitProducerId aborts the open transaction and bumps the epoch
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(30)
    error = raised.value.args[0]
    assert error.fatal() and error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                              KafkaError.INVALID_PRODUCER_EPOCH), error
    second.begin_transaction()
    produce(second, values("successor", 6))
    second.commit_transaction(30)
    assert sorted(read_all(cluster, "read_committed")) == sorted(values("successor", 6))
    assert sorted(read_all(cluster, "read_uncommitted")) == sorted(values("zombie", 9) + values("successor", 6))


def test_a_hanging_transaction_is_aborted_by_its_timeout(cluster: KafkaCluster, wait_until: WaitUntil) -> None:
    hanging = producer(cluster, "hanging", **{"transaction.timeout.ms": 3000})
    hanging.begin_transaction()
    produce(hanging, values("hung", 6))
    # Nobody ends it: the coordinator aborts it after transaction.timeout.ms and read_committed readers move on.
    wait_until(lambda: stable_ends(cluster, "read_committed") == [3, 3, 3], timeout=60,
               message="the timed-out transaction's abort markers")
    assert read_all(cluster, "read_committed") == []
    assert sorted(read_all(cluster, "read_uncommitted")) == sorted(values("hung", 6))
    # The producer learns it was fenced when it tries to commit.
    with pytest.raises(KafkaException):
        hanging.commit_transaction(30)


def test_the_coordinator_killed_after_end_txn_answered_leaves_the_transaction_whole(cluster: KafkaCluster,
                                                                                  wait_until: WaitUntil) -> None:
    transactional_id = "coordinator-killed"
    p = producer(cluster, transactional_id)
    p.begin_transaction()
    produce(p, values("whole", 30))
    coordinator = leader_of(cluster, "__transaction_state", partition_for(transactional_id, STATE_PARTITIONS))
    p.commit_transaction(30)  # answered once PrepareCommit is durable: the markers may not have gone yet
    cluster.brokers[coordinator].process.signal(signal.SIGKILL)
    # The new leader of the id's __transaction_state partition loads PrepareCommit (or CompleteCommit) and
    # finishes what the dead one may not have: every reader sees the transaction whole.
    wait_until(lambda: leader_of(cluster, "__transaction_state",
                                 partition_for(transactional_id, STATE_PARTITIONS)) not in (coordinator, -1),
               timeout=60, message="a new transaction coordinator")
    assert sorted(read_all(cluster, "read_committed", timeout=60)) == sorted(values("whole", 30))


def test_a_data_partition_leader_killed_mid_transaction(cluster: KafkaCluster) -> None:
    p = producer(cluster, "leader-killed")
    p.begin_transaction()
    produce(p, values("before", 6))
    victim = leader_of(cluster, TOPIC, 0)
    cluster.brokers[victim].process.signal(signal.SIGKILL)
    produce(p, values("after", 6))  # to the partitions' new leaders
    p.commit_transaction(60)
    assert sorted(read_all(cluster, "read_committed", timeout=60)) == sorted(values("before", 6) + values("after", 6))


def call(address: str, request: Any, response_type: type[Any]) -> Any:
    with WireConnection(address) as conn:
        conn.send(encode_request(request, 1))
        return conn.receive_body(response_type)[1]


def coordinator_address(cluster: KafkaCluster, key: str, key_type: int, wait_until: WaitUntil) -> str:
    """FindCoordinator v1 until it names one (the internal topic is created on the first ask)."""
    found: list[Any] = []

    def ask() -> bool:
        answer = call(cluster.brokers[1].kafka_address, FindCoordinatorRequest(key=key, key_type=i8(key_type)),
                      FindCoordinatorResponse)
        found[:] = [answer]
        return answer.error_code == 0

    wait_until(ask, timeout=60, message=f"a coordinator for {key}")
    return f"{found[0].host}:{found[0].port}"


def test_add_offsets_to_txn_puts_the_groups_offsets_partition_in_the_transaction(cluster: KafkaCluster,
                                                                                 wait_until: WaitUntil) -> None:
    """AddOffsetsToTxn on the wire (kio): the commit marker lands on the group's __consumer_offsets partition too
    (TxnOffsetCommit, which would write the offsets there, is the group coordinator's)."""
    group, transactional_id = "txn-group", "offsets-txn"
    coordinator_address(cluster, group, 0, wait_until)  # __consumer_offsets exists, with leaders
    address = coordinator_address(cluster, transactional_id, 1, wait_until)
    offsets = TopicPartition("__consumer_offsets", offsets_partition_for(group, OFFSETS_PARTITIONS))
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused"})
    try:
        before = consumer.get_watermark_offsets(offsets, timeout=10)[1]
        init = call(address, InitProducerIdRequest(
            transactional_id=TransactionalId(transactional_id),
            transaction_timeout=i32Timedelta.parse(datetime.timedelta(minutes=1))), InitProducerIdResponse)
        assert init.error_code == 0
        added = call(address, AddOffsetsToTxnRequest(
            transactional_id=TransactionalId(transactional_id), producer_id=init.producer_id,
            producer_epoch=init.producer_epoch, group_id=GroupId(group)), AddOffsetsToTxnResponse)
        assert added.error_code == 0
        ended = call(address, EndTxnRequest(
            transactional_id=TransactionalId(transactional_id), producer_id=init.producer_id,
            producer_epoch=init.producer_epoch, committed=True), EndTxnResponse)
        assert ended.error_code == 0
        wait_until(lambda: consumer.get_watermark_offsets(offsets, timeout=10)[1] == before + 1,
                   message="the commit marker on the group's offsets partition")
    finally:
        consumer.close()


def test_kafka_python_commit_and_abort(cluster: KafkaCluster) -> None:
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="kafka-python")
    try:
        p.init_transactions()
        for prefix, commit in (("kp-committed", True), ("kp-aborted", False)):
            p.begin_transaction()
            for i, value in enumerate(values(prefix, 9)):
                p.send(TOPIC, value.encode(), partition=i % PARTITIONS)
            p.flush()
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
    finally:
        p.close()
    assert sorted(read_all(cluster, "read_committed")) == sorted(values("kp-committed", 9))
    assert sorted(read_all(cluster, "read_uncommitted")) == sorted(values("kp-committed", 9) + values("kp-aborted", 9))


def test_aiokafka_commit_and_abort(cluster: KafkaCluster) -> None:
    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="aiokafka")
        await p.start()
        try:
            async with p.transaction():
                for i, value in enumerate(values("aio-committed", 9)):
                    await p.send_and_wait(TOPIC, value.encode(), partition=i % PARTITIONS)
            await p.begin_transaction()
            for i, value in enumerate(values("aio-aborted", 9)):
                await p.send_and_wait(TOPIC, value.encode(), partition=i % PARTITIONS)
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(run())
    assert sorted(read_all(cluster, "read_committed")) == sorted(values("aio-committed", 9))
    assert sorted(read_all(cluster, "read_uncommitted")) == sorted(
        values("aio-committed", 9) + values("aio-aborted", 9))

"""The transaction coordinator with confluent-kafka's transactional producer through failures (issue 25): the
coordinator SIGKILLed right after EndTxn answered, and a data partition's leader SIGKILLed mid-transaction, leave
every read_committed reader with the transaction whole; AddOffsetsToTxn puts the group's __consumer_offsets
partition in the transaction (its marker lands there). The same rules without failures, for each of
confluent-kafka, kafka-python and aiokafka, are test_kafka_transaction_matrix.py's.

Three brokers, __transaction_state with three partitions (replication factor 3, min.isr 2, as by default)."""

from __future__ import annotations

import datetime
import logging
import signal
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
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
from tests.integration import transaction_clients
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
    """Every data record of the topic a confluent-kafka consumer of `isolation` reads, up to the partitions'
    (stable) ends; when `settled`, once no transaction is open."""
    return transaction_clients.read_all("confluent-kafka", cluster.bootstrap, topic, PARTITIONS, isolation,
                                        timeout=timeout, settled=settled)


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


def test_back_to_back_transactions_are_never_told_concurrent_transactions(cluster: KafkaCluster) -> None:
    """Commit, abort, commit back to back (the matrix reads every outcome back with each library)."""
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



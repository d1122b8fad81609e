"""Real clients through a leader failure: confluent-kafka's idempotent producer (acks=all) to an RF=3,
min.insync.replicas=2 topic while its leader is SIGKILLed follows the new leader, and nothing acknowledged
is lost or duplicated.

(confluent-kafka's kafkatest.verifiable_producer is not run: in the 2.16.1 wheel it is Python 2 code,
`dict.iteritems`, and fails before it connects to anything.)"""

from __future__ import annotations

import signal
import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import KafkaCluster, start_kafka_cluster

pytestmark = pytest.mark.integration

RECORDS = 20_000


@pytest.fixture
def cluster(start_brokers: StartBrokers, start_controller: StartController) -> KafkaCluster:
    return start_kafka_cluster(start_brokers, start_controller, overrides={"replica.lag.time.max.ms": "10000"})


def create(cluster: KafkaCluster, name: str) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, 1, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[name].result(timeout=60)
    return admin


def test_idempotent_producer_loses_and_duplicates_nothing_when_the_leader_is_killed(
        cluster: KafkaCluster, wait_until: WaitUntil) -> None:
    admin = create(cluster, "failover")
    leader = admin.list_topics("failover", timeout=10).topics["failover"].partitions[0].leader
    acked: list[int] = []
    failed: list[str] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            failed.append(str(error))
        else:
            acked.append(int(message.value()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 120_000})

    killed = threading.Event()

    def produce_all() -> None:
        for i in range(RECORDS):
            if i == RECORDS // 4:
                # The rest only once the leader is dead: on a quick machine all 20,000 could otherwise be
                # acknowledged before the SIGKILL lands, and nothing would fail over. (flush serves the
                # delivery callbacks the test waits on.)
                producer.flush(60)
                assert killed.wait(60), "the leader was never killed"
            while True:
                try:
                    producer.produce("failover", str(i).encode(), on_delivery=delivered)
                    break
                except BufferError:  # the local queue is full while the partition has no leader
                    producer.poll(0.1)
            producer.poll(0)
        producer.flush(180)

    writer = threading.Thread(target=produce_all)
    writer.start()
    wait_until(lambda: len(acked) >= RECORDS // 4, timeout=60, message="a quarter acknowledged")
    cluster.brokers[leader].process.signal(signal.SIGKILL)
    killed.set()
    writer.join(240)
    assert not writer.is_alive()
    assert failed == [], f"the idempotent producer gave up on records: {failed[:3]}"
    # The broker asked may apply the controller's UpdateMetadata a moment after the new leader acknowledged.
    wait_until(lambda: admin.list_topics("failover", timeout=10).topics["failover"].partitions[0].leader
               not in (leader, -1), timeout=30, message="leadership moved to a surviving replica")

    survivors = ",".join(b.kafka_address for broker_id, b in cluster.brokers.items() if broker_id != leader)
    consumer = Consumer({"bootstrap.servers": survivors, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition("failover", 0, OFFSET_BEGINNING)])
    values: list[int] = []
    deadline = time.monotonic() + 60
    while len(values) < len(acked) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(int(message.value()))
    consumer.close()
    assert sorted(acked) == list(range(RECORDS)), "every record acknowledged, once"
    assert values == list(range(RECORDS)), "each record exactly once, in order"

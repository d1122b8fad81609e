"""A three-broker cluster with both front doors, for the tests that point Kafka clients at it."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from tests.integration.conftest import BrokerProcess, StartBrokers, StartController

# For kafka-python group members: kafka-python 3.0's metadata refresh lets an answer to a request sent before
# subscribe() (one without the topic) clear the pending update, so a loaded machine can leave a member, and the
# group it leads, without the topic's partitions until the next periodic refresh (metadata.max.age.ms, 5 min
# by default). A short age bounds that to seconds; the leader then sees the topic and rejoins.
KAFKA_PYTHON_GROUP_MEMBER = {"metadata_max_age_ms": 5000}


@dataclass
class KafkaCluster:
    brokers: dict[int, BrokerProcess]

    @property
    def bootstrap(self) -> str:
        """The Kafka listeners (kcat, confluent-kafka, kafka-python, aiokafka)."""
        return ",".join(b.kafka_address for b in self.brokers.values())

    @property
    def grpc_bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())


def start_kafka_cluster(start_brokers: StartBrokers, start_controller: StartController,
                        overrides: dict[str, str] | None = None, timeout: float = 60.0,
                        broker_ids: tuple[int, ...] = (1, 2, 3)) -> KafkaCluster:
    """Brokers (three by default) and a controller; returns once a Kafka client's Metadata lists every broker."""
    brokers = start_brokers(broker_ids, {"replica.fetch.wait.max.ms": "100", **(overrides or {})})
    start_controller()
    cluster = KafkaCluster(brokers)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        try:
            listed = admin.list_topics(timeout=10).brokers
        except KafkaException as e:  # no broker in the answer yet: the controller has not sent UpdateMetadata
            listed = {"error": e}
        if sorted(listed) == sorted(brokers):
            return cluster
        if time.monotonic() > deadline:
            raise AssertionError(f"the brokers' metadata never listed every broker: {listed}")
        time.sleep(0.1)  # a condition polled under a deadline: the controller's UpdateMetadata

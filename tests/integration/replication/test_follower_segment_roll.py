"""A follower fetching more than its segment.bytes at once (the leader's segment was written before the topic's
segment.bytes shrank) writes it in runs that roll only between batches, as Kafka's follower rolls only at batch
boundaries, and keeps replicating; the leader refuses a batch larger than segment.bytes. The producer snapshot a
roll writes used to be taken before the batches below it were applied; applying them then failed, and the
fetcher dropped the partition for good.

Real processes: two brokers and the controller, confluent-kafka's idempotent producer (batches with producer
ids), the follower SIGKILLed while the leader's segment grows past the new segment.bytes, then restarted.
"""

from __future__ import annotations

import signal
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.integration.conftest import StartBroker, StartBrokers, StartController, WaitUntil
from tests.integration.kafka_cluster import start_kafka_cluster

pytestmark = pytest.mark.integration

TOPIC = "rolls"
SMALL_SEGMENT_BYTES = 16 * 1024
OVERRIDES = {"replica.fetch.wait.max.ms": "100"}  # as start_kafka_cluster gives them


def isr(admin: AdminClient) -> list[int]:
    return list(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].isrs)


def test_a_follower_fetch_larger_than_its_segment_rolls_between_batches_and_keeps_replicating(
        start_brokers: StartBrokers, start_broker: StartBroker, start_controller: StartController,
        wait_until: WaitUntil) -> None:
    cluster = start_kafka_cluster(start_brokers, start_controller, broker_ids=(1, 2), overrides=OVERRIDES)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    big = NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2]], config={"segment.bytes": str(1 << 20)})
    admin.create_topics([big], operation_timeout=30)[TOPIC].result(timeout=60)
    wait_until(lambda: sorted(isr(admin)) == [1, 2], message="both replicas in sync")

    cluster.brokers[2].process.signal(signal.SIGKILL)
    cluster.brokers[2].process.wait()
    wait_until(lambda: isr(admin) == [1], message="the controller to drop the dead follower from the ISR")
    producer = Producer({"bootstrap.servers": cluster.brokers[1].kafka_address, "enable.idempotence": True,
                         "batch.num.messages": 20, "linger.ms": 0})
    for i in range(2000):
        producer.produce(TOPIC, b"v" * 100, key=b"%d" % i)
        producer.poll(0)
    assert producer.flush(60) == 0
    # The leader's one segment holds ~250 KB; the follower's segments may hold 16 KB from now on.
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("segment.bytes", str(SMALL_SEGMENT_BYTES), incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    wait_until(lambda: f"Processing override for entityPath: topics/{TOPIC}" in cluster.brokers[1].process.log(),
               message="the leader to take the new segment.bytes")

    # Kafka's Log.append on the leader: a batch larger than segment.bytes is RECORD_LIST_TOO_LARGE (its
    # RecordBatchTooLargeException), never split across segments.
    errors: list[KafkaError] = []
    producer.produce(TOPIC, b"x" * (2 * SMALL_SEGMENT_BYTES), on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(60)
    assert [e.code() for e in errors] == [KafkaError.RECORD_LIST_TOO_LARGE]

    follower = start_broker(2, OVERRIDES)
    deadline = time.monotonic() + 60
    while sorted(isr(admin)) != [1, 2]:
        assert f"Partition {TOPIC}-0 marked as failed" not in follower.process.log(), "the fetcher dropped it"
        assert time.monotonic() < deadline, "the follower never caught up"
        time.sleep(0.2)  # a condition polled under a deadline: the follower's fetches
    segments = sorted((follower.log_dir / f"{TOPIC}-0").glob("*.log"))
    assert len(segments) > 10, "the follower rolled its fetched chunk into many segments"
    assert all(path.stat().st_size <= SMALL_SEGMENT_BYTES for path in segments)

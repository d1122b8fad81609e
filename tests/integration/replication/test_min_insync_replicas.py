"""min.insync.replicas larger than a topic's replication factor (issue 18): acks=all can never succeed.

A real ZooKeeper, a broker whose default min.insync.replicas is 2 and the controller. The broker answers an
acks=all produce to a topic with one replica NOT_ENOUGH_REPLICAS at once, and the producer, once its
delivery timeout ends the retries, reports that error rather than a bare timeout. A topic whose own
min.insync.replicas exceeds its replication factor is refused at creation with INVALID_CONFIG, by the admin
client and by `topics --create`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import TYPE_CHECKING

import grpc
import pytest

from client.admin import Admin, NewTopic
from client.producer import Producer
from common.record import ProducerRecord, build_batch
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from conftest import StartBroker, StartController, WaitUntil

pytestmark = pytest.mark.integration


def test_acks_all_below_min_insync_replicas_reports_not_enough_replicas(
        start_broker: StartBroker, start_controller: StartController, wait_until: WaitUntil) -> None:
    broker = start_broker(1, {"min.insync.replicas": "2"})
    start_controller()
    with Admin(bootstrap_servers=broker.address) as admin:
        admin.create_topics([NewTopic("single", num_partitions=1, replication_factor=1)])
    request = pb.ProduceRequest(acks=-1, timeout_ms=10_000)
    request.topics.add(name="single").partitions.add(index=0, records=build_batch([ProducerRecord(b"x")]))
    with grpc.insecure_channel(broker.address) as channel:
        stub = pb_grpc.KafkaClientStub(channel)

        def answer() -> int:
            return int(stub.Produce(request, timeout=30).responses[0].partitions[0].error_code)

        wait_until(lambda: answer() != ErrorCode.LEADER_NOT_AVAILABLE and answer() != ErrorCode.NOT_LEADER_OR_FOLLOWER,
                   message="a leader for single-0")
        started = time.monotonic()
        assert answer() == ErrorCode.NOT_ENOUGH_REPLICAS
        assert time.monotonic() - started < 5  # at once, not after the request's 10 s timeout
    with Producer(bootstrap_servers=broker.address, acks="all", request_timeout_ms=1_000,
                  delivery_timeout_ms=3_000) as producer:
        future = producer.send("single", b"never acknowledged")
        with pytest.raises(KafkaError) as failed:
            future.get(timeout=30)
    assert failed.value.code == ErrorCode.NOT_ENOUGH_REPLICAS, failed.value
    assert "min.isr requirement of 2" in str(failed.value)


def test_a_topic_min_insync_replicas_above_its_replication_factor_is_refused(
        start_broker: StartBroker, start_controller: StartController) -> None:
    broker = start_broker(1)
    start_controller()
    with Admin(bootstrap_servers=broker.address) as admin:
        with pytest.raises(KafkaError) as refused:
            admin.create_topics([NewTopic("strict", 1, 1, topic_configs={"min.insync.replicas": "2"})])
        assert refused.value.code == ErrorCode.INVALID_CONFIG
        assert "larger than the replication factor 1" in refused.value.message
        assert "strict" not in admin.list_topics()
    command = subprocess.run(
        [sys.executable, "-m", "minibroker.cli", "topics", "--bootstrap-server", broker.address, "--create",
         "--topic", "strict", "--partitions", "1", "--replication-factor", "1", "--config", "min.insync.replicas=3"],
        capture_output=True, text=True, timeout=60)
    assert command.returncode != 0
    assert ("Error while executing topic command : Invalid value 3 for configuration min.insync.replicas: it is"
            " larger than the replication factor 1") in command.stdout + command.stderr
    assert "Traceback" not in command.stderr

"""Kafka admin APIs a Kafka client calls on the brokers' Kafka listeners: CreatePartitions, DeleteRecords and
ElectLeaders (confluent-kafka's AdminClient and kafka-python's KafkaAdminClient), DescribeLogDirs (kafka-python's
describe_log_dirs) and ListOffsets' max timestamp (KIP-734)."""

from __future__ import annotations

import datetime
import importlib
import signal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec
from kafka import KafkaAdminClient
from kio.index import load_request_schema, load_response_schema

from broker.api.kafka.api_table import APIS
from broker.api.kafka.protocol import build
from proto.types import TopicPartition
from tests.integration.conftest import StartBroker, StartBrokers, StartController, WaitUntil
from tests.integration.kafka_clients.test_kafka_confluent import wait_for_leaders
from tests.integration.kafka_cluster import start_kafka_cluster
from tests.integration.kafka_wire import WireConnection, encode_request
from zk.client import KafkaZkClient

pytestmark = pytest.mark.integration


def partition_count(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def test_create_partitions_and_delete_records_from_kafka_admin_clients(
        start_brokers: StartBrokers, start_controller: StartController, wait_until: WaitUntil) -> None:
    """KafkaApis.handleCreatePartitionsRequest and handleDeleteRecordsRequest: the partitions are added (by
    count, or on the brokers named), the log start offset moves and the low watermark is answered."""
    cluster = start_kafka_cluster(start_brokers, start_controller, broker_ids=(1, 2))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("grow", 1, 2)], operation_timeout=30)["grow"].result(timeout=60)

    admin.create_partitions([NewPartitions("grow", 3, replica_assignment=[[2, 1], [1, 2]])],
                            operation_timeout=30)["grow"].result(timeout=60)
    wait_until(lambda: partition_count(admin, "grow") == 3, message="three partitions in the metadata")
    assert admin.list_topics("grow", timeout=10).topics["grow"].partitions[1].replicas == [2, 1]
    kp_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        kp_admin.create_partitions({"grow": 4})
        wait_until(lambda: partition_count(admin, "grow") == 4, message="four partitions in the metadata")
    finally:
        kp_admin.close()
    # Fewer partitions than there are is Kafka's INVALID_PARTITIONS.
    shrink = admin.create_partitions([NewPartitions("grow", 2)], operation_timeout=30)["grow"]
    assert shrink.exception(timeout=60).args[0].code() == KafkaError.INVALID_PARTITIONS

    wait_for_leaders(cluster.bootstrap, "grow", 4)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("grow", f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    deleted = admin.delete_records([CkTopicPartition("grow", 0, 6)], operation_timeout=30)
    (result,) = deleted.values()
    assert result.result(timeout=60).low_watermark == 6
    listed = admin.list_topics("grow", timeout=10)
    assert listed.topics["grow"].partitions[0].error is None
    # Beyond the high watermark is Kafka's OFFSET_OUT_OF_RANGE.
    (beyond,) = admin.delete_records([CkTopicPartition("grow", 0, 11)], operation_timeout=30).values()
    assert beyond.exception(timeout=60).args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_elect_leaders_from_a_kafka_admin_client_is_forwarded_to_the_controller(
        start_brokers: StartBrokers, start_broker: StartBroker, start_controller: StartController,
        zk_client: KafkaZkClient, wait_until: WaitUntil) -> None:
    """KafkaApis.handleElectReplicaLeader, which a broker hands its controller: the preferred replica, back in
    the ISR, leads again (NONE); a partition already led as asked is ELECTION_NOT_NEEDED."""
    cluster = start_kafka_cluster(start_brokers, start_controller, broker_ids=(1, 2))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("elect", 1, replica_assignment=[[1, 2]])],
                        operation_timeout=30)["elect"].result(timeout=60)
    tp = TopicPartition("elect", 0)

    def leader_and_isr() -> tuple[int, set[int]]:
        state = zk_client.get_partition_state(tp)
        return (-1, set()) if state is None else (state.leader, set(state.isr))

    wait_until(lambda: leader_and_isr() == (1, {1, 2}), message="broker 1 leading with both in the ISR")
    first = cluster.brokers[1]
    first.process.signal(signal.SIGKILL)
    first.process.wait(30)
    wait_until(lambda: leader_and_isr()[0] == 2, message="broker 2 leading")
    start_broker(1)
    wait_until(lambda: leader_and_isr() == (2, {1, 2}), timeout=60, message="broker 1 back in the ISR")

    admin = AdminClient({"bootstrap.servers": cluster.brokers[2].kafka_address})
    wanted = [CkTopicPartition("elect", 0)]
    # confluent-kafka 2.16's elect_leaders takes no operation_timeout (its argument parsing fails): the default.
    elected = admin.elect_leaders(ElectionType.PREFERRED, wanted).result(timeout=60)
    assert [(p.topic, p.partition, error) for p, error in elected.items()] == [("elect", 0, None)]
    wait_until(lambda: leader_and_isr()[0] == 1, message="the preferred replica leading again")

    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        again = admin.elect_leaders(election, wanted).result(timeout=60)
        assert [error.code() for error in again.values()] == [KafkaError.ELECTION_NOT_NEEDED]
    unknown = admin.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition("elect", 7)]).result(timeout=60)
    assert [error.code() for error in unknown.values()] == [KafkaError.UNKNOWN_TOPIC_OR_PART]


def produce_with_timestamps(start_brokers: StartBrokers, start_controller: StartController) -> tuple[str, AdminClient]:
    """Two brokers, topic `dirs` (two partitions, two replicas), and five records in one batch on partition 0
    whose largest timestamp, 5000, is first at offset 1."""
    cluster = start_kafka_cluster(start_brokers, start_controller, broker_ids=(1, 2))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("dirs", 2, 2)], operation_timeout=30)["dirs"].result(timeout=60)
    wait_for_leaders(cluster.bootstrap, "dirs", 2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 100})
    for timestamp in (1_000, 5_000, 3_000, 5_000, 2_000):
        producer.produce("dirs", b"v", partition=0, timestamp=timestamp)
    assert producer.flush(30) == 0
    return cluster.bootstrap, admin


def test_list_offsets_max_timestamp_from_confluent_kafka(start_brokers: StartBrokers,
                                                         start_controller: StartController) -> None:
    """ListOffsets v7's MAX_TIMESTAMP (KIP-734): the record with the largest timestamp, itself, not the last of its
    batch (Kafka's answer since KAFKA-16310); none in an empty partition."""
    _, admin = produce_with_timestamps(start_brokers, start_controller)
    (found,) = admin.list_offsets({CkTopicPartition("dirs", 0): OffsetSpec.max_timestamp()},
                                  request_timeout=30).values()
    info = found.result(timeout=60)
    assert (info.offset, info.timestamp) == (1, 5_000)
    (empty,) = admin.list_offsets({CkTopicPartition("dirs", 1): OffsetSpec.max_timestamp()},
                                  request_timeout=30).values()
    assert empty.result(timeout=60).offset == -1


def test_describe_log_dirs_from_kafka_python(start_brokers: StartBrokers, start_controller: StartController,
                                             tmp_path: Path, wait_until: WaitUntil) -> None:
    """ReplicaManager.describeLogDirs: each broker's log dir with its replicas' sizes and lags, and (v4) its
    capacity; only the partitions asked for."""
    bootstrap, _ = produce_with_timestamps(start_brokers, start_controller)
    kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        def described() -> dict[int, list[dict[str, Any]]]:
            return {answer["broker"]: answer["log_dirs"] for answer in kp_admin.describe_log_dirs()}

        def replicas(log_dirs: list[dict[str, Any]]) -> dict[int, tuple[int, int]]:
            (log_dir,) = log_dirs
            (topic,) = [t for t in log_dir["topics"] if t["name"] == "dirs"]
            return {p["partition_index"]: (p["partition_size"], p["offset_lag"]) for p in topic["partitions"]}

        # Both replicas of partition 0 hold the five records once the follower has fetched them.
        wait_until(lambda: all(replicas(dirs)[0][0] > 0 for dirs in described().values()),
                   message="both replicas of dirs-0 written")
        for broker_id, log_dirs in described().items():
            (log_dir,) = log_dirs
            assert log_dir["log_dir"] == str((tmp_path / f"broker-{broker_id}-logs").resolve())
            assert log_dir["error_code"] == 0 and log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
            sizes = replicas(log_dirs)
            assert sorted(sizes) == [0, 1] and sizes[1] == (0, 0) and sizes[0][1] == 0
        only = kp_admin.describe_log_dirs({"dirs": [1]}, brokers=[1])
        assert [sorted(p["partition_index"] for t in d["topics"] if t["name"] == "dirs" for p in t["partitions"])
                for d in only[0]["log_dirs"]] == [[1]]
    finally:
        kp_admin.close()


def request_of(api_key: int, version: int) -> Any:
    """A request of exactly this version about partition walk-0 (each field the version lacks left out)."""
    module = importlib.import_module(load_request_schema(api_key, version).__module__)
    timeout = datetime.timedelta(seconds=30)
    if api_key == 37:  # CreatePartitions: to the count it has, Kafka's INVALID_PARTITIONS
        return build(module.CreatePartitionsRequest, topics=(
            module.CreatePartitionsTopic(name="walk", count=1, assignments=None),), timeout=timeout,
            validate_only=True)
    if api_key == 21:  # DeleteRecords: before offset 0, nothing to delete
        return build(module.DeleteRecordsRequest, timeout=timeout, topics=(module.DeleteRecordsTopic(
            name="walk", partitions=(module.DeleteRecordsPartition(partition_index=0, offset=0),)),))
    if api_key == 43:  # ElectLeaders: the preferred replica already leads
        return build(module.ElectLeadersRequest, election_type=0, timeout=timeout,
                     topic_partitions=(module.TopicPartitions(topic="walk", partitions=(0,)),))
    if api_key == 35:  # DescribeLogDirs: every replica
        return build(module.DescribeLogDirsRequest, topics=None)
    assert api_key == 2  # ListOffsets: the latest offset, and from v7 the max timestamp
    return build(module.ListOffsetsRequest, replica_id=-1, isolation_level=0, topics=(module.ListOffsetsTopic(
        name="walk", partitions=(build(module.ListOffsetsPartition, partition_index=0, current_leader_epoch=-1,
                                       timestamp=-3 if version >= 7 else -1),)),))


def answer_errors(api_key: int, body: Any) -> list[int]:
    """Every error code in the answer, top level first."""
    if api_key == 37:
        return [r.error_code for r in body.results]
    if api_key == 21:
        return [p.error_code for t in body.topics for p in t.partitions]
    if api_key == 43:
        return [getattr(body, "error_code", 0),
                *(p.error_code for r in body.replica_election_results for p in r.partition_result)]
    if api_key == 35:
        return [getattr(body, "error_code", 0), *(d.error_code for d in body.results)]
    return [p.error_code for t in body.topics for p in t.partitions]


EXPECTED_ERRORS = {37: [KafkaError.INVALID_PARTITIONS], 21: [0], 43: [0, KafkaError.ELECTION_NOT_NEEDED],
                   35: [0, 0], 2: [0]}


def test_every_advertised_version_of_these_apis_answers_a_request_of_that_version(
        start_brokers: StartBrokers, start_controller: StartController) -> None:
    """A request of each version the broker advertises for CreatePartitions, DeleteRecords, ElectLeaders,
    DescribeLogDirs and ListOffsets gets that version's answer, with Kafka's codes."""
    cluster = start_kafka_cluster(start_brokers, start_controller, broker_ids=(1,))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("walk", 1, 1)], operation_timeout=30)["walk"].result(timeout=60)
    wait_for_leaders(cluster.bootstrap, "walk", 1)
    walked = []
    with WireConnection(cluster.brokers[1].kafka_address) as conn:
        for api_key in EXPECTED_ERRORS:
            spec = APIS[api_key]
            for version in range(spec.min_version, spec.max_version + 1):
                conn.send(encode_request(request_of(api_key, version), correlation_id=version))
                correlation_id, body = conn.receive_body(load_response_schema(api_key, version))
                assert (correlation_id, answer_errors(api_key, body)) == (version, EXPECTED_ERRORS[api_key]), \
                    (spec.name, version)
                walked.append((spec.name, version))
    assert len(walked) == 4 + 3 + 3 + 4 + 7

"""The ZooKeeper layout byte for byte: what a Kafka 2.x cluster would show in zkCli.sh."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from proto.errors import ErrorCode, KafkaError
from proto.types import EndPoint, TopicPartition
from zk import paths
from zk.paths import (
    BrokerInfo,
    LeaderIsrAndControllerEpoch,
    ProducerIdBlock,
    ReplicaAssignment,
    TopicAssignment,
)

TP = TopicPartition("orders", 3)


def test_paths() -> None:
    assert paths.broker_id_path(1) == "/brokers/ids/1"
    assert paths.topic_path("orders") == "/brokers/topics/orders"
    assert paths.topic_partitions_path("orders") == "/brokers/topics/orders/partitions"
    assert paths.topic_partition_path(TP) == "/brokers/topics/orders/partitions/3"
    assert paths.partition_state_path(TP) == "/brokers/topics/orders/partitions/3/state"
    assert paths.topic_config_path("orders") == "/config/topics/orders"
    assert paths.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert paths.isr_change_path() == "/isr_change_notification/isr_change_"
    assert paths.isr_change_path("0000000007") == "/isr_change_notification/isr_change_0000000007"
    assert paths.config_change_path() == "/config/changes/config_change_"
    assert paths.sequence_number("isr_change_0000000007", paths.ISR_CHANGE_PREFIX) == "0000000007"
    assert paths.CONTROLLER == "/controller"
    assert paths.CONTROLLER_EPOCH == "/controller_epoch"
    assert paths.PREFERRED_REPLICA_ELECTION == "/admin/preferred_replica_election"
    assert paths.REASSIGN_PARTITIONS == "/admin/reassign_partitions"
    assert paths.PRODUCER_ID_BLOCK == "/latest_producer_id_block"
    assert paths.CLUSTER_ID == "/cluster/id"


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "a b", "x" * 250, "tôpic"])
def test_illegal_topic_names_cannot_reach_the_layout(topic: str) -> None:
    with pytest.raises(KafkaError) as err:
        paths.topic_path(topic)
    assert err.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_legal_topic_names() -> None:
    for topic in ["a", "orders.v2", "__consumer_offsets", "my-topic_1", "x" * 249]:
        paths.validate_topic(topic)


def test_sequence_number_rejects_foreign_nodes() -> None:
    with pytest.raises(ValueError, match="isr_change_"):
        paths.sequence_number("config_change_0000000001", paths.ISR_CHANGE_PREFIX)


def test_broker_registration_json() -> None:
    info = BrokerInfo(id=1, endpoints=(EndPoint("PLAINTEXT", "10.0.0.5", 9092),), timestamp_ms=1580000000000)
    data = paths.encode_broker_info(info)
    assert data == (
        b'{"version":4,"host":"10.0.0.5","port":9092,"endpoints":["PLAINTEXT://10.0.0.5:9092"],'
        b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"jmx_port":-1,"timestamp":"1580000000000"}'
    )
    assert paths.decode_broker_info(1, data, czxid=42) == dataclasses.replace(info, epoch=42)


def test_broker_registration_with_two_listeners() -> None:
    # As Kafka writes it: host/port are the first PLAINTEXT-protocol endpoint's, whatever its name.
    endpoints = (EndPoint("INTERNAL", "broker-3", 29092), EndPoint("EXTERNAL", "localhost", 9094))
    info = BrokerInfo(id=3, endpoints=endpoints)
    data = paths.encode_broker_info(info)
    assert data.startswith(
        b'{"version":4,"host":"broker-3","port":29092,"endpoints":["INTERNAL://broker-3:29092",'
        b'"EXTERNAL://localhost:9094"],"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT",'
        b'"EXTERNAL":"PLAINTEXT"},'
    )
    decoded = paths.decode_broker_info(3, data)
    assert decoded == info
    assert decoded.endpoint("EXTERNAL") == EndPoint("EXTERNAL", "localhost", 9094)
    assert decoded.endpoint("PLAINTEXT") is None
    assert decoded.connection_strings == "INTERNAL://broker-3:29092,EXTERNAL://localhost:9094"


def test_broker_registration_with_rack_and_ipv6() -> None:
    info = BrokerInfo(id=2, endpoints=(EndPoint("PLAINTEXT", "::1", 9093),), rack="rack-a", timestamp_ms=5)
    data = paths.encode_broker_info(info)
    assert b'"endpoints":["PLAINTEXT://[::1]:9093"]' in data
    assert data.endswith(b',"rack":"rack-a"}')
    assert paths.decode_broker_info(2, data) == info


def test_decodes_a_real_kafka_registration() -> None:
    # As a Kafka 2.7 broker with two listeners writes it (key order is Jackson's).
    data = (
        b'{"features":{},"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT","EXTERNAL":"SSL"},'
        b'"endpoints":["EXTERNAL://ext.example:9093","INTERNAL://kafka-0:9092"],"jmx_port":9999,'
        b'"host":null,"timestamp":"1612345678901","port":-1,"version":5,"rack":null}'
    )
    info = paths.decode_broker_info(0, data)
    assert info.endpoints == (EndPoint("EXTERNAL", "ext.example", 9093, "SSL"), EndPoint("INTERNAL", "kafka-0", 9092))
    assert (info.rack, info.jmx_port, info.timestamp_ms) == (None, 9999, 1612345678901)


def test_a_registration_with_an_unknown_security_protocol_is_malformed() -> None:
    data = (b'{"version":4,"host":null,"port":-1,"endpoints":["X://h:1"],"listener_security_protocol_map":'
            b'{"X":"QUIC"},"jmx_port":-1,"timestamp":"1"}')
    with pytest.raises(ValueError, match=r"malformed znode /brokers/ids/5: .*no known security protocol \('QUIC'\)"):
        paths.decode_broker_info(5, data)


def test_topic_assignment_json() -> None:
    assignment = TopicAssignment.of("orders", {1: [2, 3, 1], 0: [1, 2, 3]})
    data = paths.encode_topic_assignment(assignment)
    assert data == b'{"version":2,"partitions":{"0":[1,2,3],"1":[2,3,1]},"adding_replicas":{},"removing_replicas":{}}'
    assert paths.decode_topic_assignment("orders", data) == assignment
    assert assignment.replicas(1) == (2, 3, 1)
    assert assignment.topic_partitions() == [TopicPartition("orders", 0), TopicPartition("orders", 1)]


def test_topic_assignment_during_reassignment() -> None:
    assignment = TopicAssignment("t", {0: ReplicaAssignment((1, 2, 4), adding_replicas=(4,), removing_replicas=(3,))})
    data = paths.encode_topic_assignment(assignment)
    assert data == (
        b'{"version":2,"partitions":{"0":[1,2,4]},"adding_replicas":{"0":[4]},"removing_replicas":{"0":[3]}}'
    )
    assert paths.decode_topic_assignment("t", data) == assignment


def test_decodes_a_version_1_topic_assignment() -> None:
    assignment = paths.decode_topic_assignment("t", b'{"version":1,"partitions":{"0":[1,2],"1":[2,1]}}')
    assert assignment == TopicAssignment.of("t", {0: [1, 2], 1: [2, 1]})


def test_partition_state_json() -> None:
    state = LeaderIsrAndControllerEpoch(leader=1, leader_epoch=0, isr=(1, 2, 3), controller_epoch=1)
    data = paths.encode_partition_state(state)
    assert data == b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'
    decoded = paths.decode_partition_state(TP, data, zk_version=7)
    assert decoded.zk_version == 7
    assert decoded.same_content(state)
    assert decoded != state  # the versions differ


def test_controller_json() -> None:
    data = paths.encode_controller(1, 1580000000000)
    assert data == b'{"version":1,"brokerid":1,"timestamp":"1580000000000"}'
    assert paths.decode_controller(data) == 1
    assert paths.encode_controller_epoch(12) == b"12"
    assert paths.decode_controller_epoch(b"12") == 12


def test_isr_change_notification_json() -> None:
    partitions = {TopicPartition("b", 0), TopicPartition("a", 1)}
    data = paths.encode_isr_change_notification(partitions)
    assert data == b'{"version":1,"partitions":[{"topic":"a","partition":1},{"topic":"b","partition":0}]}'
    assert paths.decode_isr_change_notification("0000000001", data) == partitions


def test_log_dir_event_notification_json() -> None:
    """Kafka's LogDirEventNotificationSequenceZNode, under /log_dir_event_notification/log_dir_event_<seq>."""
    data = paths.encode_log_dir_event(3)
    assert data == b'{"version":1,"broker":3,"event":1}'
    assert paths.decode_log_dir_event("0000000004", data) == 3
    assert paths.log_dir_event_path("0000000004") == "/log_dir_event_notification/log_dir_event_0000000004"
    assert paths.LOG_DIR_EVENT_NOTIFICATION in paths.PERSISTENT_ZK_PATHS


def test_preferred_replica_election_json() -> None:
    data = paths.encode_preferred_replica_election([TP])
    assert data == b'{"version":1,"partitions":[{"topic":"orders","partition":3}]}'
    assert paths.decode_preferred_replica_election(data) == {TP}


def test_reassign_partitions_json() -> None:
    data = paths.encode_partition_reassignment({TP: [3, 1, 2]})
    assert data == b'{"version":1,"partitions":[{"topic":"orders","partition":3,"replicas":[3,1,2]}]}'
    assert paths.decode_partition_reassignment(data) == {TP: (3, 1, 2)}


def test_topic_config_json() -> None:
    data = paths.encode_topic_config({"retention.ms": "1000", "min.insync.replicas": "2"})
    assert data == b'{"version":1,"config":{"min.insync.replicas":"2","retention.ms":"1000"}}'
    assert paths.decode_topic_config("orders", data) == {"retention.ms": "1000", "min.insync.replicas": "2"}


def test_config_change_json() -> None:
    data = paths.encode_config_change("topics/orders")
    assert data == b'{"version":2,"entity_path":"topics/orders"}'
    assert paths.decode_config_change("0000000000", data) == "topics/orders"


def test_producer_id_block_json() -> None:
    first = ProducerIdBlock.first(broker_id=1)
    assert (first.block_start, first.block_end) == (0, 999)
    data = paths.encode_producer_id_block(first.next_block(broker_id=2))
    assert data == b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    assert paths.decode_producer_id_block(data) == ProducerIdBlock(2, 1000, 1999)


def test_cluster_id_json() -> None:
    data = paths.encode_cluster_id("x7Q1dVbBRsmh6vS0pSvBXw")
    assert data == b'{"version":"1","id":"x7Q1dVbBRsmh6vS0pSvBXw"}'
    assert paths.decode_cluster_id(data) == "x7Q1dVbBRsmh6vS0pSvBXw"


def _state(data: bytes) -> object:
    return paths.decode_partition_state(TP, data, 0)


STATE = "/brokers/topics/orders/partitions/3/state"


@pytest.mark.parametrize(
    ("decode", "data", "path"),
    [
        (_state, b"{not json", STATE),
        (_state, b'{"leader":1}', STATE),
        (_state, b"[]", STATE),
        (_state, b'{"controller_epoch":1,"leader":true,"leader_epoch":0,"isr":[1]}', STATE),
        (lambda d: paths.decode_broker_info(7, d), b'{"version":4,"endpoints":["bad"]}', "/brokers/ids/7"),
        (lambda d: paths.decode_broker_info(7, d), b"\xff\xfe", "/brokers/ids/7"),
        (paths.decode_controller, b'{"version":1}', "/controller"),
        (paths.decode_controller_epoch, b"one", "/controller_epoch"),
        (lambda d: paths.decode_topic_assignment("t", d), b'{"partitions":{"0":"1,2"}}', "/brokers/topics/t"),
        (paths.decode_producer_id_block, b'{"broker":1,"block_start":0,"block_end":999}', "/latest_producer_id_block"),
        (paths.decode_partition_reassignment, b'{"partitions":[{"topic":"t"}]}', "/admin/reassign_partitions"),
    ],
)
def test_malformed_znodes_name_their_path(decode: Callable[[bytes], object], data: bytes, path: str) -> None:
    with pytest.raises(ValueError, match=f"malformed znode {path}:"):
        decode(data)


# --- ACLs (Kafka's ZkAclStore / ZkAclChangeStore) ---


def test_acl_paths_are_kafkas() -> None:
    assert paths.acl_resource_path("LITERAL", "Topic", "orders") == "/kafka-acl/Topic/orders"
    assert paths.acl_resource_path("PREFIXED", "Group", "billing-") == "/kafka-acl-extended/prefixed/Group/billing-"
    assert paths.acl_change_path("LITERAL") == "/kafka-acl-changes/acl_changes_"
    assert paths.acl_change_path("PREFIXED", "0000000003") == "/kafka-acl-extended-changes/acl_changes_0000000003"
    with pytest.raises(ValueError, match="cannot name a znode"):
        paths.acl_resource_path("LITERAL", "Topic", "../x")


def test_acls_json_is_kafkas_byte_for_byte() -> None:
    entries = [paths.AclJsonEntry("User:alice", "Allow", "Read", "*")]
    data = paths.encode_acls(entries)
    assert data == (b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",'
                    b'"host":"*"}]}')
    assert paths.decode_acls("/kafka-acl/Topic/t", data) == entries
    with pytest.raises(ValueError, match="malformed znode /kafka-acl/Topic/t"):
        paths.decode_acls("/kafka-acl/Topic/t", b'{"version":1}')


def test_acl_change_notifications_are_kafkas() -> None:
    assert paths.encode_acl_change("LITERAL", "TOPIC", "orders") == b"TOPIC:orders"
    assert paths.decode_acl_change("LITERAL", "/x", b"Topic:a:b") == ("LITERAL", "Topic", "a:b")
    extended = paths.encode_acl_change("PREFIXED", "GROUP", "g-")
    assert extended == b'{"version":1,"resourceType":"GROUP","name":"g-","patternType":"PREFIXED"}'
    assert paths.decode_acl_change("PREFIXED", "/x", extended) == ("PREFIXED", "GROUP", "g-")
    with pytest.raises(ValueError, match="unsupported version"):
        paths.decode_acl_change("PREFIXED", "/x", extended.replace(b'"version":1', b'"version":2'))

"""MetadataCache: what UpdateMetadata says, as Metadata answers it."""

from __future__ import annotations

from broker.config.metadata_cache import EndPoint, LiveBroker, MetadataCache, Node
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.unit.broker.broker_helpers import live_broker, metadata_state
from zk.paths import LEADER_DURING_DELETE

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_empty_cache_knows_nothing() -> None:
    cache = MetadataCache(1)
    assert cache.controller_id is None
    assert not cache.contains(A0) and cache.get_topic_metadata(["a"], "PLAINTEXT") == []
    assert cache.get_alive_brokers("PLAINTEXT") == []


def test_partition_states_merge_and_brokers_are_replaced() -> None:
    cache = MetadataCache(1)
    cache.update_metadata(7, [(A0, metadata_state(1)), (A1, metadata_state(2, isr=(2, 1)))],
                          [live_broker(1), live_broker(2)])
    cache.update_metadata(7, [(B0, metadata_state(1))], [live_broker(1)])
    assert cache.controller_id == 7
    assert cache.contains(A0) and cache.contains(A1) and cache.contains(B0)
    assert not cache.contains(TopicPartition("a", 2))
    assert cache.get_all_topics() == {"a", "b"}
    assert cache.get_alive_brokers("PLAINTEXT") == [Node(1, "127.0.0.1", 9001)]


def test_partition_without_a_live_leader_is_leader_not_available() -> None:
    cache = MetadataCache(1)
    cache.update_metadata(0, [(A0, metadata_state(1)), (A1, metadata_state(2, isr=(2, 1)))], [live_broker(1)])
    [topic] = cache.get_topic_metadata(["a", "unknown"], "PLAINTEXT")
    assert topic.error is ErrorCode.NONE
    p0, p1 = topic.partitions
    assert (p0.error, p0.leader) == (ErrorCode.NONE, 1)
    assert (p1.error, p1.leader, p1.replicas, p1.isr) == (ErrorCode.LEADER_NOT_AVAILABLE, -1, (2, 1), (2, 1))


def test_brokers_are_described_as_reached_on_the_asking_listener() -> None:
    cache = MetadataCache(1)
    two_listeners = LiveBroker(1, {"INTERNAL": EndPoint("broker-1", 29092), "EXTERNAL": EndPoint("localhost", 9092)})
    cache.update_metadata(0, [(A0, metadata_state(1))], [two_listeners, LiveBroker(2, {"INTERNAL": EndPoint("b2", 1)})])
    assert cache.get_alive_brokers("EXTERNAL") == [Node(1, "localhost", 9092)]
    assert cache.get_alive_brokers("INTERNAL") == [Node(1, "broker-1", 29092), Node(2, "b2", 1)]
    assert cache.get_topic_metadata(["a"], "EXTERNAL")[0].partitions[0].leader == 1


def test_a_live_leader_without_the_asking_listener_is_listener_not_found() -> None:
    cache = MetadataCache(1)
    other_listener = LiveBroker(1, {"INTERNAL": EndPoint("10.0.0.1", 9000)})
    cache.update_metadata(0, [(A0, metadata_state(1))], [other_listener])
    [partition] = cache.get_topic_metadata(["a"], "PLAINTEXT")[0].partitions
    assert (partition.error, partition.leader) == (ErrorCode.LISTENER_NOT_FOUND, -1)
    assert cache.get_alive_brokers("PLAINTEXT") == []


def test_leader_during_delete_removes_partitions() -> None:
    cache = MetadataCache(1)
    cache.update_metadata(0, [(A0, metadata_state(1)), (A1, metadata_state(1))], [live_broker(1)])
    deleting = metadata_state(LEADER_DURING_DELETE)
    assert cache.update_metadata(0, [(A0, deleting)], [live_broker(1)]) == [A0]
    assert cache.contains_topic("a") and not cache.contains(A0)
    assert cache.update_metadata(0, [(A1, deleting), (B0, deleting)], [live_broker(1)]) == [A1]
    assert not cache.contains_topic("a")


def test_no_controller() -> None:
    cache = MetadataCache(1)
    cache.update_metadata(-1, [], [])
    assert cache.controller_id is None

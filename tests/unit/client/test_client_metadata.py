"""ClusterMetadata from a Metadata response; when Metadata refreshes; which brokers it asks, in which order."""

from __future__ import annotations

from client_helpers import FakePool, cluster

from client.metadata import ClusterMetadata, Metadata
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from tests.fakes import FakeMonotonic


def response() -> pb.MetadataResponse:
    r = pb.MetadataResponse(cluster_id="c1", controller_id=2)
    r.brokers.add(node_id=1, host="h1", port=9092)
    r.brokers.add(node_id=2, host="h2", port=9092, rack="r2")
    t = r.topics.add(name="orders")
    t.partitions.add(partition_index=0, leader_id=1, leader_epoch=5, replica_nodes=[1, 2], isr_nodes=[1, 2])
    t.partitions.add(partition_index=1, leader_id=-1, leader_epoch=3, replica_nodes=[2, 3], isr_nodes=[],
                     offline_replicas=[2, 3], error_code=ErrorCode.LEADER_NOT_AVAILABLE)
    t.partitions.add(partition_index=2, leader_id=3, leader_epoch=1, replica_nodes=[3], isr_nodes=[3])  # 3 is gone
    r.topics.add(name="missing", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return r


def test_cluster_metadata_from_response() -> None:
    c = ClusterMetadata.from_response(response())
    assert (c.cluster_id, c.controller_id, sorted(c.brokers)) == ("c1", 2, [1, 2])
    assert c.brokers[2].rack == "r2" and c.brokers[1].rack is None and c.brokers[1].address == "h1:9092"
    assert c.topics == {"orders"}
    assert c.topic_partitions("orders") == tuple(TopicPartition("orders", p) for p in range(3))
    assert c.partitions_for_topic("orders") == {0, 1, 2}
    assert c.available_partitions("orders") == (0,)  # 1 has no leader, 3 is not a live broker
    leader = c.leader_for(TopicPartition("orders", 0))
    assert leader is not None and leader.node_id == 1
    assert c.leader_for(TopicPartition("orders", 1)) is None
    assert c.leader_epoch(TopicPartition("orders", 0)) == 5
    partition = c.partition(TopicPartition("orders", 1))
    assert partition is not None and partition.offline_replicas == (2, 3)
    assert c.topic_errors == {"missing": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert c.topic_partitions("missing") is None


def make_metadata(clock: FakeMonotonic) -> tuple[Metadata, FakePool]:
    pool = FakePool()
    metadata = Metadata(["b1:9092", "b2:9092"], pool, retry_backoff_ms=100, metadata_max_age_ms=10_000,  # type: ignore[arg-type]
                        clock=clock)
    return metadata, pool


def test_refresh_is_due_when_requested_after_backoff_and_at_max_age() -> None:
    clock = FakeMonotonic()
    metadata, pool = make_metadata(clock)
    assert metadata.time_to_next_update(clock.now_ms) == 0  # nothing known yet
    pool.get("b1:9092").answers["Metadata"] = [response()]  # later calls: every broker is down
    metadata.refresh()
    assert metadata.time_to_next_update(clock.now_ms) == 10_000  # metadata_max_age_ms
    metadata.request_update()
    assert metadata.time_to_next_update(clock.now_ms) == 100  # but not more often than retry_backoff_ms
    clock.advance(100)
    assert metadata.time_to_next_update(clock.now_ms) == 0
    assert not metadata.maybe_refresh()  # every broker down: swallowed, and backed off again
    assert metadata.time_to_next_update(clock.now_ms) == 100


def test_known_brokers_are_asked_before_bootstrap_and_failed_ones_last() -> None:
    clock = FakeMonotonic()
    metadata, pool = make_metadata(clock)
    assert metadata.candidate_addresses() == ["b1:9092", "b2:9092"]
    pool.get("b1:9092").answers["Metadata"] = [response()]
    metadata.refresh()
    assert metadata.candidate_addresses() == ["h1:9092", "h2:9092", "b1:9092", "b2:9092"]
    pool.in_backoff = lambda address: address == "h1:9092"  # type: ignore[method-assign]
    assert metadata.candidate_addresses()[-1] == "h1:9092"


def test_call_any_moves_on_after_transport_errors_only() -> None:
    clock = FakeMonotonic()
    metadata, pool = make_metadata(clock)
    pool.get("b1:9092").answers["Metadata"] = [KafkaError("down", ErrorCode.NETWORK_EXCEPTION)]
    pool.get("b2:9092").answers["Metadata"] = [response()]
    assert metadata.refresh().controller_id == 2
    pool.get("h1:9092").answers["OffsetFetch"] = [KafkaError("broken", ErrorCode.UNKNOWN_SERVER_ERROR)]
    pool.get("h2:9092").answers["OffsetFetch"] = [pb.OffsetFetchResponse()]
    try:
        metadata.call_any(lambda stub: stub.OffsetFetch, pb.OffsetFetchRequest())
    except KafkaError as exc:
        assert exc.code == ErrorCode.UNKNOWN_SERVER_ERROR  # an answer, not a transport failure...
    else:
        raise AssertionError("expected UNKNOWN_SERVER_ERROR")
    assert pool.get("h2:9092").answers["OffsetFetch"]  # ...so the second broker was not asked


def test_wait_for_topic_raises_unfixable_topic_errors_at_once() -> None:
    clock = FakeMonotonic()
    metadata, pool = make_metadata(clock)
    bad = pb.MetadataResponse()
    bad.topics.add(name="bad name", error_code=ErrorCode.INVALID_TOPIC_EXCEPTION)
    pool.get("b1:9092").answers["Metadata"] = [bad]
    try:
        metadata.wait_for_topic("bad name", 60_000)
    except KafkaError as exc:
        assert exc.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    else:
        raise AssertionError("expected INVALID_TOPIC_EXCEPTION")


def test_helper_cluster_is_consistent() -> None:
    c = cluster({"t": 3})
    assert [c.leader_for(tp).node_id for tp in c.topic_partitions("t") or ()] == [1, 2, 3]  # type: ignore[union-attr]

"""ControllerBrokerRequestBatch: one LeaderAndIsr per broker per batch, UpdateMetadata to live brokers, epochs."""

from __future__ import annotations

from controller_helpers import CONTROLLER_ID, Sent, batch_for, broker, context_with, state

from proto.types import EndPoint, TopicPartition
from zk.paths import BrokerInfo, ReplicaAssignment

P0 = TopicPartition("orders", 0)
P1 = TopicPartition("orders", 1)
Q0 = TopicPartition("audit", 0)


def test_one_leader_and_isr_per_broker_with_all_its_partitions() -> None:
    states = {P0: state(1, [1, 2], controller_epoch=2, zk_version=4), P1: state(2, [2, 1]), Q0: state(2, [2])}
    context = context_with([broker(1), broker(2)], {P0: [1, 2], P1: [2, 1], Q0: [2]}, states, epoch=7)
    sent = Sent()
    batch = batch_for(context, sent)
    for tp, s in states.items():
        batch.add_leader_and_isr_request_for_brokers(s.isr, tp, s, context.partition_full_replica_assignment(tp), False)
    batch.send_requests_to_brokers()

    requests = sent.leader_and_isr()
    assert sorted(requests) == [1, 2]
    to_1, to_2 = requests[1], requests[2]
    assert (to_1.controller_id, to_1.controller_epoch, to_1.broker_epoch) == (CONTROLLER_ID, 7, 101)
    assert to_2.broker_epoch == 102
    assert [(s.topic_name, s.partition_index) for s in to_1.partition_states] == [("orders", 0), ("orders", 1)]
    assert [(s.topic_name, s.partition_index) for s in to_2.partition_states] == [
        ("audit", 0),
        ("orders", 0),
        ("orders", 1),
    ]
    p0 = to_1.partition_states[0]
    # The partition state carries the epoch of the controller that wrote it, the request the sender's.
    assert (p0.controller_epoch, p0.leader, p0.leader_epoch, list(p0.isr), p0.zk_version, list(p0.replicas)) == (
        2,
        1,
        0,
        [1, 2],
        4,
        [1, 2],
    )
    assert [(leader.broker_id, leader.host_name, leader.port) for leader in to_1.live_leaders] == [
        (1, "127.0.0.1", 9091),
        (2, "127.0.0.1", 9092),
    ]


def test_leader_and_isr_goes_first_and_update_metadata_reaches_every_live_broker() -> None:
    s = state(1, [1])
    context = context_with([broker(1), broker(2), broker(3)], {P0: [1]}, {P0: s})
    sent = Sent()
    batch = batch_for(context, sent)
    batch.add_leader_and_isr_request_for_brokers([1], P0, s, ReplicaAssignment((1,)), is_new=True)
    batch.send_requests_to_brokers()
    assert [(b, type(r).__name__) for b, r in sent.requests] == [
        (1, "LeaderAndIsrRequest"),
        (1, "UpdateMetadataRequest"),
        (2, "UpdateMetadataRequest"),
        (3, "UpdateMetadataRequest"),
    ]
    assert batch.is_empty


def test_a_replica_new_earlier_in_the_batch_stays_new() -> None:
    context = context_with([broker(1)], {P0: [1]})
    sent = Sent()
    batch = batch_for(context, sent)
    batch.add_leader_and_isr_request_for_brokers([1], P0, state(1, [1]), ReplicaAssignment((1,)), is_new=True)
    batch.add_leader_and_isr_request_for_brokers([1], P0, state(1, [1], 1), ReplicaAssignment((1,)), is_new=False)
    batch.send_requests_to_brokers()
    (only,) = sent.leader_and_isr()[1].partition_states
    assert (only.leader_epoch, only.is_new) == (1, True)


def test_update_metadata_content() -> None:
    racked = BrokerInfo(id=2, endpoints=(EndPoint("PLAINTEXT", "::1", 9092),), rack="r2", epoch=55)
    context = context_with(
        [broker(1), racked], {P0: [1, 2, 3], P1: [3, 1]}, {P0: state(1, [1, 2], leader_epoch=3, zk_version=6)}, epoch=4
    )
    sent = Sent()
    batch = batch_for(context, sent)
    batch.add_update_metadata_request_for_brokers([1, 2], [P0, P1])  # P1 has no leader yet: skipped
    batch.send_requests_to_brokers()
    (b1, to_1), (b2, to_2) = sent.update_metadata()
    assert (b1, to_1.controller_id, to_1.controller_epoch, to_1.broker_epoch) == (1, CONTROLLER_ID, 4, 101)
    assert (b2, to_2.broker_epoch) == (2, 55)
    (p0,) = to_1.partition_states
    assert (p0.topic_name, p0.partition_index, p0.leader, p0.leader_epoch, list(p0.isr), p0.zk_version) == (
        "orders",
        0,
        1,
        3,
        [1, 2],
        6,
    )
    assert (list(p0.replicas), list(p0.offline_replicas)) == ([1, 2, 3], [3])
    brokers = {b.id: b for b in to_1.live_brokers}
    assert sorted(brokers) == [1, 2]
    assert not brokers[1].HasField("rack")
    assert brokers[2].rack == "r2"
    assert [(e.host, e.port, e.listener, e.security_protocol) for e in brokers[2].endpoints] == [
        ("::1", 9092, "PLAINTEXT", 0)
    ]


def test_followers_are_sent_the_inter_broker_endpoint_and_update_metadata_every_endpoint() -> None:
    two_listeners = BrokerInfo(
        id=1, endpoints=(EndPoint("INTERNAL", "broker-1", 29092), EndPoint("EXTERNAL", "localhost", 9092)), epoch=9
    )
    s = state(1, [1, 2])
    context = context_with([two_listeners, broker(2)], {P0: [1, 2]}, {P0: s})
    sent = Sent()
    batch = batch_for(context, sent, inter_broker_listener="INTERNAL")
    batch.add_leader_and_isr_request_for_brokers([1, 2], P0, s, ReplicaAssignment((1, 2)), is_new=True)
    batch.send_requests_to_brokers()
    to_2 = sent.leader_and_isr()[2]
    assert [(leader.broker_id, leader.host_name, leader.port) for leader in to_2.live_leaders] == [
        (1, "broker-1", 29092)
    ]
    (_, update), *_ = sent.update_metadata()
    described = {b.id: b for b in update.live_brokers}[1]
    assert [(e.listener, e.host, e.port, e.security_protocol) for e in described.endpoints] == [
        ("INTERNAL", "broker-1", 29092, 0),
        ("EXTERNAL", "localhost", 9092, 0),
    ]


def test_update_metadata_with_no_partitions_still_names_the_live_brokers() -> None:
    context = context_with([broker(1), broker(2)])
    sent = Sent()
    batch = batch_for(context, sent)
    batch.add_update_metadata_request_for_brokers([2])
    batch.send_requests_to_brokers()
    ((b, request),) = sent.update_metadata()
    assert b == 2
    assert list(request.partition_states) == []
    assert [x.id for x in request.live_brokers] == [1, 2]


def test_requests_for_brokers_that_are_not_live_are_dropped() -> None:
    s = state(1, [1, 2])
    context = context_with([broker(1)], {P0: [1, 2]}, {P0: s})
    sent = Sent()
    batch = batch_for(context, sent)
    batch.add_leader_and_isr_request_for_brokers([1, 2], P0, s, ReplicaAssignment((1, 2)), is_new=False)
    batch.add_update_metadata_request_for_brokers([2])
    batch.send_requests_to_brokers()
    assert [b for b, _ in sent.requests] == [1, 1]
    assert batch.is_empty


def test_stop_replica_without_and_with_delete_go_as_two_requests_and_only_deletions_report_back() -> None:
    context = context_with([broker(1), broker(2)], {P0: [1, 2], P1: [1, 2], Q0: [1]}, {}, epoch=3)
    sent = Sent()
    batch = batch_for(context, sent)
    batch.add_stop_replica_request_for_brokers([1, 2], P0, delete_partition=False)
    batch.add_stop_replica_request_for_brokers([1], P1, delete_partition=False)
    # Deleting a partition it is also told to stop: one deletion.
    batch.add_stop_replica_request_for_brokers([1], P1, delete_partition=True)
    batch.add_stop_replica_request_for_brokers([1], Q0, delete_partition=True)
    batch.send_requests_to_brokers()

    requests = [(b, r.delete_partitions, [(p.topic_name, p.partition_index) for p in r.partitions])
                for b, r in sent.stop_replica()]
    assert requests == [
        (1, False, [("orders", 0)]),
        (1, True, [("audit", 0), ("orders", 1)]),
        (2, False, [("orders", 0)]),
    ]
    assert all(r.controller_epoch == 3 for _, r in sent.stop_replica())
    assert {b: len(callbacks) for b, callbacks in sent.callbacks.items()} == {1: 1}
    assert batch.is_empty

"""KafkaZkClient against a real ZooKeeper server: the races and fences the design relies on."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import cast

import pytest
from kazoo.protocol.serialization import Transaction

from proto.errors import ErrorCode, KafkaError
from proto.types import EndPoint, TopicPartition
from zk import paths
from zk.client import JUTE_MAX_BUFFER, ControllerMovedError, DuplicateBrokerIdError, KafkaZkClient, ZnodeTooLargeError
from zk.paths import BrokerInfo, LeaderIsrAndControllerEpoch, TopicAssignment

pytestmark = pytest.mark.integration

Connect = Callable[..., KafkaZkClient]
TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)


def _run_concurrently(*calls: Callable[[], object]) -> list[object]:
    """Run the calls in threads released together; re-raise the first failure."""
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = calls[i]()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a concurrent call hung"
    if errors:
        raise errors[0]
    return results


def _create_orders(client: KafkaZkClient) -> None:
    client.create_topic(TopicAssignment.of("orders", {0: [1, 2, 3], 1: [2, 3, 1]}))


def _elect(client: KafkaZkClient, controller_id: int) -> tuple[int, int]:
    won = client.try_create_controller(controller_id)
    assert won is not None, f"controller {controller_id} lost an uncontested election"
    return won


# --- brokers ---


def test_register_broker_returns_czxid_as_broker_epoch(zk_client: KafkaZkClient, zk_clients: Connect) -> None:
    epoch1 = zk_client.register_broker(BrokerInfo(id=1, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9091),)))
    other = zk_clients()
    epoch2 = other.register_broker(BrokerInfo(id=2, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9092),), rack="r2"))
    assert epoch2 > epoch1 > 0

    brokers = zk_client.get_all_brokers()
    assert [(b.id, b.endpoints[0].port, b.rack, b.epoch) for b in brokers] == [
        (1, 9091, None, epoch1),
        (2, 9092, "r2", epoch2),
    ]
    assert brokers[0].timestamp_ms > 0
    assert zk_client.get_broker(2) == brokers[1]
    assert zk_client.get_broker(3) is None

    other.close()  # a clean shutdown removes the registration at once
    assert [b.id for b in zk_client.get_all_brokers()] == [1]


def test_duplicate_broker_id_is_refused(zk_client: KafkaZkClient, zk_clients: Connect) -> None:
    zk_client.register_broker(BrokerInfo(id=1, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9091),)))
    impostor = zk_clients()
    with pytest.raises(DuplicateBrokerIdError, match=r"broker\.id=1"):
        impostor.register_broker(BrokerInfo(id=1, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9999),)))
    registered = zk_client.get_broker(1)
    assert registered is not None and registered.endpoints[0].port == 9091

    # Registering again from the owning session is a no-op success (a retried create).
    assert zk_client.register_broker(BrokerInfo(id=1, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9091),))) > 0

    zk_client.close()
    impostor.register_broker(BrokerInfo(id=1, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9999),)))
    registered = impostor.get_broker(1)
    assert registered is not None and registered.endpoints[0].port == 9999


def test_a_registration_left_by_the_clients_own_expired_session_is_replaced(
    zk_client: KafkaZkClient, zk_clients: Connect
) -> None:
    """KAFKA-7165: after a session expiry the old session's ephemeral can outlive the news of the expiry. Staged
    with two live sessions: the node held by `zk_client`'s session stands for the one this broker's previous,
    expired session left, which `broker` is told it created before."""
    info = BrokerInfo(id=1, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9091),))
    zk_client.register_broker(info)
    stale = zk_client.get_broker(1)
    broker = zk_clients()
    with pytest.raises(DuplicateBrokerIdError):  # a session it never registered with: another broker's
        broker.register_broker(info)
    broker._ephemeral_session_id = zk_client.session_id
    epoch = broker.register_broker(info)
    registered = zk_client.get_broker(1)
    assert stale is not None and registered is not None and registered.epoch == epoch > stale.epoch
    node = zk_client._get(paths.broker_id_path(1))
    assert node is not None and node[1].ephemeralOwner == broker.session_id


def test_broker_re_registers_after_session_expiry(
    zk_clients: Connect, expire_session: Callable[[KafkaZkClient], None]
) -> None:
    broker = zk_clients()
    broker.ensure_persistent_paths()
    observer = zk_clients()
    info = BrokerInfo(id=1, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9091),))
    events: queue.Queue[tuple[str, int]] = queue.Queue()
    broker.on_session_expired(lambda: events.put(("expired", 0)))
    broker.on_new_session(lambda: events.put(("new session", broker.register_broker(info))))
    first_epoch = broker.register_broker(info)
    first_session = broker.session_id
    ids: queue.Queue[set[int]] = queue.Queue()
    broker.watch_broker_ids(ids.put)

    expire_session(broker)

    assert events.get(timeout=30) == ("expired", 0)
    kind, new_epoch = events.get(timeout=30)
    assert kind == "new session"
    assert new_epoch > first_epoch
    assert broker.session_id != first_session
    registered = observer.get_broker(1)
    assert registered is not None and registered.epoch == new_epoch

    # Watches set in the old session keep working in the new one.
    observer.register_broker(BrokerInfo(id=2, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9092),)))
    while 2 not in ids.get(timeout=30):
        pass


def test_cluster_id_is_created_once(zk_client: KafkaZkClient, zk_clients: Connect) -> None:
    cluster_id = zk_client.get_or_create_cluster_id()
    assert len(cluster_id) == 22
    assert zk_clients().get_or_create_cluster_id("another") == cluster_id


# --- controller election and fencing ---


def test_controller_election_race_has_one_winner(zk_clients: Connect) -> None:
    candidates = [zk_clients() for _ in range(3)]
    candidates[0].ensure_persistent_paths()
    results = _run_concurrently(*[lambda c=c, i=i: c.try_create_controller(100 + i) for i, c in enumerate(candidates)])

    winners = [i for i, r in enumerate(results) if r is not None]
    assert len(winners) == 1, results
    winner = winners[0]
    assert results[winner] == (1, 1)  # epoch 1; /controller_epoch created at version 0, bumped to 1
    for c in candidates:
        assert c.get_controller_id() == 100 + winner
        assert c.get_controller_epoch() == (1, 1)


def test_standby_takes_over_when_the_controller_session_ends(zk_clients: Connect) -> None:
    active, standby = zk_clients(), zk_clients()
    assert _elect(active, 1) == (1, 1)
    assert standby.try_create_controller(2) is None

    # The standby's loop: run again whenever /controller is empty.
    elected: queue.Queue[tuple[int, int]] = queue.Queue()

    def on_controller(controller_id: int | None) -> None:
        if controller_id is None:
            won = standby.try_create_controller(2)
            if won is not None:
                elected.put(won)

    watch = standby.watch_controller(on_controller)
    active.close()
    assert elected.get(timeout=30) == (2, 2)
    assert standby.get_controller_id() == 2
    watch.cancel()


def test_controller_resignation_hands_over(zk_clients: Connect) -> None:
    active, standby = zk_clients(), zk_clients()
    _, epoch_zk_version = _elect(active, 1)
    active.delete_controller(epoch_zk_version)
    assert _elect(standby, 2) == (2, 2)
    with pytest.raises(ControllerMovedError):
        active.delete_controller(epoch_zk_version)  # too late: fenced
    assert standby.get_controller_id() == 2


def test_stale_controller_writes_are_fenced(zk_client: KafkaZkClient, zk_clients: Connect) -> None:
    old = zk_client
    _create_orders(old)
    _, old_version = _elect(old, 1)
    state = LeaderIsrAndControllerEpoch(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)
    assert old.create_partition_states({TP0: state}, old_version) == {TP0}
    old.propagate_isr_changes([TP0])

    # A new controller is elected while the old one still believes it is active
    # (paused, partitioned...): its seat is gone, so is its right to write.
    old.delete_controller(old_version)
    new = zk_clients()
    new_epoch, new_version = _elect(new, 2)
    assert new_epoch == 2

    current = old.get_partition_state(TP0)
    assert current is not None
    stale = LeaderIsrAndControllerEpoch(2, 1, (2,), 1, zk_version=current.zk_version)
    with pytest.raises(ControllerMovedError):
        old.update_partition_states({TP0: stale}, old_version)
    with pytest.raises(ControllerMovedError):
        old.create_partition_states({TP1: state}, old_version)
    with pytest.raises(ControllerMovedError):
        old.delete_isr_change_notifications(old.get_isr_change_notifications(), old_version)
    with pytest.raises(ControllerMovedError):
        old.set_topic_assignment(TopicAssignment.of("orders", {0: [1, 2]}), old_version)
    assert new.get_partition_state(TP0) == current
    assert new.get_partition_state(TP1) is None
    assert new._children(paths.topic_partitions_path("orders")) == ["0"]  # not even TP1's parent znode
    assert len(new.get_isr_change_notifications()) == 1

    # The new controller, with its own epoch's version, writes fine.
    fresh = LeaderIsrAndControllerEpoch(2, 1, (2,), new_epoch, zk_version=current.zk_version)
    result = new.update_partition_states({TP0: fresh}, new_version)
    assert result.finished == {TP0: LeaderIsrAndControllerEpoch(2, 1, (2,), new_epoch, current.zk_version + 1)}
    assert not result.to_retry and not result.failed


# --- partition state ---


def test_leader_isr_update_is_conditional(zk_client: KafkaZkClient, zk_clients: Connect) -> None:
    _create_orders(zk_client)
    controller_epoch, epoch_zk_version = _elect(zk_client, 1)
    initial = LeaderIsrAndControllerEpoch(1, 0, (1, 2, 3), controller_epoch)
    assert zk_client.create_partition_states({TP0: initial}, epoch_zk_version) == {TP0}
    # Creating again is not an error, just nothing new.
    assert zk_client.create_partition_states({TP0: initial}, epoch_zk_version) == set()

    leader = zk_clients()
    read = leader.get_partition_state(TP0)
    assert read == LeaderIsrAndControllerEpoch(1, 0, (1, 2, 3), controller_epoch, zk_version=0)

    shrunk = LeaderIsrAndControllerEpoch(1, 0, (1, 2), controller_epoch)
    assert leader.conditional_update_partition_state(TP0, shrunk, expected_version=0) == (True, 1)

    # Another writer still holding version 0 loses and must re-read.
    expanded = LeaderIsrAndControllerEpoch(1, 0, (1, 2, 3), controller_epoch)
    assert zk_client.conditional_update_partition_state(TP0, expanded, expected_version=0) == (False, -1)
    assert zk_client.get_partition_state(TP0) == LeaderIsrAndControllerEpoch(1, 0, (1, 2), controller_epoch, 1)

    # The same write again (a retry whose first attempt landed) is recognised as done.
    assert leader.conditional_update_partition_state(TP0, shrunk, expected_version=0) == (True, 1)
    assert leader.conditional_update_partition_state(TopicPartition("orders", 9), shrunk, 0) == (False, -1)


def test_controller_update_retries_partitions_a_leader_changed(zk_client: KafkaZkClient, zk_clients: Connect) -> None:
    _create_orders(zk_client)
    controller_epoch, epoch_zk_version = _elect(zk_client, 1)
    states = {tp: LeaderIsrAndControllerEpoch(1, 0, (1, 2), controller_epoch) for tp in (TP0, TP1)}
    zk_client.create_partition_states(states, epoch_zk_version)
    read = zk_client.get_partition_states([TP0, TP1, TopicPartition("orders", 2)])
    assert set(read) == {TP0, TP1}

    # A leader shrinks TP1's ISR between the controller's read and its write.
    leader = zk_clients()
    assert leader.conditional_update_partition_state(TP1, LeaderIsrAndControllerEpoch(1, 0, (1,), controller_epoch), 0)[
        0
    ]

    new_leader = {tp: LeaderIsrAndControllerEpoch(2, 1, (2,), controller_epoch, s.zk_version) for tp, s in read.items()}
    result = zk_client.update_partition_states(new_leader, epoch_zk_version)
    assert result.finished == {TP0: LeaderIsrAndControllerEpoch(2, 1, (2,), controller_epoch, 1)}
    assert result.to_retry == [TP1]
    assert not result.failed
    assert zk_client.get_partition_state(TP1) == LeaderIsrAndControllerEpoch(1, 0, (1,), controller_epoch, 1)


# --- ISR change notifications ---


def test_isr_change_notifications_are_sequential(zk_client: KafkaZkClient, zk_clients: Connect) -> None:
    _, epoch_zk_version = _elect(zk_client, 1)
    seen: queue.Queue[list[str]] = queue.Queue()
    watch = zk_client.watch_isr_change_notifications(seen.put)
    assert seen.get(timeout=30) == []

    leader = zk_clients()
    first = leader.propagate_isr_changes([TP0])
    second = leader.propagate_isr_changes([TP1, TP0])
    assert first < second
    assert len(first) == 10 and first.isdigit()

    notified: list[str] = []
    while notified != [first, second]:
        notified = seen.get(timeout=30)
    assert zk_client.get_isr_change_notifications() == [first, second]
    assert zk_client.get_partitions_from_isr_change_notifications([first, second]) == {TP0, TP1}

    zk_client.delete_isr_change_notifications([first, second], epoch_zk_version)
    zk_client.delete_isr_change_notifications([first], epoch_zk_version)  # already gone: fine
    assert zk_client.get_isr_change_notifications() == []
    watch.cancel()


# --- producer ids ---


def test_producer_id_blocks_never_overlap(zk_client: KafkaZkClient, zk_clients: Connect) -> None:
    clients = [zk_client, zk_clients(), zk_clients()]
    per_client = 15

    def allocate(broker_id: int, client: KafkaZkClient) -> list[tuple[int, int]]:
        blocks = [client.allocate_producer_id_block(broker_id) for _ in range(per_client)]
        assert all(b.broker_id == broker_id for b in blocks)
        return [(b.block_start, b.block_end) for b in blocks]

    results = _run_concurrently(*[lambda i=i, c=c: allocate(i, c) for i, c in enumerate(clients)])
    blocks = sorted(block for result in results for block in cast(list[tuple[int, int]], result))
    size = paths.PRODUCER_ID_BLOCK_SIZE
    # Disjoint and gapless: exactly the first N blocks, each handed out once.
    assert blocks == [(i * size, i * size + size - 1) for i in range(len(clients) * per_client)]


# --- topics and admin requests ---


def test_create_topic_writes_assignment_and_config(zk_client: KafkaZkClient) -> None:
    topics: queue.Queue[set[str]] = queue.Queue()
    zk_client.watch_topics(topics.put)
    assert topics.get(timeout=30) == set()

    assignment = TopicAssignment.of("orders", {0: [1, 2, 3], 1: [2, 3, 1]})
    zk_client.create_topic(assignment, {"min.insync.replicas": "2"})
    assert topics.get(timeout=30) == {"orders"}
    assert zk_client.get_all_topics() == {"orders"}
    assert zk_client.get_topic_assignment("orders") == assignment
    assert zk_client.get_topic_assignments(["orders", "missing"]) == {"orders": assignment}
    assert zk_client.get_topic_config("orders") == {"min.insync.replicas": "2"}
    assert zk_client.get_topic_config("missing") == {}

    with pytest.raises(KafkaError) as err:
        zk_client.create_topic(TopicAssignment.of("orders", {0: [1]}))
    assert err.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert zk_client.get_topic_config("orders") == {"min.insync.replicas": "2"}  # untouched

    changes: queue.Queue[list[str]] = queue.Queue()
    zk_client.watch_children(paths.CONFIG_CHANGES, changes.put)
    assert changes.get(timeout=30) == []
    zk_client.set_topic_config("orders", {"retention.ms": "1000"})
    assert zk_client.get_topic_config("orders") == {"retention.ms": "1000"}
    assert changes.get(timeout=30) == [paths.config_change_path("0000000000").rsplit("/", 1)[1]]


def test_topic_deletion_request_and_completion(zk_client: KafkaZkClient) -> None:
    _, epoch_zk_version = _elect(zk_client, 1)
    zk_client.create_topic(TopicAssignment.of("orders", {0: [1], 1: [1]}), {"retention.ms": "1"})
    state = LeaderIsrAndControllerEpoch(1, 0, (1,), 1)
    zk_client.create_partition_states({TP0: state, TP1: state}, epoch_zk_version)
    # Deleted together: one without partition state znodes yet, one with no deletion request to delete.
    zk_client.create_topic(TopicAssignment.of("stateless", {0: [1]}))
    zk_client.create_topic(TopicAssignment.of("bare", {0: [1]}))

    deletions: queue.Queue[set[str]] = queue.Queue()
    zk_client.watch_topic_deletions(deletions.put)
    assert deletions.get(timeout=30) == set()
    assert zk_client.create_delete_topic_path("orders") is True
    assert zk_client.create_delete_topic_path("orders") is False
    assert deletions.get(timeout=30) == {"orders"}
    assert zk_client.create_delete_topic_path("stateless") is True
    assert deletions.get(timeout=30) == {"orders", "stateless"}

    zk_client.delete_topics(["orders", "stateless", "bare"], epoch_zk_version)
    assert zk_client.get_all_topics() == set()
    assert zk_client.get_topic_config("orders") == {}
    assert zk_client.get_topic_deletions() == set()
    assert deletions.get(timeout=30) == set()


def test_a_deleted_topics_znodes_go_in_one_multi_op(zk_client: KafkaZkClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A topic's znodes (its partitions' states, config and deletion request) go in one fenced multi-op; a topic
    missing one of them (here no deletion request) fails its multi-op and is deleted one znode at a time."""
    _, epoch_zk_version = _elect(zk_client, 1)
    topics = [f"t{i}" for i in range(3)]
    state = LeaderIsrAndControllerEpoch(1, 0, (1,), 1)
    for topic in topics:
        zk_client.create_topic(TopicAssignment.of(topic, {0: [1], 1: [1]}), {"retention.ms": "1"})
        zk_client.create_partition_states(
            {TopicPartition(topic, 0): state, TopicPartition(topic, 1): state}, epoch_zk_version)
        assert zk_client.create_delete_topic_path(topic)
    zk_client.create_topic(TopicAssignment.of("bare", {0: [1]}), {})
    kazoo = zk_client._zk  # every request passes its _call
    multi_ops: list[int] = []
    send = kazoo._call

    def counting(request: object, async_object: object) -> object:
        if isinstance(request, Transaction):
            multi_ops.append(len(request.operations))
        return send(request, async_object)

    monkeypatch.setattr(kazoo, "_call", counting)
    zk_client.delete_topics([*topics, "bare"], epoch_zk_version)
    # Each of t0-t2: the epoch check and its eight znodes. bare: its failed multi-op, then its 2 znodes (the topic
    # znode and its config) and the request that was never there, one each.
    assert multi_ops == [9, 9, 9, 4, 2, 2, 2]
    assert zk_client.get_all_topics() == set()
    assert zk_client.get_topic_deletions() == set()
    assert all(zk_client.get_topic_config(t) == {} for t in [*topics, "bare"])


def test_preferred_replica_election_request(zk_client: KafkaZkClient) -> None:
    _, epoch_zk_version = _elect(zk_client, 1)
    requests: queue.Queue[set[TopicPartition]] = queue.Queue()
    zk_client.watch_preferred_replica_election(requests.put)
    assert requests.get(timeout=30) == set()

    assert zk_client.create_preferred_replica_election([TP0, TP1]) is True
    assert zk_client.create_preferred_replica_election([TP0]) is False  # one at a time
    assert requests.get(timeout=30) == {TP0, TP1}
    assert zk_client.get_preferred_replica_election() == {TP0, TP1}

    zk_client.delete_preferred_replica_election(epoch_zk_version)
    assert requests.get(timeout=30) == set()
    assert zk_client.get_preferred_replica_election() == set()


def test_partition_reassignment_request(zk_client: KafkaZkClient) -> None:
    _, epoch_zk_version = _elect(zk_client, 1)
    requests: queue.Queue[dict[TopicPartition, tuple[int, ...]]] = queue.Queue()
    watch = zk_client.watch_partition_reassignment(requests.put)
    assert requests.get(timeout=30) == {}

    assert zk_client.create_partition_reassignment({TP0: [2, 3], TP1: [3, 1]}) is True
    assert zk_client.create_partition_reassignment({TP0: [1]}) is False
    assert requests.get(timeout=30) == {TP0: (2, 3), TP1: (3, 1)}

    zk_client.set_partition_reassignment({TP1: [3, 1]}, epoch_zk_version)  # TP0 done
    assert requests.get(timeout=30) == {TP1: (3, 1)}
    zk_client.set_partition_reassignment({}, epoch_zk_version)  # all done
    assert requests.get(timeout=30) == {}
    assert zk_client.get_partition_reassignment() == {}

    watch.cancel()
    zk_client.create_partition_reassignment({TP0: [1]})
    with pytest.raises(queue.Empty):
        requests.get(timeout=0.5)  # a cancelled watch stays quiet


def test_watch_broker_ids(zk_client: KafkaZkClient, zk_clients: Connect) -> None:
    ids: queue.Queue[set[int]] = queue.Queue()
    zk_client.watch_broker_ids(ids.put)
    assert ids.get(timeout=30) == set()
    broker = zk_clients()
    broker.register_broker(BrokerInfo(id=7, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9097),)))
    assert ids.get(timeout=30) == {7}
    broker.close()
    assert ids.get(timeout=30) == set()


def test_a_request_longer_than_jute_maxbuffer_fails_at_once_and_the_session_lives_on(
        zk_client: KafkaZkClient) -> None:
    """ZooKeeper drops the connection of a client sending more than jute.maxbuffer; kazoo's retry would send it
    again after each reconnect, for ever. The wrapper refuses it before sending, whatever the path."""
    session = zk_client.session_id
    huge = {"retention.ms": "1", "x": "y" * JUTE_MAX_BUFFER}
    with pytest.raises(ZnodeTooLargeError) as refused:
        zk_client.set_topic_config("big", huge)
    assert refused.value.code == ErrorCode.POLICY_VIOLATION
    assert refused.value.path.endswith("/config/topics/big")
    reassignment = {TopicPartition("t" * 200, p): [1, 2, 3] for p in range(10_000)}
    with pytest.raises(ZnodeTooLargeError):
        zk_client.create_partition_reassignment(reassignment)
    assert zk_client.connected and zk_client.session_id == session
    zk_client.set_topic_config("big", {"retention.ms": "1"})  # the same session serves the next write
    assert zk_client.get_topic_config("big") == {"retention.ms": "1"}
    assert zk_client.get_partition_reassignment() == {}


def test_topic_assignment_watches_fire_on_each_change_never_at_registration(zk_client: KafkaZkClient) -> None:
    """The controller arms them for every topic at once (one pipelined round) before reading the assignments: a
    registration that fired would be an event per topic that changes nothing."""
    zk_client.create_topic(TopicAssignment.of("orders", {0: [1]}))
    changed: queue.Queue[str] = queue.Queue()
    watches = zk_client.watch_topic_assignments(["orders", "not-yet"], changed.put)
    with pytest.raises(queue.Empty):
        changed.get(timeout=1)  # a second for a fire at registration to arrive: none may
    zk_client.set_topic_partitions(TopicAssignment.of("orders", {0: [1], 1: [1]}))
    assert changed.get(timeout=30) == "orders"
    zk_client.set_topic_partitions(TopicAssignment.of("orders", {0: [1], 1: [1], 2: [1]}))
    assert changed.get(timeout=30) == "orders"  # re-armed by the first fire
    zk_client.create_topic(TopicAssignment.of("not-yet", {0: [1]}))
    assert changed.get(timeout=30) == "not-yet"  # a topic armed before its znode existed
    watches["orders"].cancel()
    zk_client.set_topic_partitions(TopicAssignment.of("orders", {0: [1], 1: [1], 2: [1], 3: [1]}))
    zk_client.set_topic_partitions(TopicAssignment.of("not-yet", {0: [1], 1: [1]}))
    assert changed.get(timeout=30) == "not-yet"  # the cancelled one stayed quiet, this one came after it
    assert changed.empty()

"""The ReplicaManager's side of a log dir failure (Kafka's handleLogDirFailure and HostedPartition.Offline), and
the handler thread that tells the controller."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from broker.log.log_dir_failure import LogDirFailureChannel
from broker.server import log_dir_failure_handler
from broker.server.log_dir_failure_handler import LogDirFailureHandler
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.unit.broker.broker_helpers import (
    LOCAL,
    TP,
    Harness,
    batch,
    consumer_fetch,
    leader_state,
    live_leaders,
    produce,
)

SPARED = TopicPartition("orders", 1)
FOLLOWED = TopicPartition("orders", 2)


class Halted(Exception):
    pass


def halt(status: int) -> None:
    raise Halted(status)


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    """Two dirs: TP and FOLLOWED (a follower of broker 2) land in the first, SPARED in the second."""
    h = Harness(tmp_path, log_dirs=2, halt=halt)
    h.lead(TP, isr=(LOCAL, 2))
    h.lead(SPARED)
    result = h.replica_manager.become_leader_or_follower(
        0, 1, [(FOLLOWED, leader_state(leader=2, isr=(2, LOCAL)))], live_leaders(2), {})
    assert result.partition_errors[FOLLOWED] is ErrorCode.NONE
    assert FOLLOWED in h.fetcher_manager.fetching
    return h


def first_dir(h: Harness) -> Path:
    return h.log_manager.log_dirs[0]


def test_the_dirs_partitions_go_offline_and_answer_kafka_storage_error(h: Harness) -> None:
    waiting = produce(h, batch(), acks=-1)  # follower 2 has not fetched it: it waits in the purgatory
    assert not waiting.calls
    assert h.replica_manager.handle_log_dir_failure(first_dir(h)) == [TP, FOLLOWED]

    assert waiting.value[TP].error is ErrorCode.KAFKA_STORAGE_ERROR, "the waiting acks=all produce fails now"
    assert FOLLOWED not in h.fetcher_manager.fetching, "its fetcher stopped"
    assert produce(h, batch(), acks=1).value[TP].error is ErrorCode.KAFKA_STORAGE_ERROR
    ((_, fetched),) = consumer_fetch(h, 0, max_wait_ms=0).value
    assert fetched.error is ErrorCode.KAFKA_STORAGE_ERROR
    # The controller hears of it from LeaderAndIsr answers; StopReplica gets the same.
    answer = h.replica_manager.become_leader_or_follower(
        0, 1, [(TP, leader_state(leader=2, epoch=1, isr=(2, LOCAL))), (FOLLOWED, leader_state(epoch=1))],
        live_leaders(2), {})
    assert answer.partition_errors == {TP: ErrorCode.KAFKA_STORAGE_ERROR, FOLLOWED: ErrorCode.KAFKA_STORAGE_ERROR}
    assert h.replica_manager.stop_replicas(0, 1, False, [TP]).partition_errors == {TP: ErrorCode.KAFKA_STORAGE_ERROR}
    assert h.replica_manager.offline_partition_count == 2

    # The other dir serves on.
    assert produce(h, batch(), acks=-1, tp=SPARED).value[SPARED].error is ErrorCode.NONE
    h.replica_manager.checkpoint_high_watermarks()
    assert h.log_manager.read_high_watermarks() == {SPARED: 3}


def test_leadership_listeners_hear_that_the_dirs_partitions_are_gone(h: Harness) -> None:
    """The group coordinator drops the __consumer_offsets partitions it led there: nothing can be written to them."""
    heard: list[tuple[object, object]] = []
    h.replica_manager.add_leadership_listener(lambda became, resigned: heard.append((list(became), list(resigned))))
    h.replica_manager.handle_log_dir_failure(first_dir(h))
    assert heard == [([], [(TP, None), (FOLLOWED, None)])]


def test_a_dir_already_offline_is_handled_once(h: Harness) -> None:
    assert h.replica_manager.handle_log_dir_failure(first_dir(h)) == [TP, FOLLOWED]
    assert h.replica_manager.handle_log_dir_failure(first_dir(h)) == []


def test_the_last_dir_halts_the_broker(h: Harness) -> None:
    h.replica_manager.handle_log_dir_failure(first_dir(h))
    with pytest.raises(Halted):
        h.replica_manager.handle_log_dir_failure(h.log_manager.log_dirs[1])


def test_the_handler_takes_the_dir_offline_then_tells_the_controller_until_zookeeper_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_dir_failure_handler, "NOTIFICATION_RETRY_BACKOFF_S", 0)
    channel = LogDirFailureChannel()
    events: list[str] = []
    notified = threading.Event()

    def handle(log_dir: Path) -> list[TopicPartition]:
        events.append(f"offline {log_dir.name}")
        return [TP]

    def propagate() -> None:
        events.append("notify")
        if events.count("notify") == 1:
            raise ConnectionError("ZooKeeper is not reachable")
        notified.set()

    handler = LogDirFailureHandler(channel, handle, propagate)
    handler.start()
    channel.maybe_add_offline_log_dir(tmp_path / "a", "Error while appending", OSError(28, "No space left"))
    assert notified.wait(10)
    handler.shutdown()
    assert events == ["offline a", "notify", "notify"]


def test_a_replica_whose_log_was_on_a_failed_dir_is_not_recreated_elsewhere(h: Harness) -> None:
    """With a dir offline the broker cannot tell which partitions were there (after a restart it never loaded
    them): a LeaderAndIsr for a replica that is not new and has no log answers KAFKA_STORAGE_ERROR (the controller
    marks it offline) instead of starting an empty log in the dir in service; a new replica is created there."""
    h.replica_manager.handle_log_dir_failure(first_dir(h))
    old, new = TopicPartition("lost", 0), TopicPartition("created", 0)
    follower = leader_state(leader=2, isr=(2, LOCAL))
    answer = h.replica_manager.become_leader_or_follower(
        0, 1, [(old, dataclasses.replace(follower, is_new=False)), (new, follower)], live_leaders(2), {})
    assert answer.partition_errors == {old: ErrorCode.KAFKA_STORAGE_ERROR, new: ErrorCode.NONE}
    assert h.log_manager.get_log(old) is None and h.log_manager.get_log(new) is not None
    assert produce(h, batch(), acks=1, tp=old).value[old].error is ErrorCode.KAFKA_STORAGE_ERROR

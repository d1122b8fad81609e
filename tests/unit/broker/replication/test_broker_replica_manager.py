"""ReplicaManager: LeaderAndIsr / StopReplica / UpdateMetadata rules, produce and fetch with their
purgatories completed by appends and high watermark moves (a mock timer: nothing waits for real)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

import broker.replication.replica_manager as replica_manager_module
from broker.log.checkpoint import OffsetCheckpointFile
from broker.log.files import LOG_START_OFFSET_CHECKPOINT
from broker.replication.delayed_fetch import FetchParams, FetchResults, PartitionFetchInfo
from broker.replication.delayed_produce import ProducePartitionResponse
from broker.replication.partition import FetchIsolation
from common.record import CRC_POS
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.unit.broker.broker_helpers import (
    LOCAL,
    TP,
    Answers,
    Harness,
    InlineExecutor,
    batch,
    consumer_fetch,
    leader_state,
    live_broker,
    live_leaders,
    metadata_state,
    produce,
)

OTHER = TopicPartition("orders", 1)


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def only(results: FetchResults) -> Any:
    assert len(results) == 1
    return results[0][1]


# ------------------------------------------------------------------ LeaderAndIsr


def test_stale_controller_epoch_changes_nothing(h: Harness) -> None:
    h.lead(controller_epoch=5)
    result = h.replica_manager.become_leader_or_follower(
        0, 4, [(TP, leader_state(leader=2, epoch=9, isr=(2, 1)))], live_leaders(2), {})
    assert result.error is ErrorCode.STALE_CONTROLLER_EPOCH and not result.partition_errors
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and partition.is_leader and partition.leader_epoch == 0


@pytest.mark.parametrize("epoch", [0, 3])
def test_older_or_equal_leader_epoch_is_ignored(h: Harness, epoch: int) -> None:
    h.lead(epoch=3)
    result = h.replica_manager.become_leader_or_follower(
        0, 1, [(TP, leader_state(leader=2, epoch=epoch, isr=(2, 1)))], live_leaders(2), {})
    assert result.error is ErrorCode.NONE
    assert result.partition_errors == {TP: ErrorCode.STALE_CONTROLLER_EPOCH}
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and partition.is_leader and partition.leader_epoch == 3


def test_partition_not_assigned_here_is_refused(h: Harness) -> None:
    result = h.replica_manager.become_leader_or_follower(
        0, 1, [(TP, leader_state(leader=2, isr=(2, 3)))], live_leaders(2), {})
    assert result.partition_errors == {TP: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert h.log_manager.get_log(TP) is None


def test_a_name_that_is_not_a_topic_is_refused(h: Harness) -> None:
    bad = TopicPartition("../escape", 0)
    result = h.replica_manager.become_leader_or_follower(0, 1, [(bad, leader_state())], live_leaders(LOCAL), {})
    assert result.partition_errors == {bad: ErrorCode.INVALID_TOPIC_EXCEPTION}


def test_follower_of_a_dead_leader_hosts_the_log_without_a_role(h: Harness) -> None:
    result = h.replica_manager.become_leader_or_follower(
        0, 1, [(TP, leader_state(leader=2, isr=(2, 1)))], live_leaders=[], topic_configs={})
    assert result.partition_errors == {TP: ErrorCode.NONE}
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and partition.log is not None and partition.leader_replica_id is None


def test_one_leader_and_isr_stops_the_fetchers_of_all_its_partitions_in_one_call(h: Harness) -> None:
    # Kafka's makeLeaders / makeFollowers: one removeFetcherForPartitions per role change, not one per partition.
    leading = [TopicPartition("orders", p) for p in range(3)]
    following = [TopicPartition("orders", p) for p in range(3, 6)]
    orphaned = TopicPartition("orders", 6)  # its leader is not alive: it gets no fetcher, so none is stopped
    states = [(tp, leader_state(LOCAL, 1, (LOCAL, 2))) for tp in leading]
    states += [(tp, leader_state(2, 1, (2, LOCAL))) for tp in following]
    states.append((orphaned, leader_state(3, 1, (3, LOCAL))))
    result = h.replica_manager.become_leader_or_follower(0, 1, states, live_leaders(2), {})
    assert set(result.partition_errors.values()) == {ErrorCode.NONE}
    assert h.fetcher_manager.removals == [{*leading, *following}]
    assert set(h.fetcher_manager.fetching) == set(following)


def test_a_new_leader_stops_fetching_what_it_followed(h: Harness) -> None:
    h.replica_manager.become_leader_or_follower(0, 1, [(TP, leader_state(2, 1, (2, LOCAL)))], live_leaders(2), {})
    assert set(h.fetcher_manager.fetching) == {TP}
    h.lead(TP, isr=(LOCAL, 2), epoch=2)
    assert h.fetcher_manager.fetching == {}


def tracked(obj: object) -> bool:
    """Whether a collection of any generation walks `obj` (frozen objects are in none)."""
    return any(o is obj for o in gc.get_objects())


def test_new_replicas_are_frozen_out_of_the_full_collections_and_a_deletion_thaws(h: Harness) -> None:
    h.lead(TP)
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and gc.get_freeze_count() > 0 and not tracked(partition)
    assert not tracked(partition.log)
    h.replica_manager.stop_replicas(0, 1, True, [TP])
    assert gc.get_freeze_count() == 0


def test_a_leader_and_isr_creating_many_replicas_freezes_as_it_goes(h: Harness,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Not only at its end: each full collection inside the LeaderAndIsr walks only the replicas created since
    the last freeze, not all created so far (several 250-300 ms collections at 10,000 partitions)."""
    monkeypatch.setattr(replica_manager_module, "FREEZE_EVERY_CREATED", 2)
    logs_at_each_freeze: list[int] = []
    monkeypatch.setattr(replica_manager_module.gc, "freeze", lambda: logs_at_each_freeze.append(
        sum(1 for p in h.replica_manager.hosted_partitions() if p.log is not None)))
    tps = [TopicPartition("orders", p) for p in range(5)]
    result = h.replica_manager.become_leader_or_follower(
        0, 1, [(tp, leader_state(LOCAL, 0, (LOCAL,))) for tp in tps], live_leaders(LOCAL), {})
    assert all(error is ErrorCode.NONE for error in result.partition_errors.values())
    assert logs_at_each_freeze == [2, 4, 5]


def test_a_leader_and_isr_that_creates_no_replica_freezes_nothing(h: Harness) -> None:
    h.lead(TP)
    gc.unfreeze()
    h.lead(TP, epoch=1)
    assert gc.get_freeze_count() == 0
    h.replica_manager.stop_replicas(0, 1, False, [TP])
    assert gc.get_freeze_count() == 0


def test_losing_leadership_fails_waiting_produces_at_once(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.lead(isr=(1, 2))
    answers = produce(h, batch(2), acks=-1)
    assert not answers.calls
    h.replica_manager.become_leader_or_follower(0, 1, [(TP, leader_state(leader=2, epoch=1, isr=(2, 1)))],
                                                live_leaders(2), {})
    assert answers.value[TP].error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert h.timer.pending == 0


# ------------------------------------------------------------------ produce


def test_acks_all_with_a_single_replica_answers_at_once(h: Harness) -> None:
    h.lead()
    answers = produce(h, batch(3), acks=-1)
    response = answers.value[TP]
    assert (response.error, response.base_offset, response.log_start_offset) == (ErrorCode.NONE, 0, 0)
    assert produce(h, batch(2), acks=1).value[TP].base_offset == 3
    assert h.replica_manager.delayed_produce_purgatory.watched() == 0


def test_acks_all_waits_for_the_follower_and_its_fetch_completes_it(h: Harness) -> None:
    h.lead(isr=(1, 2))
    answers = produce(h, batch(3), acks=-1)
    assert not answers.calls and h.replica_manager.delayed_produce_purgatory.watched() == 1
    # The follower fetches what was appended: not enough, its LEO is still 0.
    follower = consumer_fetch(h, 0, replica_id=2)
    assert only(follower.value).size > 0 and not answers.calls
    # Its next fetch, from offset 3, says it has everything: the HW moves, the produce completes.
    consumer_fetch(h, 3, replica_id=2, max_wait_ms=0)
    assert answers.value[TP].error is ErrorCode.NONE
    assert h.replica_manager.high_watermark(TP) == 3


def test_acks_all_times_out_with_request_timed_out(h: Harness) -> None:
    h.lead(isr=(1, 2))
    answers = produce(h, batch(1), acks=-1, timeout_ms=300)
    h.timer.advance(299)
    assert not answers.calls
    h.timer.advance(1)
    assert answers.value[TP].error is ErrorCode.REQUEST_TIMED_OUT


@pytest.mark.parametrize("acks", [2, -2, 100])
def test_invalid_acks(h: Harness, acks: int) -> None:
    h.lead()
    assert produce(h, batch(1), acks=acks).value[TP].error is ErrorCode.INVALID_REQUIRED_ACKS
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and partition.log is not None and partition.log.log_end_offset == 0


def corrupt(records: bytes) -> bytes:
    damaged = bytearray(records)
    damaged[CRC_POS] ^= 0xFF
    return bytes(damaged)


@pytest.mark.parametrize(("records", "code"), [
    (b"", ErrorCode.INVALID_RECORD),
    (b"\x00" * 10, ErrorCode.CORRUPT_MESSAGE),
    (corrupt(batch(2)), ErrorCode.CORRUPT_MESSAGE),
    (batch(1, value_size=2_000_000), ErrorCode.MESSAGE_TOO_LARGE),
])
def test_bad_records_get_a_precise_error_and_nothing_is_written(h: Harness, records: bytes, code: ErrorCode) -> None:
    h.lead()
    response: ProducePartitionResponse = produce(h, records, acks=1).value[TP]
    assert response.error is code and response.base_offset == -1
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and partition.log is not None and partition.log.log_end_offset == 0


def test_not_leader_and_unknown_partition(h: Harness) -> None:
    h.replica_manager.become_leader_or_follower(0, 1, [(TP, leader_state(leader=2, isr=(2, 1)))], live_leaders(2), {})
    h.replica_manager.maybe_update_metadata_cache(0, 1, [(OTHER, metadata_state(2, isr=(2,)))], [live_broker(2)])
    assert produce(h, batch(1), acks=1).value[TP].error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    # Known to the cluster but not hosted here: the client's metadata is stale.
    assert produce(h, batch(1), acks=1, tp=OTHER).value[OTHER].error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    unknown = TopicPartition("nope", 0)
    assert produce(h, batch(1), acks=1, tp=unknown).value[unknown].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# ------------------------------------------------------------------ fetch


def test_long_poll_is_completed_by_a_produce_not_by_the_timeout(h: Harness) -> None:
    h.lead()
    answers = consumer_fetch(h, 0, min_bytes=1, max_wait_ms=500)
    assert not answers.calls and h.replica_manager.delayed_fetch_purgatory.watched() == 1
    produce(h, batch(4), acks=1)
    result = only(answers.value)
    assert result.error is ErrorCode.NONE and result.size > 0 and result.high_watermark == 4
    assert h.timer.pending == 0


def test_long_poll_waits_for_min_bytes(h: Harness) -> None:
    h.lead()
    one_batch = len(batch(1))
    answers = consumer_fetch(h, 0, min_bytes=3 * one_batch, max_wait_ms=500)
    produce(h, batch(1), acks=1)
    produce(h, batch(1), acks=1)
    assert not answers.calls
    produce(h, batch(1), acks=1)
    assert only(answers.value).size == 3 * one_batch


def test_long_poll_times_out_empty(h: Harness) -> None:
    h.lead()
    answers = consumer_fetch(h, 0, max_wait_ms=500)
    h.timer.advance(500)
    result = only(answers.value)
    assert result.error is ErrorCode.NONE and result.size == 0


def test_consumer_long_poll_ignores_appends_below_the_high_watermark_move(h: Harness) -> None:
    h.lead(isr=(1, 2))
    answers = consumer_fetch(h, 0, max_wait_ms=500)
    produce(h, batch(2), acks=1)
    assert not answers.calls  # appended, but not committed: nothing a consumer may read
    consumer_fetch(h, 2, replica_id=2, max_wait_ms=0)
    assert only(answers.value).size > 0


def test_fetch_out_of_range_carries_the_valid_range(h: Harness) -> None:
    h.lead()
    produce(h, batch(5), acks=1)
    for offset in (-1, 6, 1 << 40):
        result = only(consumer_fetch(h, offset).value)
        assert result.error is ErrorCode.OFFSET_OUT_OF_RANGE
        assert (result.log_start_offset, result.high_watermark) == (0, 5)


def test_consumers_cannot_fetch_from_a_follower(h: Harness) -> None:
    h.replica_manager.become_leader_or_follower(0, 1, [(TP, leader_state(leader=2, isr=(2, 1)))], live_leaders(2), {})
    assert only(consumer_fetch(h, 0).value).error is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_kip_74_first_batch_comes_whole_even_past_max_bytes(h: Harness) -> None:
    h.lead()
    produce(h, batch(3, value_size=500), acks=1)
    answers = Answers()
    params = FetchParams(-1, 0, 1, 10, FetchIsolation.HIGH_WATERMARK, True)
    infos = [PartitionFetchInfo(TP, 0, -1, 10, -1)]
    h.replica_manager.fetch_messages(params, infos, answers)
    assert only(answers.value).size == len(batch(3, value_size=500))


# ------------------------------------------------------------------ StopReplica, UpdateMetadata, checkpoints


def test_stop_replica_with_delete_removes_the_log_and_answers_waiters(h: Harness) -> None:
    h.lead()
    waiting = consumer_fetch(h, 0, max_wait_ms=500)
    result = h.replica_manager.stop_replicas(0, 1, True, [TP])
    assert result.partition_errors == {TP: ErrorCode.NONE}
    assert h.log_manager.get_log(TP) is None and h.replica_manager.get_partition(TP) is None
    # Still in the metadata cache, no longer hosted here.
    assert only(waiting.value).error is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_stop_replica_deleting_many_logs_checkpoints_their_offsets_once(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    # Kafka 2.7's batched asyncDelete (KAFKA-10002): one checkpoint for the whole request, not one per deleted log,
    # which rewrote and fsynced every remaining log's entries once per deletion.
    doomed = [TopicPartition("orders", p) for p in range(5)]
    kept = TopicPartition("audit", 0)
    h.replica_manager.become_leader_or_follower(
        0, 1, [(tp, leader_state(LOCAL, 1, (LOCAL,))) for tp in [*doomed, kept]], live_leaders(), {})
    checkpoints: list[int] = []
    checkpoint = h.log_manager.checkpoint_log_offsets
    monkeypatch.setattr(h.log_manager, "checkpoint_log_offsets",
                        lambda: (checkpoints.append(1), checkpoint())[-1])
    result = h.replica_manager.stop_replicas(0, 1, True, doomed)
    assert result.partition_errors == dict.fromkeys(doomed, ErrorCode.NONE)
    assert checkpoints == [1]
    assert all(h.log_manager.get_log(tp) is None for tp in doomed) and h.log_manager.get_log(kept) is not None
    log_dir = h.log_manager.log_dir_of(kept)
    assert log_dir is not None
    assert OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read().keys() == {kept}


def test_stale_stop_replica_and_update_metadata(h: Harness) -> None:
    h.lead(controller_epoch=3)
    assert h.replica_manager.stop_replicas(0, 2, True, [TP]).error is ErrorCode.STALE_CONTROLLER_EPOCH
    assert h.log_manager.get_log(TP) is not None
    assert h.replica_manager.maybe_update_metadata_cache(0, 2, [], []) is ErrorCode.STALE_CONTROLLER_EPOCH
    assert h.metadata_cache.contains(TP)


def test_high_watermarks_are_checkpointed_only_once_partitions_are_hosted(h: Harness) -> None:
    h.log_manager.get_or_create_log(TP).append_as_leader(batch(10), 0)
    h.log_manager.write_high_watermarks([(TP, 7)])
    h.replica_manager.checkpoint_high_watermarks()  # no LeaderAndIsr yet: the file is left alone
    assert h.log_manager.read_high_watermarks() == {TP: 7}
    h.replica_manager.become_leader_or_follower(0, 1, [(TP, leader_state(leader=2, isr=(2, 1)))], live_leaders(2), {})
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and partition.high_watermark == 7
    h.replica_manager.checkpoint_high_watermarks()
    assert h.log_manager.read_high_watermarks() == {TP: 7}


def test_leadership_listeners_hear_of_new_leaders_and_resignations(h: Harness) -> None:
    """Kafka's onLeadershipChange: the group coordinator loads and drops __consumer_offsets partitions on it."""
    heard: list[tuple[list[tuple[TopicPartition, int]], list[tuple[TopicPartition, int | None]]]] = []
    h.replica_manager.add_leadership_listener(lambda leaders, resigned: heard.append((list(leaders), list(resigned))))
    other = TopicPartition("orders", 1)
    h.replica_manager.become_leader_or_follower(
        0, 1, [(TP, leader_state(LOCAL, 3, (LOCAL, 2), replicas=(LOCAL, 2))),
               (other, leader_state(2, 5, (LOCAL, 2), replicas=(LOCAL, 2)))], live_leaders(LOCAL, 2), {})
    assert heard == [([(TP, 3)], [(other, 5)])]
    # A stale request changes nothing, and says nothing.
    h.replica_manager.become_leader_or_follower(0, 1, [(TP, leader_state(LOCAL, 3))], live_leaders(LOCAL), {})
    assert len(heard) == 1
    h.replica_manager.stop_replicas(0, 1, False, [TP])
    assert heard[-1] == ([], [(TP, None)])


# ------------------------------------------------------------------ the ISR


class CountingExecutor(InlineExecutor):
    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def test_a_follower_fetch_brings_its_partitions_back_into_the_isr_in_one_task_waking_nothing(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a new topic's ISRs shrank while its followers created their logs, each follower's next fetch brings
    thousands back: one task for the fetch, and no waiting request woken where the high watermark did not move
    (each wake had the follower's own parked fetch check every partition of its session: quadratic)."""
    tps = [TopicPartition("orders", p) for p in range(3)]
    result = h.replica_manager.become_leader_or_follower(
        0, 1, [(tp, leader_state(isr=(LOCAL,), replicas=(LOCAL, 2))) for tp in tps], live_leaders(LOCAL), {})
    assert all(error is ErrorCode.NONE for error in result.partition_errors.values())
    executor = CountingExecutor()
    monkeypatch.setattr(h.replica_manager, "_isr_update_executor", executor)
    woken: list[TopicPartition] = []
    monkeypatch.setattr(h.replica_manager, "_complete_delayed_requests", woken.append)
    answers = Answers()
    h.replica_manager.fetch_messages(FetchParams(2, 0, 1, 1 << 20, FetchIsolation.LOG_END, True),
                                     [PartitionFetchInfo(tp, 0, -1, 1 << 20, -1) for tp in tps], answers)
    assert len(answers.value) == 3
    partitions = [h.replica_manager.get_partition(tp) for tp in tps]
    assert [p.in_sync_replica_ids if p else None for p in partitions] == [frozenset({LOCAL, 2})] * 3
    assert executor.submitted == 1
    assert woken == []

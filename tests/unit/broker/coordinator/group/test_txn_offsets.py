"""Transactional offset commits in the group coordinator (KIP-98, KIP-447; Kafka 2.8's GroupMetadata
pendingTransactionalOffsetCommits, GroupMetadataManager storeOffsets with a producer id, handleTxnCompletion and
the load's handling of transactional batches and markers), with __consumer_offsets as a log in memory and a
hand-driven clock."""

from __future__ import annotations

import asyncio
import threading

import pytest

from broker.coordinator.group.group_metadata_manager import LoadedPartition
from broker.coordinator.group.results import OffsetAndMetadata
from common.record import iter_batches
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.unit.broker.coordinator.group.test_group_coordinator import (
    GROUP,
    PARTITION,
    TOPIC_TP,
    Harness,
    MemoryLog,
    commit,
    run,
)

PRODUCER, OTHER_PRODUCER = 7000, 7001
OTHER_TP = TopicPartition("orders", 1)


async def txn_commit(h: Harness, offset: int, producer_id: int = PRODUCER, tp: TopicPartition = TOPIC_TP,
                     member_id: str = "", instance: str | None = None, generation: int = -1, epoch: int = 0
                     ) -> dict[TopicPartition, ErrorCode]:
    return await h.coordinator.txn_commit_offsets(GROUP, producer_id, epoch, member_id, instance, generation,
                                                  {tp: OffsetAndMetadata(offset, 3, "txn", h.clock.now)})


async def fetched(h: Harness, require_stable: bool = False,
                  partitions: tuple[TopicPartition, ...] = (TOPIC_TP,)) -> dict[TopicPartition, tuple[int, ErrorCode]]:
    result = await h.coordinator.fetch_offsets(GROUP, list(partitions), require_stable)
    assert result.error is ErrorCode.NONE
    return {tp: (o.offset, o.error) for tp, o in result.offsets.items()}


def marker(h: Harness, producer_id: int, commit: bool) -> None:
    """What WriteTxnMarkers does on the group's partition: the marker appended, then the coordinator told."""
    h.log.write_marker(PARTITION, producer_id, commit)
    h.coordinator.handle_txn_completion(producer_id, [PARTITION], commit)


def test_txn_offsets_are_a_transactional_batch_of_the_producer_pending_until_the_commit_marker() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        assert await commit(h, "", -1, 5) == {TOPIC_TP: ErrorCode.NONE}
        assert await txn_commit(h, 9, epoch=2) == {TOPIC_TP: ErrorCode.NONE}
        [batch] = iter_batches(h.log.batches[PARTITION][-1])
        assert (batch.header.producer_id, batch.header.producer_epoch, batch.header.is_transactional,
                batch.header.base_sequence) == (PRODUCER, 2, True, 0)
        # Not committed yet: OffsetFetch answers the last committed offset, or with require_stable that it is
        # unstable (KIP-447).
        assert await fetched(h) == {TOPIC_TP: (5, ErrorCode.NONE)}
        assert await fetched(h, require_stable=True) == {TOPIC_TP: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)}
        marker(h, PRODUCER, commit=True)
        assert await fetched(h, require_stable=True) == {TOPIC_TP: (9, ErrorCode.NONE)}

    run(scenario)


def test_an_abort_marker_drops_the_pending_offsets() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        assert await commit(h, "", -1, 5) == {TOPIC_TP: ErrorCode.NONE}
        assert await txn_commit(h, 9) == {TOPIC_TP: ErrorCode.NONE}
        marker(h, PRODUCER, commit=False)
        assert await fetched(h, require_stable=True) == {TOPIC_TP: (5, ErrorCode.NONE)}
        assert not h.manager.get_group(GROUP).has_pending_offset_commits_from_producer(PRODUCER)

    run(scenario)


def test_a_marker_completes_only_its_producers_offsets_on_the_partitions_it_reached() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        assert await txn_commit(h, 10) == {TOPIC_TP: ErrorCode.NONE}
        assert await txn_commit(h, 20, OTHER_PRODUCER, OTHER_TP) == {OTHER_TP: ErrorCode.NONE}
        h.coordinator.handle_txn_completion(PRODUCER, [PARTITION + 1], True)  # another partition's marker
        both = (TOPIC_TP, OTHER_TP)
        unstable = (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        assert await fetched(h, True, both) == {TOPIC_TP: unstable, OTHER_TP: unstable}
        marker(h, PRODUCER, commit=True)
        assert await fetched(h, True, both) == {TOPIC_TP: (10, ErrorCode.NONE), OTHER_TP: unstable}
        marker(h, OTHER_PRODUCER, commit=True)
        assert await fetched(h, True, both) == {TOPIC_TP: (10, ErrorCode.NONE), OTHER_TP: (20, ErrorCode.NONE)}

    run(scenario)


def test_a_plain_commit_appended_after_the_transactional_one_wins_at_the_commit_marker() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        assert await txn_commit(h, 9) == {TOPIC_TP: ErrorCode.NONE}
        assert await commit(h, "", -1, 12) == {TOPIC_TP: ErrorCode.NONE}
        marker(h, PRODUCER, commit=True)  # Kafka's olderThan: the record further in the log is the offset
        assert await fetched(h) == {TOPIC_TP: (12, ErrorCode.NONE)}
        reloaded = Harness(h.log, h.clock)
        await reloaded.own_partition()
        assert await fetched(reloaded) == {TOPIC_TP: (12, ErrorCode.NONE)}

    run(scenario)


def test_a_failed_append_leaves_nothing_pending() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        h.log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert await txn_commit(h, 9) == {TOPIC_TP: ErrorCode.NOT_COORDINATOR}
        assert await fetched(h, require_stable=True) == {TOPIC_TP: (-1, ErrorCode.NONE)}
        assert not h.manager.get_group(GROUP).has_pending_offset_commits_from_producer(PRODUCER)

    run(scenario)


@pytest.mark.parametrize(("member", "instance", "generation", "error"), [
    ("stranger", None, 1, ErrorCode.UNKNOWN_MEMBER_ID),
    (None, None, 0, ErrorCode.ILLEGAL_GENERATION),
    ("zombie", "static-1", 1, ErrorCode.FENCED_INSTANCE_ID),
    (None, None, 1, ErrorCode.NONE),
    ("", None, -1, ErrorCode.NONE),  # v0-v2: no member, no generation: nothing to check
])
def test_txn_offset_commit_v3_fences_a_stale_member_as_kafka(member: str | None, instance: str | None,
                                                             generation: int, error: ErrorCode) -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        joining = h.join(instance="static-1")
        await h.initial_delays(1)
        joined = joining.result()
        sync = h.sync(joined.member_id, joined.generation_id, {joined.member_id: b"a"}, "static-1")
        await h.advance(0)
        assert sync.result().error is ErrorCode.NONE and joined.generation_id == 1
        member_id = joined.member_id if member is None else member
        assert await txn_commit(h, 4, member_id=member_id, instance=instance, generation=generation) == {
            TOPIC_TP: error}

    run(scenario)


def test_unknown_partitions_and_a_group_elsewhere_get_kafkas_errors() -> None:
    async def scenario() -> None:
        h = Harness()
        assert await txn_commit(h, 4) == {TOPIC_TP: ErrorCode.NOT_COORDINATOR}
        await h.own_partition()
        missing = TopicPartition("missing", 0)
        assert await txn_commit(h, 4, tp=missing) == {missing: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

    run(scenario)


# ------------------------------------------------------------------ loading (immigration, restart)


def test_a_load_applies_committed_drops_aborted_and_keeps_open_transactions_pending() -> None:
    async def scenario() -> None:
        old = Harness()
        await old.own_partition()
        committed, aborted, open_ = 7000, 7001, 7002
        assert await txn_commit(old, 10, committed) == {TOPIC_TP: ErrorCode.NONE}
        assert await txn_commit(old, 66, aborted, OTHER_TP) == {OTHER_TP: ErrorCode.NONE}
        assert await txn_commit(old, 30, open_, OTHER_TP) == {OTHER_TP: ErrorCode.NONE}
        old.log.write_marker(PARTITION, committed, commit=True)
        old.log.write_marker(PARTITION, aborted, commit=False)
        new = Harness(old.log, old.clock)
        await new.own_partition()
        both = (TOPIC_TP, OTHER_TP)
        assert await fetched(new, False, both) == {TOPIC_TP: (10, ErrorCode.NONE), OTHER_TP: (-1, ErrorCode.NONE)}
        assert await fetched(new, True, both) == {TOPIC_TP: (10, ErrorCode.NONE),
                                                  OTHER_TP: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)}
        # The open transaction's marker, written after the load, completes it on the new coordinator.
        marker(new, open_, commit=True)
        assert await fetched(new, True, both) == {TOPIC_TP: (10, ErrorCode.NONE), OTHER_TP: (30, ErrorCode.NONE)}

    run(scenario)


def test_reading_a_partition_log_keeps_each_producers_offsets_apart_until_its_marker() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        assert await commit(h, "", -1, 1) == {TOPIC_TP: ErrorCode.NONE}
        assert await txn_commit(h, 2, PRODUCER) == {TOPIC_TP: ErrorCode.NONE}
        assert await txn_commit(h, 3, OTHER_PRODUCER) == {TOPIC_TP: ErrorCode.NONE}
        log: MemoryLog = h.log
        loaded = log.read_log(TopicPartition("__consumer_offsets", PARTITION), 1 << 20)
        assert {k: (o, v.offset if v else None) for k, (o, v) in loaded.offsets.items()} == {(GROUP, TOPIC_TP): (0, 1)}
        assert {pid: {k: v.offset for k, (_, v) in offsets.items() if v} for pid, offsets in loaded.pending.items()} \
            == {PRODUCER: {(GROUP, TOPIC_TP): 2}, OTHER_PRODUCER: {(GROUP, TOPIC_TP): 3}}
        log.write_marker(PARTITION, OTHER_PRODUCER, commit=True)
        log.write_marker(PARTITION, PRODUCER, commit=True)  # older than the other's: loses, as Kafka's olderThan
        loaded = log.read_log(TopicPartition("__consumer_offsets", PARTITION), 1 << 20)
        assert loaded.pending == {}
        assert {k: (o, v.offset if v else None) for k, (o, v) in loaded.offsets.items()} == {(GROUP, TOPIC_TP): (2, 3)}

    run(scenario)


class GatedLog(MemoryLog):
    """A log whose load read waits, after reading, until the test lets it finish: a marker can land between
    the read and the install."""

    def __init__(self, log: MemoryLog) -> None:
        super().__init__()
        self.batches, self.next_offset = log.batches, log.next_offset
        self.read = threading.Event()
        self.release = threading.Event()

    def read_log(self, tp: TopicPartition, buffer_size: int) -> LoadedPartition:
        loaded = super().read_log(tp, buffer_size)
        self.read.set()
        assert self.release.wait(30), "the test never released the load"
        return loaded


def test_a_marker_acknowledged_while_the_partition_loads_completes_the_loaded_offsets() -> None:
    """The new leader read the log before the marker landed: the completion waits for the load's end, as Kafka
    runs loads and completions on one thread (else the offsets stayed pending for good)."""
    async def scenario() -> None:
        old = Harness()
        await old.own_partition()
        assert await txn_commit(old, 10) == {TOPIC_TP: ErrorCode.NONE}
        log = GatedLog(old.log)
        new = Harness(log, old.clock)
        new.coordinator.on_election(PARTITION, 1)
        while not log.read.is_set():
            await asyncio.sleep(0.001)  # the load reads in a worker thread
        marker(new, PRODUCER, commit=True)
        assert (await new.coordinator.fetch_offsets(GROUP, [TOPIC_TP])).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        log.release.set()
        while new.manager.is_loading():
            await asyncio.sleep(0.001)
        assert await fetched(new, require_stable=True) == {TOPIC_TP: (10, ErrorCode.NONE)}

    run(scenario)

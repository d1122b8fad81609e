"""broker/coordinator/transaction/transaction_coordinator.py and transaction_marker_channel.py on __transaction_state
in memory, brokers that answer WriteTxnMarkers from a table, and a clock only the test moves: InitProducerId's epochs
and fencing, AddPartitionsToTxn, EndTxn answered once the Prepare state is durable, markers batched per broker and
retried through leader changes, completion, the next transaction's AddPartitionsToTxn waiting for it, a new
coordinator finishing a Prepare state, timed-out transactions."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from broker.coordinator.transaction import transaction_log
from broker.coordinator.transaction.transaction_coordinator import (
    PREVIOUS_TRANSACTION_WAIT_MS,
    InitProducerIdResult,
    TransactionCoordinator,
)
from broker.coordinator.transaction.transaction_marker_channel import (
    TransactionMarkerChannelManager,
    WritableTxnMarker,
)
from broker.coordinator.transaction.transaction_metadata import TransactionState
from broker.coordinator.transaction.transaction_state_manager import (
    CoordinatorEpochAndTxnMetadata,
    TransactionConfig,
    TransactionStateManager,
    partition_for,
)
from common.record import iter_batches
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.fakes import FakeClock
from tests.unit.broker.coordinator.transaction.test_transaction_state_manager import MemoryLog

T = TypeVar("T")
NUM_PARTITIONS = 4
TID = "txn-a"
PARTITION = partition_for(TID, NUM_PARTITIONS)
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
S = TransactionState


class Brokers:
    """The partitions' leaders and what each broker answers; every WriteTxnMarkers request recorded."""

    def __init__(self) -> None:
        self.leaders = {A0: 1, A1: 2, B0: 1}
        self.requests: list[tuple[int, list[WritableTxnMarker]]] = []
        self.answer: dict[tuple[int, TopicPartition], list[ErrorCode]] = {}
        self.written: list[tuple[int, WritableTxnMarker]] = []

    async def send(self, broker: int, markers: Sequence[WritableTxnMarker]) -> list[dict[TopicPartition, ErrorCode]]:
        self.requests.append((broker, list(markers)))
        answers = []
        for marker in markers:
            errors = {}
            for tp in marker.partitions:
                queued = self.answer.get((broker, tp))
                errors[tp] = queued.pop(0) if queued else ErrorCode.NONE
            if all(e is ErrorCode.NONE for e in errors.values()):
                self.written.append((broker, marker))
            answers.append(errors)
        return answers


class Harness:
    def __init__(self, log: MemoryLog | None = None, clock: FakeClock | None = None) -> None:
        self.log = log or MemoryLog()
        self.clock = clock or FakeClock()
        self.brokers = Brokers()
        self.sleeps: list[float] = []
        # The coordinator's bounded waits for a previous transaction: recorded, and over when the test says so.
        self.waits: list[float] = []
        self.wait_over = asyncio.Event()
        self.next_producer_id = 1000
        self.manager = TransactionStateManager(1, TransactionConfig(NUM_PARTITIONS, 900_000, 3_600_000, 1024),
                                               self.log.append, self.clock, self.log.read_log)

        async def wait(seconds: float) -> None:
            self.waits.append(seconds)
            await self.wait_over.wait()

        self.coordinator = TransactionCoordinator(1, self.manager, self._generate, self.clock, sleep=wait)

        async def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)
            await asyncio.sleep(0)

        self.coordinator.bind_marker_channel(TransactionMarkerChannelManager(
            self.brokers.leaders.get, lambda topic: topic in {"a", "b"}, self.brokers.send,
            self.coordinator.is_current, self.coordinator.complete_transaction, 100, sleep))

    def _generate(self) -> int:
        self.next_producer_id += 1
        return self.next_producer_id

    async def elected(self, epoch: int = 5) -> None:
        await self.coordinator.on_election(PARTITION, epoch)

    def state(self, tid: str = TID) -> Any:
        current = self.manager.get_transaction_state(tid)
        assert isinstance(current, CoordinatorEpochAndTxnMetadata)
        return current.transaction_metadata

    def logged_states(self) -> list[S]:
        states = []
        for _, value in self.log.records(PARTITION):
            metadata = transaction_log.read_txn_record_value(TID, value)
            assert metadata is not None
            states.append(metadata.state)
        return states

    async def init(self, expected: tuple[int, int] | None = None, timeout_ms: int = 60_000) -> InitProducerIdResult:
        return await self.coordinator.handle_init_producer_id(TID, timeout_ms, expected)


def same_partition(prefix: str) -> str:
    """An id of the partition the tests' coordinator leads."""
    return next(t for i in range(200) if partition_for(t := f"{prefix}-{i}", NUM_PARTITIONS) == PARTITION)


async def settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


def run(scenario: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(scenario)


def test_init_producer_id_assigns_an_id_and_bumps_the_epoch_on_every_init() -> None:
    async def scenario() -> None:
        h = Harness()
        assert (await h.init()).error is ErrorCode.NOT_COORDINATOR
        await h.elected()
        first = await h.init()
        assert (first.producer_id, first.producer_epoch, first.error) == (1001, 0, ErrorCode.NONE)
        second = await h.init()
        assert (second.producer_id, second.producer_epoch) == (1001, 1)
        assert h.logged_states() == [S.EMPTY, S.EMPTY]
        assert (await h.init(timeout_ms=900_001)).error is ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert (await h.coordinator.handle_init_producer_id("", 1000, None)).error is ErrorCode.INVALID_REQUEST
    run(scenario())


def test_a_commit_is_answered_once_prepare_commit_is_durable_then_markers_then_complete() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.elected()
        pid = await h.init()
        assert await h.coordinator.handle_add_partitions_to_transaction(TID, pid.producer_id, 0, [A0, A1, B0]) \
            is ErrorCode.NONE
        # Adding what is already in the transaction appends nothing.
        assert await h.coordinator.handle_add_partitions_to_transaction(TID, pid.producer_id, 0, [A0]) \
            is ErrorCode.NONE
        assert h.logged_states() == [S.EMPTY, S.ONGOING]
        assert await h.coordinator.handle_end_transaction(TID, pid.producer_id, 0, commit=True) is ErrorCode.NONE
        assert h.logged_states() == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT]
        await settle()
        # One request per broker, one marker per transaction with its partitions there, the coordinator epoch on it.
        assert sorted(h.brokers.requests, key=lambda r: r[0]) == [
            (1, [WritableTxnMarker(1001, 0, True, 5, (A0, B0))]),
            (2, [WritableTxnMarker(1001, 0, True, 5, (A1,))])]
        assert h.logged_states() == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
        assert (h.state().state, h.state().topic_partitions) == (S.COMPLETE_COMMIT, set())
        # A retried EndTxn of the completed commit is answered NONE; an abort of it is INVALID_TXN_STATE.
        assert await h.coordinator.handle_end_transaction(TID, pid.producer_id, 0, commit=True) is ErrorCode.NONE
        assert await h.coordinator.handle_end_transaction(TID, pid.producer_id, 0, commit=False) \
            is ErrorCode.INVALID_TXN_STATE
    run(scenario())


def test_end_txn_on_an_empty_transaction_and_unknown_producers_are_refused() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.elected()
        pid = await h.init()
        assert await h.coordinator.handle_end_transaction(TID, pid.producer_id, 0, commit=True) \
            is ErrorCode.INVALID_TXN_STATE
        assert await h.coordinator.handle_end_transaction(TID, 7, 0, commit=True) \
            is ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert await h.coordinator.handle_add_partitions_to_transaction(same_partition("unknown"), 7, 0, [A0]) \
            is ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert await h.coordinator.handle_add_partitions_to_transaction(TID, pid.producer_id, 3, [A0]) \
            is ErrorCode.PRODUCER_FENCED
    run(scenario())


def test_a_second_producer_fences_the_first_and_its_transaction_is_aborted() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.elected()
        old = await h.init()
        await h.coordinator.handle_add_partitions_to_transaction(TID, old.producer_id, 0, [A0])
        # The new instance's init fences the open transaction: aborted with the bumped epoch, retry meanwhile.
        assert (await h.init()).error is ErrorCode.CONCURRENT_TRANSACTIONS
        await settle()
        assert h.brokers.written == [(1, WritableTxnMarker(1001, 1, False, 5, (A0,)))]
        assert h.logged_states() == [S.EMPTY, S.ONGOING, S.PREPARE_ABORT, S.COMPLETE_ABORT]
        new = await h.init()
        assert (new.producer_id, new.producer_epoch, new.error) == (1001, 2, ErrorCode.NONE)
        # The old producer is fenced.
        assert await h.coordinator.handle_end_transaction(TID, old.producer_id, 0, commit=True) \
            is ErrorCode.PRODUCER_FENCED
        assert await h.coordinator.handle_add_partitions_to_transaction(TID, old.producer_id, 0, [A0]) \
            is ErrorCode.PRODUCER_FENCED
    run(scenario())


def test_kip_360_an_init_with_the_current_epoch_bumps_and_a_stale_one_is_fenced() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.elected()
        first = await h.init()
        bumped = await h.init(expected=(first.producer_id, first.producer_epoch))
        assert (bumped.producer_id, bumped.producer_epoch, bumped.error) == (1001, 1, ErrorCode.NONE)
        assert h.state().last_producer_epoch == 0
        # Its retry (the answer was lost) gets the same epoch.
        retry = await h.init(expected=(first.producer_id, first.producer_epoch))
        assert (retry.producer_epoch, retry.error) == (1, ErrorCode.NONE)
        assert (await h.init(expected=(999, 0))).error is ErrorCode.PRODUCER_FENCED
    run(scenario())


def test_markers_are_retried_through_a_leader_change() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.elected()
        pid = await h.init()
        await h.coordinator.handle_add_partitions_to_transaction(TID, pid.producer_id, 0, [A1])
        h.brokers.answer[(2, A1)] = [ErrorCode.NOT_LEADER_OR_FOLLOWER]

        async def move_leader() -> None:
            while not h.brokers.requests:
                await asyncio.sleep(0)
            h.brokers.leaders[A1] = 3

        mover = asyncio.create_task(move_leader())
        assert await h.coordinator.handle_end_transaction(TID, pid.producer_id, 0, commit=False) is ErrorCode.NONE
        await mover
        await settle()
        assert [b for b, _ in h.brokers.requests] == [2, 3]
        assert h.sleeps == [0.1]  # retry.backoff.ms between the rounds
        assert h.logged_states()[-1] is S.COMPLETE_ABORT
    run(scenario())


def test_markers_wait_for_a_partition_without_a_leader() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.elected()
        pid = await h.init()
        await h.coordinator.handle_add_partitions_to_transaction(TID, pid.producer_id, 0, [A0])
        del h.brokers.leaders[A0]
        await h.coordinator.handle_end_transaction(TID, pid.producer_id, 0, commit=True)
        await settle()
        assert h.brokers.requests == [] and h.state().state is S.PREPARE_COMMIT
        h.brokers.leaders[A0] = 2
        await settle()
        assert h.brokers.written == [(2, WritableTxnMarker(1001, 0, True, 5, (A0,)))]
        assert h.state().state is S.COMPLETE_COMMIT
    run(scenario())


async def committing_with_markers_held(h: Harness) -> int:
    """A producer whose commit is answered while its marker cannot go out (A0 has no leader); its producer id."""
    await h.elected()
    pid = await h.init()
    await h.coordinator.handle_add_partitions_to_transaction(TID, pid.producer_id, 0, [A0])
    del h.brokers.leaders[A0]
    assert await h.coordinator.handle_end_transaction(TID, pid.producer_id, 0, commit=True) is ErrorCode.NONE
    await settle()
    assert h.state().state is S.PREPARE_COMMIT
    return pid.producer_id


def test_the_next_transactions_add_partitions_waits_for_the_previous_ones_completion() -> None:
    async def scenario() -> None:
        h = Harness()
        producer_id = await committing_with_markers_held(h)
        # Kafka answers CONCURRENT_TRANSACTIONS here and the client retries after a backoff; this waits instead.
        adding = asyncio.create_task(h.coordinator.handle_add_partitions_to_transaction(TID, producer_id, 0, [A1]))
        await settle()
        assert not adding.done() and h.waits == [PREVIOUS_TRANSACTION_WAIT_MS / 1000]
        h.brokers.leaders[A0] = 1  # the marker goes, CompleteCommit is appended, the new transaction starts
        await settle()
        assert adding.done() and adding.result() is ErrorCode.NONE
        assert h.logged_states() == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT, S.ONGOING]
        assert (h.state().state, h.state().topic_partitions) == (S.ONGOING, {A1})
    run(scenario())


def test_the_waiting_next_transaction_starts_in_the_completions_own_append() -> None:
    async def scenario() -> None:
        h = Harness()
        producer_id = await committing_with_markers_held(h)
        appends = len(h.log.batches[PARTITION])
        # The next transaction's AddPartitionsToTxn and AddOffsetsToTxn (the group's offsets partition) both wait.
        adding = [asyncio.create_task(h.coordinator.handle_add_partitions_to_transaction(TID, producer_id, 0, tps))
                  for tps in ([A1], [B0])]
        await settle()
        h.brokers.leaders[A0] = 1
        await settle()
        assert [a.result() for a in adding] == [ErrorCode.NONE, ErrorCode.NONE]
        # One batch, one replication round trip: CompleteCommit, then the next transaction's Ongoing with both.
        [together] = h.log.batches[PARTITION][appends:]
        values = [transaction_log.read_txn_record_value(TID, r.value) for b in iter_batches(together)
                  for r in b.records if r.value is not None]
        assert [(v.state, v.topic_partitions) for v in values if v is not None] == [
            (S.COMPLETE_COMMIT, set()), (S.ONGOING, {A1, B0})]
        txn = h.state()
        assert (txn.state, txn.topic_partitions, txn.pending_state) == (S.ONGOING, {A1, B0}, None)
        assert txn.txn_start_timestamp == h.clock()
        # The new transaction goes on as any other: committed, its markers written, completed.
        assert await h.coordinator.handle_end_transaction(TID, producer_id, 0, commit=True) is ErrorCode.NONE
        await settle()
        assert h.logged_states()[-2:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    run(scenario())


def test_a_next_transaction_that_gave_up_waiting_is_not_started_by_the_completion() -> None:
    async def scenario() -> None:
        h = Harness()
        producer_id = await committing_with_markers_held(h)
        adding = asyncio.create_task(h.coordinator.handle_add_partitions_to_transaction(TID, producer_id, 0, [A1]))
        await settle()
        h.wait_over.set()
        await settle()
        assert adding.result() is ErrorCode.CONCURRENT_TRANSACTIONS
        h.brokers.leaders[A0] = 1
        await settle()
        # The client was told to retry: the completion starts nothing it did not ask for again.
        assert h.logged_states()[-1] is S.COMPLETE_COMMIT
        assert (h.state().state, h.state().topic_partitions) == (S.COMPLETE_COMMIT, set())
    run(scenario())


def test_add_partitions_still_blocked_after_the_wait_is_told_concurrent_transactions() -> None:
    async def scenario() -> None:
        h = Harness()
        producer_id = await committing_with_markers_held(h)
        # A fenced producer's request is answered at once, without waiting for anything.
        assert await h.coordinator.handle_add_partitions_to_transaction(TID, producer_id, 1, [A1]) \
            is ErrorCode.PRODUCER_FENCED
        assert h.waits == []
        adding = asyncio.create_task(h.coordinator.handle_add_partitions_to_transaction(TID, producer_id, 0, [A1]))
        await settle()
        assert not adding.done()
        h.wait_over.set()  # PREVIOUS_TRANSACTION_WAIT_MS passes with the marker still held
        await settle()
        assert adding.done() and adding.result() is ErrorCode.CONCURRENT_TRANSACTIONS
        assert h.state().state is S.PREPARE_COMMIT
    run(scenario())


def test_a_coordinator_that_resigns_answers_the_waiting_add_partitions_at_once() -> None:
    async def scenario() -> None:
        h = Harness()
        producer_id = await committing_with_markers_held(h)
        adding = asyncio.create_task(h.coordinator.handle_add_partitions_to_transaction(TID, producer_id, 0, [A1]))
        await settle()
        h.coordinator.on_resignation(PARTITION, 6)
        await settle()
        assert adding.done() and adding.result() is ErrorCode.NOT_COORDINATOR
    run(scenario())


def test_markers_of_transactions_ending_together_share_one_request_per_broker() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.elected()
        other = same_partition("other")
        pids = []
        for tid in (TID, other):
            pid = await h.coordinator.handle_init_producer_id(tid, 60_000, None)
            await h.coordinator.handle_add_partitions_to_transaction(tid, pid.producer_id, 0, [A0])
            pids.append(pid.producer_id)
        await asyncio.gather(*(h.coordinator.handle_end_transaction(tid, pid, 0, commit=True)
                               for tid, pid in zip((TID, other), pids, strict=True)))
        await settle()
        assert h.brokers.requests == [(1, [WritableTxnMarker(pids[0], 0, True, 5, (A0,)),
                                           WritableTxnMarker(pids[1], 0, True, 5, (A0,))])]
    run(scenario())


def test_a_new_coordinator_finishes_a_transaction_left_in_prepare_commit() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.elected()
        pid = await h.init()
        await h.coordinator.handle_add_partitions_to_transaction(TID, pid.producer_id, 0, [A0, A1])
        del h.brokers.leaders[A0], h.brokers.leaders[A1]  # the markers cannot go yet
        assert await h.coordinator.handle_end_transaction(TID, pid.producer_id, 0, commit=True) is ErrorCode.NONE
        h.coordinator.on_resignation(PARTITION, 6)  # the coordinator moves before any marker is written
        h.brokers.leaders.update({A0: 1, A1: 2})
        await settle()
        assert h.brokers.requests == []  # the old coordinator stopped

        successor = Harness(h.log, h.clock)
        await successor.elected(epoch=6)
        await settle()
        assert sorted((b, m.coordinator_epoch, m.partitions) for b, m in successor.brokers.written) == [
            (1, 6, (A0,)), (2, 6, (A1,))]
        assert successor.state().state is S.COMPLETE_COMMIT
        assert successor.logged_states()[-1] is S.COMPLETE_COMMIT
    run(scenario())


def test_a_transaction_past_its_timeout_is_aborted_with_a_bumped_epoch() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.elected()
        pid = await h.init(timeout_ms=10_000)
        await h.coordinator.handle_add_partitions_to_transaction(TID, pid.producer_id, 0, [A0])
        h.clock.advance(10_000)
        await h.coordinator.abort_timed_out_transactions()
        assert h.state().state is S.ONGOING
        h.clock.advance(1)
        await h.coordinator.abort_timed_out_transactions()
        await settle()
        assert h.brokers.written == [(1, WritableTxnMarker(pid.producer_id, 1, False, 5, (A0,)))]
        assert (h.state().state, h.state().producer_epoch) == (S.COMPLETE_ABORT, 1)
        # The producer that let it time out is fenced.
        assert await h.coordinator.handle_end_transaction(TID, pid.producer_id, 0, commit=True) \
            is ErrorCode.PRODUCER_FENCED
    run(scenario())


def test_an_exhausted_epoch_gets_a_new_producer_id_at_epoch_0() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.elected()
        first = await h.init()
        h.state().producer_epoch = 0x7FFE  # as after 32,766 inits
        rotated = await h.init()
        assert (rotated.producer_id, rotated.producer_epoch, rotated.error) == (1002, 0, ErrorCode.NONE)
        assert (h.state().last_producer_id, h.state().producer_id) == (first.producer_id, 1002)
        # KIP-360: the old producer id with its exhausted epoch is still recognised (recorded as the last one).
        h.state().producer_epoch = 0x7FFE
        again = await h.init(expected=(1002, 0x7FFE))
        assert (again.producer_id, again.producer_epoch, h.state().last_producer_epoch) == (1003, 0, 0x7FFE)
    run(scenario())


def test_leadership_of_its_state_partitions_loads_and_unloads_them_and_others_are_ignored() -> None:
    async def scenario() -> None:
        h = Harness()
        state_tp = TopicPartition("__transaction_state", PARTITION)
        h.coordinator.on_leadership_change([(TopicPartition("__consumer_offsets", PARTITION), 3)], [])
        await settle()
        assert h.manager.get_transaction_state(TID) is ErrorCode.NOT_COORDINATOR
        h.coordinator.on_leadership_change([(state_tp, 3)], [])
        await settle()
        assert h.manager.get_transaction_state(TID) is None  # loaded, nothing of the id in it
        h.coordinator.on_leadership_change([], [(state_tp, 3)])
        assert h.manager.get_transaction_state(TID) is ErrorCode.NOT_COORDINATOR
        h.coordinator.shutdown()
    run(scenario())

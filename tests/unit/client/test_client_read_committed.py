"""READ_COMMITTED reads in the project's consumer: aborted transactions dropped from fetch answers as Kafka's
Fetcher does (client/read_committed.py), on answers built in memory."""

from __future__ import annotations

from client_helpers import FakeMetadata, cluster

from client.fetcher import READ_COMMITTED, READ_UNCOMMITTED, Fetcher, parse_records
from client.subscription import OffsetResetStrategy, SubscriptionState
from common.record import ControlRecordType, ProducerRecord, build_batch, build_end_txn_marker
from proto import minibroker_pb2 as pb
from proto.types import TopicPartition
from tests.fakes import FakeMonotonic

TP = TopicPartition("t", 0)
ABORT, COMMIT = ControlRecordType.ABORT, ControlRecordType.COMMIT


def plain(base_offset: int, n: int = 1) -> bytes:
    return build_batch([ProducerRecord(b"plain-%d" % (base_offset + i)) for i in range(n)], base_offset=base_offset)


def txn(producer_id: int, base_offset: int, n: int = 1, *, transactional: bool = True) -> bytes:
    return build_batch([ProducerRecord(b"p%d-%d" % (producer_id, base_offset + i)) for i in range(n)],
                       base_offset=base_offset, producer_id=producer_id, producer_epoch=0, base_sequence=base_offset,
                       is_transactional=transactional)


def marker(producer_id: int, offset: int, control_type: ControlRecordType) -> bytes:
    return build_end_txn_marker(producer_id, 0, control_type, 0, 1_000, base_offset=offset)


def offsets(data: bytes, fetch_offset: int, aborted: list[tuple[int, int]] | None) -> tuple[list[int], int]:
    records, next_offset = parse_records(TP, data, fetch_offset, aborted_transactions=aborted)
    return [r.offset for r in records], next_offset


def test_an_aborted_transactions_batches_are_skipped_up_to_its_abort_marker() -> None:
    # Producer 7 aborts (1-2, 4; marker 6) while producer 8 commits (3, 5; marker 7) around plain records.
    data = (plain(0) + txn(7, 1, 2) + txn(8, 3) + txn(7, 4) + txn(8, 5) + marker(7, 6, ABORT)
            + marker(8, 7, COMMIT) + plain(8))
    assert offsets(data, 0, [(7, 1)]) == ([0, 3, 5, 8], 9)
    # READ_UNCOMMITTED (no aborted transactions asked for): every data record.
    assert offsets(data, 0, None) == ([0, 1, 2, 3, 4, 5, 8], 9)


def test_the_abort_marker_ends_the_aborted_transaction_and_the_producers_next_one_is_read() -> None:
    # Producer 7 commits 0-1, aborts 3-4, commits 6: only the transaction from offset 3 is aborted.
    data = (txn(7, 0, 2) + marker(7, 2, COMMIT) + txn(7, 3, 2) + marker(7, 5, ABORT) + txn(7, 6)
            + marker(7, 7, COMMIT))
    assert offsets(data, 0, [(7, 3)]) == ([0, 1, 6], 8)


def test_a_producer_aborting_twice_in_one_answer_is_skipped_from_each_first_offset() -> None:
    data = txn(7, 0) + marker(7, 1, ABORT) + plain(2) + txn(7, 3, 2) + marker(7, 5, ABORT) + plain(6)
    assert offsets(data, 0, [(7, 3), (7, 0)]) == ([2, 6], 7)  # in any order: a min-heap by first offset


def test_batches_below_the_fetch_offset_still_end_an_aborted_transaction() -> None:
    # The answer starts at the batch holding the fetch offset's predecessor records; the marker at 3 is below the
    # fetch offset 4 yet still ends producer 7's first aborted transaction, so its committed batch at 5 is read.
    data = txn(7, 0, 3) + marker(7, 3, ABORT) + plain(4) + txn(7, 5) + marker(7, 6, COMMIT)
    assert offsets(data, 4, [(7, 0)]) == ([4, 5], 7)


def test_an_aborted_batch_at_the_end_of_the_answer_still_moves_the_next_offset() -> None:
    # Nothing to hand out, but the next fetch must start past the skipped batch, not fetch it again.
    assert offsets(plain(0) + txn(7, 1, 3), 1, [(7, 1)]) == ([], 4)


def test_only_transactional_batches_of_an_aborted_producer_are_skipped() -> None:
    # Kafka's isBatchAborted: an idempotent (non-transactional) batch of the same producer id is not aborted.
    data = txn(7, 0) + txn(7, 1, transactional=False) + marker(7, 2, ABORT)
    assert offsets(data, 0, [(7, 0)]) == ([1], 3)


def test_a_transaction_aborted_later_does_not_hide_earlier_batches() -> None:
    # The aborted transaction begins at 4: producer 7's batch at 1 (committed at 2) is read.
    data = plain(0) + txn(7, 1) + marker(7, 2, COMMIT) + plain(3) + txn(7, 4) + marker(7, 5, ABORT)
    assert offsets(data, 0, [(7, 4)]) == ([0, 1, 3], 6)


# ---------------------------------------------------------------------- the Fetcher with an isolation level


def fetched(isolation_level: int, data: bytes, aborted: list[tuple[int, int]]) -> tuple[list[bytes], Fetcher,
                                                                                         SubscriptionState]:
    metadata = FakeMetadata(cluster({"t": 1}, leaders={("t", 0): 1}))
    subscriptions = SubscriptionState(OffsetResetStrategy.EARLIEST)
    subscriptions.assign_from_user([TP])
    subscriptions.seek(TP, 0)
    fetcher = Fetcher(metadata, subscriptions, isolation_level=isolation_level, clock=FakeMonotonic())
    assert fetcher.send_fetches() == 1
    [(_, request, future)] = metadata.connection(1).calls
    assert request.isolation_level == isolation_level
    response = pb.FetchResponse()
    part = response.responses.add(topic="t").partitions.add(partition_index=0, high_watermark=10,
                                                            last_stable_offset=9, records=data)
    for producer_id, first_offset in aborted:
        part.aborted_transactions.add(producer_id=producer_id, first_offset=first_offset)
    future.settle(response)
    fetcher.handle_answers()
    records = fetcher.fetched_records(100).get(TP, [])
    return [r.value for r in records], fetcher, subscriptions


def test_a_read_committed_fetcher_drops_the_answers_aborted_transactions() -> None:
    data = plain(0) + txn(7, 1, 2) + txn(8, 3) + marker(7, 4, ABORT) + marker(8, 5, COMMIT) + plain(6, 3)
    values, _, subscriptions = fetched(READ_COMMITTED, data, [(7, 1)])
    assert values == [b"plain-0", b"p8-3", b"plain-6", b"plain-7", b"plain-8"]
    assert subscriptions.position(TP) == 9
    assert subscriptions.state(TP).last_stable_offset == 9


def test_a_read_uncommitted_fetcher_hands_out_every_data_record() -> None:
    data = plain(0) + txn(7, 1, 2) + marker(7, 3, ABORT)
    values, _, subscriptions = fetched(READ_UNCOMMITTED, data, [(7, 1)])
    assert values == [b"plain-0", b"p7-1", b"p7-2"]
    assert subscriptions.position(TP) == 4

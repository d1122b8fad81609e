"""The transactional Producer's I/O against the in-memory broker (tests/unit/client/fake_broker.py): a partition
joins the transaction (AddPartitionsToTxn) before its first batch goes, batches carry the transactional bit and
the epoch, commit flushes before EndTxn, the coordinator is looked up again after NOT_COORDINATOR and asked again
after CONCURRENT_TRANSACTIONS, and an abort after a failed batch bumps the epoch (KIP-360). Real brokers:
tests/integration/kafka_clients/test_client_transactions.py."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fake_broker import FakeBroker

from client import ConsumerGroupMetadata, IllegalStateError, KafkaError, OffsetAndMetadata, Producer
from common.record import parse_header
from proto.errors import ErrorCode
from proto.types import TopicPartition

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with FakeBroker() as b:
        b.create("a", 2)
        yield b


def producer(broker: FakeBroker) -> Producer:
    p = Producer(broker.address, transactional_id="tx", retry_backoff_ms=1, max_block_ms=10000)
    p.init_transactions()
    return p


def test_partitions_join_before_their_batches_and_commit_flushes_before_end_txn(broker: FakeBroker) -> None:
    with producer(broker) as p:
        p.begin_transaction()
        p.send("a", b"x", partition=0)
        p.send("a", b"y", partition=1)
        p.commit_transaction()
    calls = [c for c in broker.txn_calls if c[0] != "FindCoordinator"]
    assert calls[0] == ("InitProducerId", -1)
    # Each partition's Produce comes after the AddPartitionsToTxn that named it, and EndTxn after both.
    for tp in (A0, A1):
        added = next(i for i, c in enumerate(calls) if c[0] == "AddPartitionsToTxn" and tp in c[2])
        assert added < calls.index(("Produce", tp))
    assert calls[-1] == ("EndTxn", 0, True)
    for tp in (A0, A1):
        header = parse_header(broker.logs[tp][0])
        assert header.is_transactional and (header.producer_id, header.producer_epoch) == (4000, 0)


def test_the_coordinator_is_looked_up_again_and_a_busy_one_asked_again(broker: FakeBroker) -> None:
    broker.txn_errors["InitProducerId"].extend([ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS])
    broker.txn_errors["EndTxn"].append(ErrorCode.CONCURRENT_TRANSACTIONS)
    with producer(broker) as p:
        p.begin_transaction()
        p.send("a", b"x", partition=0)
        p.commit_transaction()
    names = [c[0] for c in broker.txn_calls]
    # NOT_COORDINATOR: FindCoordinator again before the next try; LOAD_IN_PROGRESS: the same one, again.
    assert names[:5] == ["FindCoordinator", "InitProducerId", "FindCoordinator", "InitProducerId", "InitProducerId"]
    assert names.count("EndTxn") == 2


def test_a_fenced_commit_is_fatal(broker: FakeBroker) -> None:
    broker.txn_errors["EndTxn"].append(ErrorCode.PRODUCER_FENCED)
    with producer(broker) as p:
        p.begin_transaction()
        p.send("a", b"x", partition=0)
        with pytest.raises(KafkaError) as fenced:
            p.commit_transaction()
        assert fenced.value.code is ErrorCode.PRODUCER_FENCED
        with pytest.raises(KafkaError):
            p.abort_transaction()


def test_a_failed_send_makes_the_commit_fail_and_the_abort_bumps_the_epoch(broker: FakeBroker) -> None:
    broker.fail_produce[A0].append(ErrorCode.INVALID_RECORD)  # not retriable: the batch fails
    with producer(broker) as p:
        p.begin_transaction()
        failed = p.send("a", b"x", partition=0)
        with pytest.raises(KafkaError) as refused:
            p.commit_transaction()
        assert refused.value.code is ErrorCode.INVALID_RECORD
        with pytest.raises(KafkaError):
            failed.get(0)
        p.abort_transaction()
        # The abort, then InitProducerId with the current id and epoch: the next transaction is epoch 1.
        assert [c for c in broker.txn_calls if c[0] in ("EndTxn", "InitProducerId")][-2:] == [
            ("EndTxn", 0, False), ("InitProducerId", 4000)]
        p.begin_transaction()
        p.send("a", b"y", partition=0)
        p.commit_transaction()
    header = parse_header(broker.logs[A0][-1])
    assert (header.producer_epoch, header.base_sequence) == (1, 0)


def test_offsets_join_the_transaction_then_go_to_the_group_coordinator(broker: FakeBroker) -> None:
    """Java's sendOffsetsToTransaction: AddOffsetsToTxn, then TxnOffsetCommit with the member's generation; a
    transaction with offsets alone still ends with EndTxn."""
    broker.txn_errors["TxnOffsetCommit"].append(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    with producer(broker) as p:
        p.begin_transaction()
        p.send_offsets_to_transaction({A0: OffsetAndMetadata(5)}, ConsumerGroupMetadata("g", 3, "m-1"))
        p.commit_transaction()
    calls = [c for c in broker.txn_calls if c[0] not in ("FindCoordinator", "InitProducerId")]
    assert calls == [("AddOffsetsToTxn", "g"), ("TxnOffsetCommit", "g", 3, "m-1", {A0: 5}),
                     ("TxnOffsetCommit", "g", 3, "m-1", {A0: 5}), ("EndTxn", 0, True)]


def test_a_stale_member_makes_the_transaction_abortable(broker: FakeBroker) -> None:
    broker.txn_errors["TxnOffsetCommit"].append(ErrorCode.ILLEGAL_GENERATION)
    with producer(broker) as p:
        with pytest.raises(IllegalStateError, match="not in progress"):
            p.send_offsets_to_transaction({A0: OffsetAndMetadata(5)}, "g")
        p.begin_transaction()
        with pytest.raises(KafkaError) as stale:
            p.send_offsets_to_transaction({A0: OffsetAndMetadata(5)}, "g")
        assert stale.value.code is ErrorCode.ILLEGAL_GENERATION
        with pytest.raises(KafkaError):
            p.commit_transaction()
        p.abort_transaction()
        p.begin_transaction()  # recovered: the next transaction starts
    assert [c for c in broker.txn_calls if c[0] == "EndTxn"] == [("EndTxn", 0, False)]


def test_an_abort_that_drops_a_retry_with_a_sequence_bumps_the_epoch(broker: FakeBroker) -> None:
    """A batch waiting to be retried already holds a sequence: the abort fails it unsent, so the broker's next
    expected sequence is past a gap and the producer must start over at a new epoch (KIP-360)."""
    broker.fail_produce[A0].extend([ErrorCode.NOT_ENOUGH_REPLICAS] * 10_000)
    with producer(broker) as p:
        p.begin_transaction()
        retried = p.send("a", b"x", partition=0)
        deadline = time.monotonic() + 10
        while not broker.produce_requests:
            assert time.monotonic() < deadline, "the batch was never sent"
            time.sleep(0.01)  # a condition polled under a deadline: the first attempt reaching the broker
        p.abort_transaction()
        with pytest.raises(KafkaError):
            retried.get(0)
    assert [c for c in broker.txn_calls if c[0] in ("EndTxn", "InitProducerId")][-2:] == [
        ("EndTxn", 0, False), ("InitProducerId", 4000)]

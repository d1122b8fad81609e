"""minibroker/commands/transactions.py's rules without a cluster: find-hanging's candidates (an open
transaction whose producer last wrote longer ago than the longest transaction timeout) and its verdict (hanging
when no coordinator knows the producer id, the id is not found, or its transaction no longer holds the partition),
describe's row (None for a transaction that never started), and the argument errors Kafka's tool prints before it
asks anything. kafka-python's own result types stand in for the admin client's answers."""

from __future__ import annotations

import argparse
import io

import pytest
from kafka import TopicPartition as KpTopicPartition
from kafka.admin._transactions import PartitionProducerState, ProducerState, TransactionDescription, TransactionState

from minibroker.commands.transactions import (
    AbortTransactionCommand,
    CommandFailedError,
    FindHangingTransactionsCommand,
    OpenTransaction,
    candidate_open_transactions,
    describe_row,
    hanging_transactions,
)

NOW = 10_000_000
TP0, TP1 = KpTopicPartition("t", 0), KpTopicPartition("t", 1)


def producer(producer_id: int, last_timestamp: int, start_offset: int) -> ProducerState:
    return ProducerState(producer_id, 0, 5, last_timestamp, -1, start_offset)


def described(partitions: set[KpTopicPartition], start_ms: int = 1_000) -> TransactionDescription:
    return TransactionDescription(2, TransactionState.ONGOING, 7, 3, 60_000, start_ms, partitions)


def test_candidates_are_open_transactions_older_than_the_timeout() -> None:
    old_open, young_open, old_closed = producer(7, NOW - 61_000, 4), producer(8, NOW - 1_000, 9), producer(
        9, NOW - 61_000, -1)
    found = candidate_open_transactions({TP0: PartitionProducerState([old_open, young_open, old_closed])}, NOW,
                                        60_000)
    assert found == [OpenTransaction("t", 0, old_open)]
    # Exactly the timeout is not older than it (Kafka's strict >).
    assert candidate_open_transactions({TP0: PartitionProducerState([producer(7, NOW - 60_000, 4)])}, NOW,
                                       60_000) == []


def test_hanging_when_unknown_not_found_or_the_partition_left_the_transaction() -> None:
    on_tp0, on_tp1 = OpenTransaction("t", 0, producer(7, 0, 4)), OpenTransaction("t", 1, producer(7, 0, 2))
    unknown = OpenTransaction("t", 0, producer(8, 0, 6))
    not_found = OpenTransaction("t", 0, producer(9, 0, 8))
    assert hanging_transactions([on_tp0, on_tp1, unknown, not_found], {7: "app", 9: "gone"},
                                {"app": described({TP0}), "gone": None}) == [on_tp1, unknown, not_found]


def test_describe_row_shows_none_for_a_transaction_that_never_started() -> None:
    assert describe_row("app", described({TP1, TP0}, start_ms=9_000_000), NOW) == [
        "2", "app", "7", "3", "Ongoing", "60000", "9000000", "1000000", "t-0,t-1"]
    assert describe_row("app", described(set(), start_ms=-1), NOW)[6:] == ["None", "None", ""]


def parsed(command: object, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)  # type: ignore[attr-defined]
    return parser.parse_args(argv)


@pytest.mark.parametrize(("command", "argv", "message"), [
    (FindHangingTransactionsCommand(lambda: NOW), (), "The `find-hanging` command requires either --topic or"
                                                      " --broker-id to limit the scope of the search"),
    (FindHangingTransactionsCommand(lambda: NOW), ("--broker-id", "1", "--partition", "0"),
     "The --partition argument requires --topic to be provided"),
    (AbortTransactionCommand(), ("--topic", "t", "--partition", "0"),
     "The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or above) or"
     " with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)"),
    (AbortTransactionCommand(), ("--topic", "t", "--partition", "0", "--producer-id", "7"),
     "Missing required argument --producer-epoch"),
    (AbortTransactionCommand(), ("--topic", "t", "--partition", "0", "--producer-id", "7", "--producer-epoch", "0"),
     "Missing required argument --coordinator-epoch"),
])
def test_kafkas_argument_errors_before_any_request(command: object, argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandFailedError) as refused:
        command.execute(object(), parsed(command, *argv), io.StringIO())  # type: ignore[attr-defined]
    assert str(refused.value) == message

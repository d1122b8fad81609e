"""The exactly-once checker on transactional histories: every input once in the committed output, nothing of an
aborted transaction, every transaction whole, the group's offsets moved with the output."""

from __future__ import annotations

from pathlib import Path

from chaos_histories import T0, clean

from chaos.checker import check
from chaos.history import FAIL, INFO, OK, FinalCommitted, History, HistoryWriter, Txn, TxnOutput, load
from chaos.report import summarize, verdict
from chaos.txn_checker import OutputRecord, parse_output
from chaos.txn_workload import output_value

TXN_GROUP = "chaos-group-txn"


def out(value: str, partition: int, offset: int, process: str, txn: int) -> str:
    return output_value(value.encode(), partition, offset, process, txn).decode()


def transactional() -> History:
    """clean()'s input (w0-0, w0-2, w1-0 on partition 0; w0-1, w1-1, a1-0 on 1) copied by t0 in two committed
    transactions, with an aborted attempt at the first one in between that only read_uncommitted shows."""
    history = clean()
    history.meta["txn_group"] = TXN_GROUP
    history.txns = [
        Txn("t0", 1, T0 + 1, T0 + 1.1, FAIL, ((0, 0), (0, 1)), "coordinator fenced"),
        Txn("t0", 2, T0 + 2, T0 + 2.1, OK, ((0, 0), (0, 1), (0, 2))),
        Txn("t0", 3, T0 + 3, T0 + 3.1, OK, ((1, 0), (1, 1), (1, 2))),
    ]
    aborted = ((0, out("w0-0", 0, 0, "t0", 1)), (1, out("w0-2", 0, 1, "t0", 1)), (2, "marker"))
    committed0 = ((3, out("w0-0", 0, 0, "t0", 2)), (4, out("w0-2", 0, 1, "t0", 2)), (5, out("w1-0", 0, 2, "t0", 2)))
    committed1 = ((0, out("w0-1", 1, 0, "t0", 3)), (1, out("w1-1", 1, 1, "t0", 3)), (2, out("a1-0", 1, 2, "t0", 3)))
    history.txn_outputs = [
        TxnOutput("read_committed", 0, T0 + 9, committed0), TxnOutput("read_committed", 1, T0 + 9, committed1),
        TxnOutput("read_uncommitted", 0, T0 + 9, aborted[:2] + committed0),
        TxnOutput("read_uncommitted", 1, T0 + 9, committed1),
    ]
    history.final_committed = [FinalCommitted(TXN_GROUP, T0 + 9.5, ((0, 3), (1, 3)))]
    return history


def anomalies(history: History) -> dict[str, int]:
    return {name: n for name, n in check(history).counts.items() if n}


def test_output_values_say_where_they_came_from() -> None:
    assert parse_output(out("w0-12", 3, 41, "t0", 7)) == OutputRecord("w0-12", 3, 41, "t0", 7)
    assert parse_output("w0-12") is None and parse_output("x@1:2#t0:y") is None


def test_a_clean_transactional_history_is_valid_and_counts_the_aborted_records() -> None:
    result = check(transactional())
    assert result.valid, result.counts
    assert ("transactions: 2 committed, 1 aborted, 0 of unknown outcome; 6 records read_committed,"
            " 8 read_uncommitted (2 of them from aborted transactions)") in result.notes


def test_an_input_missing_from_the_committed_output_is_lost() -> None:
    history = transactional()
    history.txn_outputs[1] = TxnOutput("read_committed", 1, T0 + 9, history.txn_outputs[1].records[:2])
    # One record of transaction 3 is not there in read_committed: its input lost, the transaction partial.
    assert anomalies(history) == {"txn-lost": 1, "txn-partial": 1}


def test_an_input_copied_twice_is_a_duplicate() -> None:
    history = transactional()
    again = ((6, out("w0-0", 0, 0, "t0", 3)),)
    history.txn_outputs[0] = TxnOutput("read_committed", 0, T0 + 9, history.txn_outputs[0].records + again)
    history.txn_outputs[2] = TxnOutput("read_uncommitted", 0, T0 + 9, history.txn_outputs[2].records + again)
    assert anomalies(history) == {"txn-duplicate": 1}


def test_an_aborted_transaction_seen_by_read_committed_fails() -> None:
    history = transactional()
    aborted = history.txn_outputs[2].records[:2]
    history.txn_outputs[0] = TxnOutput("read_committed", 0, T0 + 9, aborted + history.txn_outputs[0].records)
    found = anomalies(history)
    assert found["txn-aborted-read"] == 2 and found["txn-duplicate"] == 2


def test_a_transaction_of_unknown_outcome_may_be_in_the_output_or_not() -> None:
    history = transactional()
    history.txns[1] = Txn("t0", 2, T0 + 2, T0 + 2.1, INFO, ((0, 0), (0, 1), (0, 2)), "commit timed out")
    assert anomalies(history) == {}


def test_a_wrong_value_at_an_input_position_is_a_mismatch() -> None:
    history = transactional()
    records = list(history.txn_outputs[0].records)
    records[0] = (3, out("w9-9", 0, 0, "t0", 2))
    history.txn_outputs[0] = TxnOutput("read_committed", 0, T0 + 9, tuple(records))
    assert anomalies(history) == {"txn-mismatch": 1}


def test_group_offsets_that_did_not_move_with_the_output_fail() -> None:
    history = transactional()
    history.final_committed = [FinalCommitted(TXN_GROUP, T0 + 9.5, ((0, 3), (1, 1)))]
    assert anomalies(history) == {"txn-offsets": 1}


def test_transactional_events_round_trip(tmp_path: Path) -> None:
    history = transactional()
    writer = HistoryWriter(tmp_path / "history.jsonl")
    writer.meta(**history.meta)
    for event in [*history.final_reads, *history.txns, *history.txn_outputs, *history.final_committed]:
        writer.write(event)
    writer.close()
    loaded = load(tmp_path / "history.jsonl")
    assert loaded.txns == history.txns and loaded.txn_outputs == history.txn_outputs
    assert loaded.final_committed == history.final_committed


def test_the_verdict_shows_the_transactions_and_their_checks_only_when_the_run_had_them() -> None:
    history = transactional()
    history.meta["txn_processors"] = 1
    text = verdict(summarize(history, check(history), None))
    assert "  transactions         1 processors: 2 committed (6 records), 1 aborted, 0 unknown" in text
    assert "    txn-aborted-read       ok" in text
    plain = clean()
    assert "txn-" not in verdict(summarize(plain, check(plain), None))

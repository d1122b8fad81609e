"""The exactly-once sink's rules: a transactional id per attempt at the same rows, the ledger's verdict."""

from spark_jobs.kafka_ledger import LEDGER_PARTITIONS, already_committed, ledger_key, ledger_partition_of
from spark_jobs.kafka_writer import TaskIdentity


def test_every_attempt_at_the_same_rows_takes_the_same_transactional_id() -> None:
    first = TaskIdentity("q-1", 7, 3).transactional_id
    assert first == TaskIdentity("q-1", 7, 3).transactional_id == "minibroker-sink-q-1-7-3"
    assert len({first, TaskIdentity("q-1", 8, 3).transactional_id, TaskIdentity("q-1", 7, 4).transactional_id,
                TaskIdentity("q-2", 7, 3).transactional_id}) == 4


def test_a_task_writes_nothing_once_the_ledger_holds_its_micro_batch_or_a_later_one() -> None:
    key = ledger_key("q-1", 3)
    assert key == b"q-1/3"
    assert not already_committed({}, key, 0)
    assert not already_committed({key: b"4", ledger_key("q-1", 2): b"9"}, key, 5)
    assert already_committed({key: b"5"}, key, 5)
    assert already_committed({key: b"6"}, key, 5)


def test_the_tasks_of_a_micro_batch_write_to_ledger_partitions_of_their_own() -> None:
    assert [ledger_partition_of(p, LEDGER_PARTITIONS) for p in range(LEDGER_PARTITIONS)] == list(range(16))
    assert ledger_partition_of(LEDGER_PARTITIONS + 3, LEDGER_PARTITIONS) == 3
    assert ledger_partition_of(5, 1) == 0  # a one-partition ledger of an earlier release: every task shares it

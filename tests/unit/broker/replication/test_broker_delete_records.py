"""DeleteRecords on the leader (Kafka's ReplicaManager.deleteRecords, Partition.deleteRecordsOnLeader and
DelayedDeleteRecords): the log start offset moves at once, never past the high watermark, and the answer waits
until the in-sync followers report theirs. Real logs, a mock timer."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.checkpoint import OffsetCheckpointFile
from broker.log.files import LOG_START_OFFSET_CHECKPOINT
from broker.log.manager import LogManager
from broker.replication.delayed_fetch import FetchParams, PartitionFetchInfo
from broker.replication.partition import FetchIsolation, Partition
from proto.errors import ErrorCode, KafkaError
from tests.fakes import FakeClock
from tests.unit.broker.broker_helpers import (
    LOCAL,
    TP,
    Answers,
    Harness,
    batch,
    consumer_fetch,
    leader_state,
    produce,
    topic_config,
)

FOLLOWER = 2


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    h = Harness(tmp_path)
    h.lead(isr=(LOCAL, FOLLOWER))
    assert produce(h, batch(10), acks=1).value[TP].error is ErrorCode.NONE
    follower_fetch(h, 10, log_start_offset=0)  # caught up: the high watermark is 10
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and partition.high_watermark == 10
    return h


def follower_fetch(h: Harness, offset: int, log_start_offset: int) -> Answers:
    answers = Answers()
    params = FetchParams(FOLLOWER, 0, 1, 1 << 20, FetchIsolation.LOG_END, True)
    h.replica_manager.fetch_messages(params, [PartitionFetchInfo(TP, offset, log_start_offset, 1 << 20, -1)],
                                     answers)
    return answers


def delete_records(h: Harness, offset: int, timeout_ms: int = 1000) -> Answers:
    answers = Answers()
    h.replica_manager.delete_records(timeout_ms, {TP: offset}, answers)
    return answers


def test_the_answer_waits_for_the_in_sync_follower_to_move_its_log_start_offset(h: Harness) -> None:
    answers = delete_records(h, 4)
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and partition.log is not None
    assert partition.log.log_start_offset == 4 and answers.calls == []
    # Persisted at once: a restart of this broker does not bring the records back.
    checkpoint = OffsetCheckpointFile(h.log_manager.log_dirs[0] / LOG_START_OFFSET_CHECKPOINT).read()
    assert checkpoint[TP] == 4
    # The follower learns 4 from the next fetch response and says so in the fetch after it.
    assert follower_fetch(h, 10, log_start_offset=0).value[0][1].log_start_offset == 4
    assert answers.calls == []
    follower_fetch(h, 10, log_start_offset=4)
    status = answers.value[TP]
    assert (status.error, status.low_watermark) == (ErrorCode.NONE, 4)
    # Consumers below the log start offset are out of range; ListOffsets earliest says where it is.
    assert consumer_fetch(h, 2).value[0][1].error is ErrorCode.OFFSET_OUT_OF_RANGE
    earliest = h.replica_manager.fetch_offset_for_timestamp(TP, -2, FetchIsolation.HIGH_WATERMARK, -1)
    assert earliest is not None and earliest.offset == 4


def test_offsets_past_the_high_watermark_or_negative_are_out_of_range(h: Harness) -> None:
    for offset in (11, -2):
        assert delete_records(h, offset).value[TP].error is ErrorCode.OFFSET_OUT_OF_RANGE
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and partition.log is not None and partition.log.log_start_offset == 0


def test_minus_one_means_the_high_watermark_and_a_silent_follower_times_it_out(h: Harness) -> None:
    answers = delete_records(h, -1, timeout_ms=300)
    partition = h.replica_manager.get_partition(TP)
    assert partition is not None and partition.log is not None and partition.log.log_start_offset == 10
    h.timer.advance(300)
    assert (answers.value[TP].error, answers.value[TP].low_watermark) == (ErrorCode.REQUEST_TIMED_OUT, -1)


def test_a_partition_not_led_here_fails_at_once(h: Harness) -> None:
    answers = Answers()
    h.replica_manager.delete_records(1000, {TP._replace(partition=5): 1}, answers)
    assert answers.value[TP._replace(partition=5)].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_compacted_topic_refuses_delete_records(tmp_path: Path) -> None:
    log_manager = LogManager([tmp_path / "compacted"], topic_config().log, broker_id=LOCAL, time_ms=FakeClock())
    log_manager.startup()
    partition = Partition(TP, local_broker_id=LOCAL, log_manager=log_manager,
                          topic_config=topic_config(**{"cleanup.policy": "compact"}), time_ms=FakeClock())
    partition.make_leader(leader_state(), lambda _: None)
    with pytest.raises(KafkaError, match="can not be deleted due to the configured policy") as refused:
        partition.delete_records_on_leader(0)
    assert refused.value.code is ErrorCode.POLICY_VIOLATION

"""Partition: leader and follower roles, the high watermark, fencing by leader epoch. Real logs, manual clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.log import AbortedTxn, AppendOrigin, Log
from broker.log.manager import LogManager
from broker.replication.partition import FetchIsolation, Partition
from common.record import ControlRecordType, build_end_txn_marker, iter_batches
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from tests.fakes import FakeClock
from tests.unit.broker.broker_helpers import LOCAL, TP, batch, leader_state, topic_config


def no_checkpoint(_: TopicPartition) -> int | None:
    return None


@pytest.fixture
def log_manager(tmp_path: Path) -> LogManager:
    manager = LogManager([tmp_path / "logs"], topic_config().log, broker_id=LOCAL, time_ms=FakeClock())
    manager.startup()
    return manager


def partition(log_manager: LogManager, **config: str) -> Partition:
    return Partition(TP, local_broker_id=LOCAL, log_manager=log_manager, topic_config=topic_config(**config),
                     time_ms=FakeClock())


def test_leader_records_its_epoch_before_the_first_write(log_manager: LogManager) -> None:
    p = partition(log_manager)
    assert p.make_leader(leader_state(epoch=0), no_checkpoint) == (True, False)
    p.append_records_to_leader(batch(5), required_acks=1)
    # A new epoch with no write yet is in the cache already (KAFKA-7415).
    p.make_leader(leader_state(epoch=3), no_checkpoint)
    assert p.log is not None and p.log.leader_epoch_cache is not None
    assert [(e.epoch, e.start_offset) for e in p.log.leader_epoch_cache.entries] == [(0, 0), (3, 5)]
    assert p.last_offset_for_leader_epoch(-1, 0) == (0, 5)
    assert p.last_offset_for_leader_epoch(-1, 3) == (3, 5)


def test_sole_in_sync_leader_moves_the_high_watermark_on_append(log_manager: LogManager) -> None:
    p = partition(log_manager)
    p.make_leader(leader_state(), no_checkpoint)
    info, moved = p.append_records_to_leader(batch(3), required_acks=-1)
    assert (info.first_offset, info.last_offset, moved) == (0, 2, True)
    assert p.high_watermark == 3
    assert p.check_enough_replicas_reach_offset(3) == (True, ErrorCode.NONE)


def test_high_watermark_is_the_minimum_log_end_over_the_isr(log_manager: LogManager) -> None:
    p = partition(log_manager)
    p.make_leader(leader_state(isr=(1, 2, 3)), no_checkpoint)
    p.append_records_to_leader(batch(2), required_acks=-1)
    _, moved = p.append_records_to_leader(batch(2), required_acks=-1)
    assert not moved and p.high_watermark == 0
    assert p.check_enough_replicas_reach_offset(4) == (False, ErrorCode.NONE)
    assert p.log is not None
    # Replica 3 has not fetched yet: its log end is unknown, so the HW cannot pass it.
    assert not p.update_follower_fetch_state(2, p.log.log_end_offset_metadata, 0, 10, 4).high_watermark_moved
    assert p.high_watermark == 0
    # Replica 3 is half-way (offset 2, read by the leader at the second batch): the HW follows it.
    halfway = p.read_records(2, -1, 1000, FetchIsolation.LOG_END, True, True).fetched_data.fetch_offset_metadata
    assert p.update_follower_fetch_state(3, halfway, 0, 10, 4).high_watermark_moved
    assert p.high_watermark == 2
    assert p.check_enough_replicas_reach_offset(4) == (False, ErrorCode.NONE)
    assert p.update_follower_fetch_state(3, p.log.log_end_offset_metadata, 0, 20, 4).high_watermark_moved
    assert p.high_watermark == 4
    assert p.check_enough_replicas_reach_offset(4) == (True, ErrorCode.NONE)


def test_a_broker_outside_the_assignment_does_not_move_the_high_watermark(log_manager: LogManager) -> None:
    p = partition(log_manager)
    p.make_leader(leader_state(isr=(1, 2)), no_checkpoint)
    p.append_records_to_leader(batch(2), required_acks=1)
    assert p.log is not None
    assert not p.update_follower_fetch_state(9, p.log.log_end_offset_metadata, 0, 10, 2).high_watermark_moved
    assert p.high_watermark == 0


def test_acks_all_is_refused_below_min_insync_replicas_but_acks_1_is_not(log_manager: LogManager) -> None:
    p = partition(log_manager, **{"min.insync.replicas": "2"})
    p.make_leader(leader_state(isr=(1,), replicas=(1, 2)), no_checkpoint)
    with pytest.raises(KafkaError) as e:
        p.append_records_to_leader(batch(1), required_acks=-1)
    assert e.value.code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.log is not None and p.log.log_end_offset == 0  # nothing was written
    p.append_records_to_leader(batch(1), required_acks=1)
    # Reached the HW, but with the ISR below min.insync.replicas.
    assert p.check_enough_replicas_reach_offset(1) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_follower_refuses_appends_and_consumer_reads(log_manager: LogManager) -> None:
    p = partition(log_manager)
    assert p.make_follower(leader_state(leader=2, isr=(2, 1)), no_checkpoint)
    assert not p.is_leader and p.log is not None
    with pytest.raises(KafkaError) as e:
        p.append_records_to_leader(batch(1), required_acks=1)
    assert e.value.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(KafkaError) as e:
        p.read_records(0, -1, 1000, FetchIsolation.HIGH_WATERMARK, True, True)
    assert e.value.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p.check_enough_replicas_reach_offset(0) == (True, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    # Same leader and epoch again: no change, the fetcher need not restart.
    assert not p.make_follower(leader_state(leader=2, isr=(2, 1)), no_checkpoint)


def test_leader_to_follower_and_back(log_manager: LogManager) -> None:
    p = partition(log_manager)
    p.make_leader(leader_state(epoch=1, isr=(1, 2)), no_checkpoint)
    assert p.is_leader
    p.make_follower(leader_state(leader=2, epoch=2, isr=(2, 1)), no_checkpoint)
    assert not p.is_leader and p.in_sync_replica_ids == frozenset()
    is_new, _ = p.make_leader(leader_state(epoch=3, isr=(1, 2)), no_checkpoint)
    assert is_new and p.leader_epoch == 3


def test_requests_from_another_leader_epoch_are_fenced(log_manager: LogManager) -> None:
    p = partition(log_manager)
    p.make_leader(leader_state(epoch=5), no_checkpoint)
    p.append_records_to_leader(batch(2), required_acks=1)
    for epoch, code in ((4, ErrorCode.FENCED_LEADER_EPOCH), (6, ErrorCode.UNKNOWN_LEADER_EPOCH)):
        with pytest.raises(KafkaError) as e:
            p.read_records(0, epoch, 1000, FetchIsolation.HIGH_WATERMARK, True, True)
        assert e.value.code is code
    assert p.read_records(0, 5, 1000, FetchIsolation.HIGH_WATERMARK, True, True).fetched_data.records.size > 0
    assert p.read_records(0, -1, 1000, FetchIsolation.HIGH_WATERMARK, True, True).high_watermark == 2


def test_checkpointed_high_watermark_is_clamped_to_the_log(log_manager: LogManager) -> None:
    log_manager.get_or_create_log(TP, topic_config().log).append_as_leader(batch(4), 0)
    p = partition(log_manager)
    p.make_follower(leader_state(leader=2, isr=(2, 1)), lambda tp: 100)
    assert p.high_watermark == 4


def test_consumers_read_below_the_high_watermark_replicas_to_the_log_end(log_manager: LogManager) -> None:
    p = partition(log_manager)
    p.make_leader(leader_state(isr=(1, 2)), no_checkpoint)
    p.append_records_to_leader(batch(3), required_acks=1)
    consumer = p.read_records(0, -1, 10_000, FetchIsolation.HIGH_WATERMARK, True, True)
    replica = p.read_records(0, -1, 10_000, FetchIsolation.LOG_END, True, True)
    assert consumer.fetched_data.records.size == 0 and consumer.high_watermark == 0
    assert replica.fetched_data.records.size > 0 and replica.log_end_offset == 3


def test_list_offsets(log_manager: LogManager) -> None:
    p = partition(log_manager)
    p.make_leader(leader_state(epoch=2), no_checkpoint)
    p.append_records_to_leader(batch(3, timestamp=1000), required_acks=1)
    p.append_records_to_leader(batch(3, timestamp=5000), required_acks=1)
    assert p.fetch_offset_for_timestamp(-2, FetchIsolation.HIGH_WATERMARK, -1) == (-1, 0, 2)
    assert p.fetch_offset_for_timestamp(-1, FetchIsolation.HIGH_WATERMARK, -1) == (-1, 6, 2)
    found = p.fetch_offset_for_timestamp(5001, FetchIsolation.HIGH_WATERMARK, -1)
    assert found is not None and (found.timestamp, found.offset) == (5001, 4)
    assert p.fetch_offset_for_timestamp(99_999, FetchIsolation.HIGH_WATERMARK, -1) is None


# ---------------------------------------------------------------------------- transactions: the last stable offset


def txn_batch(producer_id: int, sequence: int, records: int = 2) -> bytes:
    return batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=sequence, is_transactional=True)


def marker(producer_id: int, control_type: ControlRecordType) -> bytes:
    return build_end_txn_marker(producer_id, 0, control_type, 0, 1_000)


def test_read_committed_stops_at_the_open_transaction_and_lists_the_aborted_ones(log_manager: LogManager) -> None:
    p = partition(log_manager)
    p.make_leader(leader_state(), no_checkpoint)
    p.append_records_to_leader(txn_batch(7, 0), required_acks=1)  # 0..1, aborted below
    p.append_records_to_leader(marker(7, ControlRecordType.ABORT), 1, AppendOrigin.COORDINATOR)  # 2
    p.append_records_to_leader(batch(1), required_acks=1)  # 3
    p.append_records_to_leader(txn_batch(8, 0), required_acks=1)  # 4..5, open
    p.append_records_to_leader(batch(1), required_acks=1)  # 6
    assert p.high_watermark == 7
    committed = p.read_records(0, -1, 10_000, FetchIsolation.TXN_COMMITTED, True, True)
    assert committed.last_stable_offset == 4
    assert committed.aborted_transactions == [AbortedTxn(7, 0, 2, 3)]
    assert [b.header.last_offset for b in iter_batches(committed.fetched_data.records.read())] == [1, 2, 3]
    uncommitted = p.read_records(0, -1, 10_000, FetchIsolation.HIGH_WATERMARK, True, True)
    assert uncommitted.last_stable_offset == 4 and uncommitted.aborted_transactions is None
    assert [b.header.last_offset for b in iter_batches(uncommitted.fetched_data.records.read())] == [1, 2, 3, 5, 6]
    # ListOffsets: READ_COMMITTED's latest is the LSO, READ_UNCOMMITTED's the HW, a replica's the log end.
    assert p.fetch_offset_for_timestamp(-1, FetchIsolation.TXN_COMMITTED, -1).offset == 4  # type: ignore[union-attr]
    assert p.fetch_offset_for_timestamp(-1, FetchIsolation.HIGH_WATERMARK, -1).offset == 7  # type: ignore[union-attr]
    # A delayed READ_COMMITTED fetch measures the bytes up to the LSO, by position.
    snapshot = p.fetch_offset_snapshot(-1, True)
    assert snapshot.last_stable_offset.message_offset == 4 and snapshot.high_watermark.message_offset == 7
    lso_position = snapshot.last_stable_offset.relative_position_in_segment
    assert 0 < lso_position < snapshot.high_watermark.relative_position_in_segment
    p.append_records_to_leader(marker(8, ControlRecordType.COMMIT), 1, AppendOrigin.COORDINATOR)  # 7
    assert p.read_records(0, -1, 10_000, FetchIsolation.TXN_COMMITTED, True, True).last_stable_offset == 8


def test_the_lso_waits_for_the_marker_to_reach_the_high_watermark(log_manager: LogManager) -> None:
    p = partition(log_manager)
    p.make_leader(leader_state(isr=(1, 2)), no_checkpoint)
    p.append_records_to_leader(txn_batch(7, 0), required_acks=1)  # 0..1
    p.append_records_to_leader(marker(7, ControlRecordType.COMMIT), 1, AppendOrigin.COORDINATOR)  # 2
    assert p.log is not None
    p.update_follower_fetch_state(2, p.read_records(2, -1, 1, FetchIsolation.LOG_END, True, True)
                                  .fetched_data.fetch_offset_metadata, 0, 10, 3)
    assert p.high_watermark == 2  # the follower has the data, not the marker
    assert p.read_records(0, -1, 10_000, FetchIsolation.TXN_COMMITTED, True, True).last_stable_offset == 0
    p.update_follower_fetch_state(2, p.log.log_end_offset_metadata, 0, 20, 3)
    assert p.high_watermark == 3
    assert p.read_records(0, -1, 10_000, FetchIsolation.TXN_COMMITTED, True, True).last_stable_offset == 3


def test_a_follower_knows_the_open_transactions_and_serves_them_once_leader(log_manager: LogManager,
                                                                            tmp_path: Path) -> None:
    leader_log = Log.open(tmp_path / "leader" / "orders-0", topic_config().log, time=FakeClock())
    leader_log.append_as_leader(txn_batch(7, 0), 0)  # 0..1
    leader_log.append_as_leader(batch(1), 0)  # 2
    p = partition(log_manager)
    p.make_follower(leader_state(leader=2, isr=(2, 1)), no_checkpoint)
    p.append_records_to_follower(0, 0, leader_log.read(0, 1 << 20).records.read(), 3, 0)
    assert p.log is not None and p.log.last_stable_offset(p.high_watermark) == 0
    p.make_leader(leader_state(epoch=1, isr=(1,)), no_checkpoint)
    assert p.read_records(0, -1, 10_000, FetchIsolation.TXN_COMMITTED, True, True).last_stable_offset == 0
    p.append_records_to_leader(marker(7, ControlRecordType.ABORT), 1, AppendOrigin.COORDINATOR)  # 3
    committed = p.read_records(0, -1, 10_000, FetchIsolation.TXN_COMMITTED, True, True)
    assert committed.last_stable_offset == 4 and committed.aborted_transactions == [AbortedTxn(7, 0, 3, 4)]

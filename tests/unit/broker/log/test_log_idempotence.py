"""The log's idempotent-producer checks: retries answered with the original offsets, gaps refused, state kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.log.log import Log
from common.record import ProducerRecord, build_batch
from proto.errors import ErrorCode, KafkaError

PID = 4000


def batch(seq: int, n: int = 2, epoch: int = 0, pid: int = PID, **kw: bool) -> bytes:
    return build_batch([ProducerRecord(b"s%d" % (seq + i)) for i in range(n)], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, now_ms=1_000, **kw)


def open_log(path: Path, clean: bool = False) -> Log:
    return Log.open(path / "t-0", LogConfig(segment_bytes=400), clean_shutdown=clean, time=lambda: 1_000)


def test_retry_is_answered_with_original_offsets_and_not_written(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = log.append_as_leader(batch(0), 0)
    log.append_as_leader(batch(2), 0)
    retry = log.append_as_leader(batch(0), 0)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 4


def test_gap_and_old_epoch_are_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(0, epoch=1), 0)
    with pytest.raises(KafkaError) as gap:
        log.append_as_leader(batch(5, epoch=1), 0)
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(KafkaError) as fenced:
        log.append_as_leader(batch(2, epoch=0), 0)
    assert fenced.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == 2


@pytest.mark.parametrize("clean", [True, False], ids=["clean-restart", "crash-restart"])
def test_state_survives_restart(tmp_path: Path, clean: bool) -> None:
    log = open_log(tmp_path)
    for seq in range(0, 40, 2):  # several rolls: snapshots at each, replay of the rest
        log.append_as_leader(batch(seq), 0)
    assert log.num_segments > 2
    if clean:
        log.close()
    again = open_log(tmp_path, clean=clean)
    retry = again.append_as_leader(batch(38), 0)
    assert retry.duplicate and retry.first_offset == 38
    with pytest.raises(KafkaError) as gap:
        again.append_as_leader(batch(41), 0)
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert again.append_as_leader(batch(40), 0).first_offset == 40


def test_truncation_forgets_truncated_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for seq in range(0, 10, 2):
        log.append_as_leader(batch(seq), 0)
    log.truncate_to(6)
    # Sequence 6 is gone from the log, so it is new again, not a duplicate.
    again = log.append_as_leader(batch(6), 0)
    assert not again.duplicate and again.first_offset == 6


def test_follower_append_feeds_producer_state(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    follower = open_log(tmp_path / "follower")
    for seq in range(0, 6, 2):
        leader.append_as_leader(batch(seq), 3)
    follower.append_as_follower(leader.read(0, 1 << 20).records.read())
    assert follower.append_as_leader(batch(4), 4).duplicate


def test_a_follower_chunk_over_several_segments_applies_producer_state_before_each_roll(tmp_path: Path) -> None:
    """A fetch larger than the follower's segment.bytes (the leader wrote its segment before segment.bytes
    shrank) is written in runs, rolling at batch boundaries as Kafka does; each roll's producer snapshot must
    follow the batches below it. It was taken first, so applying those batches then failed the partition."""
    leader = Log.open(tmp_path / "leader" / "t-0", LogConfig(segment_bytes=1 << 20), time=lambda: 1_000)
    for seq in range(0, 40, 2):
        leader.append_as_leader(batch(seq), 3)
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(leader.read(0, 1 << 20).records.read())
    assert follower.num_segments > 2 and follower.log_end_offset == 40
    assert follower.append_as_leader(batch(38), 4).duplicate
    # A crash restart loads the newest roll's snapshot and replays the active segment: the same state.
    again = open_log(tmp_path / "follower")
    assert again.append_as_leader(batch(38), 4).duplicate
    assert not again.append_as_leader(batch(40), 4).duplicate


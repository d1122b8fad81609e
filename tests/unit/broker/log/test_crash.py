"""kill -9 a real writer process at random moments: the log must reopen to a valid prefix of what
was written, holding every append the writer saw complete (the page cache survives a process kill)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from crash_writer import CONFIG, RECORDS_PER_BATCH, batch_for, batches_per_append, read_checkpoint
from log_helpers import read_raw

from broker.log.log import Log
from broker.log.log_loader import RecoveryActionKind
from common.record import patch_base_offset_and_epoch

WRITER = Path(__file__).with_name("crash_writer.py")
ROUNDS = 8


def expected_batch(n: int) -> bytes:
    data = bytearray(batch_for(n))
    patch_base_offset_and_epoch(data, 0, n * RECORDS_PER_BATCH, 0)
    return bytes(data)


def run_writer_until_killed(log_dir: Path, checkpoint: Path, acks_before_kill: int) -> tuple[int, int]:
    """(log end offset the writer opened at, last log end offset it acknowledged)."""
    writer = subprocess.Popen([sys.executable, str(WRITER), str(log_dir), str(checkpoint)],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    opened = writer.stdout.readline().split()
    assert opened[0] == "OPEN", opened
    acked = int(opened[1])
    for _ in range(acks_before_kill):
        acked = int(writer.stdout.readline().split()[1])
    os.kill(writer.pid, signal.SIGKILL)
    for line in writer.stdout:  # acknowledged between our last read and the kill
        acked = int(line.split()[1])
    writer.wait()
    assert writer.returncode == -signal.SIGKILL
    return int(opened[1]), acked


def test_sigkilled_writer_leaves_a_valid_prefix_with_every_acknowledged_append(tmp_path: Path) -> None:
    rng = random.Random(20240611)
    log_dir = tmp_path / "crash-0"
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    acked = 0
    for _ in range(ROUNDS):
        opened, acked_now = run_writer_until_killed(log_dir, checkpoint, rng.randint(1, 120))
        assert opened >= acked  # the writer's own recovery kept everything acknowledged before
        acked = acked_now
        log = Log.open(log_dir, CONFIG, recovery_point=read_checkpoint(checkpoint))
        assert {a.kind for a in log.recovery_report} <= {RecoveryActionKind.TRUNCATED_SEGMENT}
        end = log.log_end_offset
        assert end % RECORDS_PER_BATCH == 0
        batches = end // RECORDS_PER_BATCH
        assert end >= acked
        # At most the one append in flight at the kill, whole batches of it or none.
        assert batches - acked // RECORDS_PER_BATCH <= batches_per_append(acked // RECORDS_PER_BATCH)
        assert read_raw(log) == [expected_batch(n) for n in range(batches)]
    assert log.num_segments > 3  # the kills also landed among rolls

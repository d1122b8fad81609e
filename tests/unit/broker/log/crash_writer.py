"""Crash-test writer: appends deterministic batches to a log until it is killed.

Usage: crash_writer.py LOG_DIR RECOVERY_POINT_FILE

Opens the log as after an unclean stop (recovering it), prints `OPEN <log end offset>`,
then appends forever, printing `ACK <log end offset>` after each append returns.
Like Kafka's LogManager it checkpoints the recovery point to a file (write to a
temporary file, rename) whenever a flush has moved it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from log_helpers import make_batch

from broker.config.log_config import LogConfig
from broker.log.log import Log

RECORDS_PER_BATCH = 3
# Small segments and indexes, regular flushes: kills land in rolls, index writes and fsyncs too.
CONFIG = LogConfig(segment_bytes=12_000, index_interval_bytes=700, max_index_size=96, flush_interval_messages=90)


def batch_for(n: int) -> bytes:
    """Batch number n: its size varies so that torn writes cut through different places."""
    return make_batch(records=RECORDS_PER_BATCH, value_size=(n * 7919) % 900 + 20, timestamp=1_000 + n, tag=n)


def batches_per_append(n: int) -> int:
    return 1 + n % 3


def read_checkpoint(path: Path) -> int:
    return int(path.read_text()) if path.exists() else 0


def write_checkpoint(path: Path, value: int) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(str(value))
    os.replace(temporary, path)


def main(log_dir: Path, checkpoint: Path) -> None:
    log = Log.open(log_dir, CONFIG, recovery_point=read_checkpoint(checkpoint))
    print(f"OPEN {log.log_end_offset}", flush=True)
    n = log.log_end_offset // RECORDS_PER_BATCH
    checkpointed = log.recovery_point
    while True:
        count = batches_per_append(n)
        log.append_as_leader(b"".join(batch_for(n + i) for i in range(count)), leader_epoch=0)
        n += count
        if log.recovery_point != checkpointed:
            checkpointed = log.recovery_point
            write_checkpoint(checkpoint, checkpointed)
        print(f"ACK {log.log_end_offset}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))

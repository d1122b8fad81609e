"""Every file and directory name the broker writes on disk, in one place (Kafka keeps them in `object Log`,
LogManager and the checkpoint classes), and `fsync_dir`, which makes a change of names durable. The audit
(spark_jobs/) reads the same names from here.

    <log.dir>/
      meta.properties                     version=0, broker.id=N: which broker owns the dir
      .kafka_cleanshutdown                present only between a clean shutdown and the next start
      recovery-point-offset-checkpoint    per partition: everything below it has been fsynced
      log-start-offset-checkpoint         per partition: the first offset still readable
      replication-offset-checkpoint       per partition: the high watermark (the ReplicaManager's)
      cleaner-offset-checkpoint           per compacted partition: where its dirty section starts
      <topic>-<partition>/                one Log
        00000000000000000000.log          a segment: RecordBatch v2 as received, named by its base offset
        00000000000000000000.index        sparse offset index: (4-byte relative offset, 4-byte position)
        00000000000000000000.timeindex    sparse time index: (8-byte timestamp, 4-byte relative offset)
        00000000000000000000.txnindex     aborted transactions whose marker is in the segment (34-byte entries;
                                          only once the segment has one)
        00000000000000000000.snapshot     producer state (idempotence, open transactions) at that offset
        leader-epoch-checkpoint           (leader epoch, start offset) pairs
      <topic>-<partition>.<uuid>-delete/  a deleted partition, renamed before it is removed
    *.deleted  a segment file being deleted;
    *.cleaned  a segment the log cleaner is writing (discarded on load: the old segments still hold everything);
    *.swap     a cleaned segment committed to replace its group (on load: completed, the old segments deleted);
    *.tmp  a checkpoint being written (temp file, fsync, rename)
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from proto.types import TopicPartition

# The log dir's own files.
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

# A partition's files.
LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

# Files and directories on their way out.
DELETED_FILE_SUFFIX = ".deleted"
# The log cleaner's swap protocol (Kafka's Log.CleanedFileSuffix / SwapFileSuffix): a group of segments is
# recopied into `<base>.log.cleaned` (+ indexes); renaming the `.log.cleaned` to `.log.swap` is the commit
# point; then the old segments are deleted and the `.swap` files renamed to their final names.
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
# A deleted partition's directory is renamed `<topic>-<partition>.<uuid>-delete` first
# (Kafka's Log.DeleteDirSuffix), so a crash mid-delete never leaves a half log that loads.
DELETE_DIR_SUFFIX = "-delete"
# The longest file name Linux file systems take (NAME_MAX); a 249-character topic fits as `<topic>-<p>`
# but not with `.<uuid>-delete` appended.
MAX_FILE_NAME_BYTES = 255
# A checkpoint is written to `<name>.tmp`, fsynced, then renamed over `<name>`.
TMP_SUFFIX = ".tmp"


def filename_prefix_from_offset(offset: int) -> str:
    """Kafka's Log.filenamePrefixFromOffset: 20 digits, so names sort as offsets do."""
    return f"{offset:020d}"


def snapshot_file_name(offset: int) -> str:
    return f"{filename_prefix_from_offset(offset)}{SNAPSHOT_SUFFIX}"


def delete_dir_name(tp: TopicPartition) -> str:
    """`<topic>-<partition>.<uuid>-delete`, the topic cut to fit 255 bytes (Kafka's Log.logDeleteDirName).

    The name is never parsed back: a dir ending in `-delete` is removed whatever precedes it.
    """
    suffix = f"-{tp.partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return tp.topic[: max(0, MAX_FILE_NAME_BYTES - len(suffix))] + suffix


def fsync_dir(path: Path) -> None:
    """Make new and removed file names in `path` durable (a rename or unlink is only on disk once its dir is)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

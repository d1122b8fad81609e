"""The partition log (Kafka 2.x's kafka.log): what is on disk and how it is read, written and recovered.

  files.py           every file and directory name on disk (the audit reads them from here)
  log.py             Log: one partition's segments; append as leader / follower, read, roll, flush, truncate, retention
  log_loader.py      LogLoader: opening a log dir, recovery after an unclean stop, the producer state rebuilt
  log_validator.py   LogValidator: checks of incoming batches (CRC, sizes, origin, keys); the offsets a leader stamps
  segment.py         LogSegment: one .log file with its .index, .timeindex and .txnindex
  index.py           the sparse offset and time indexes (mmap, binary search)
  mapped_file.py     MappedFile: a file's shared mapping that holds no descriptor (an index's mmap)
  lazy_index.py      LazyIndex: a loaded segment's index, mapped on first lookup
  transaction_index.py  TransactionIndex: a segment's .txnindex, the aborted transactions READ_COMMITTED skips
  batch_scan.py      walking RecordBatch headers in a file without decoding records
  file_slice.py      a byte range of a segment handed to the transport (sendfile where it can)
  leader_epoch.py    LeaderEpochFileCache: (epoch, start offset), OffsetsForLeaderEpoch's answers
  checkpoint.py      Kafka's checkpoint text files, written atomically
  producer_state.py  producers' sequence state, open transactions, the last stable offset; .snapshot files
  cleaner/           the log cleaner: the algorithm (Cleaner), the threads (LogCleaner), the manager, the offset map
  manager.py         LogManager: the log.dirs, loading in parallel, meta.properties, checkpoints, a dir's failure
  log_dir_failure.py LogDirFailureChannel: where an I/O error on a log dir is reported (the dir goes offline)
  dump.py            kafka-dump-log's output for `minibroker dump-log`
A log's configs (LogConfig) are broker/config/log_config.py. The record format itself (RecordBatch v2) is
common/record.py: the client and the audit share it.
"""

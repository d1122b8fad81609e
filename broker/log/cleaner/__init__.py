"""The log cleaner (Kafka's kafka.log.LogCleaner and friends): compaction of cleanup.policy=compact logs.

  algorithm.py   Cleaner: one cleaning of one log (Kafka's LogCleaner.Cleaner): map the dirty section, recopy, swap
  threads.py     LogCleaner: the log.cleaner.threads threads, their stats lines and metrics; CleanerConfig
  manager.py     LogCleanerManager: which compacted log to clean next; cleaner-offset-checkpoint
  offset_map.py  SkimpyOffsetMap: the cleaning's bounded key -> last offset map (Kafka's OffsetMap)
  transactions.py  CleanedTransactionMetadata: aborted transactions' batches and spent markers go
The swap of cleaned segments into the log is Log.replace_segments (../log.py); completing a swap a crash
interrupted is the LogLoader's (../log_loader.py).
"""

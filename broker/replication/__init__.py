"""Replication state (Kafka 2.x's kafka.cluster.Partition / Replica and server.ReplicaManager).

  rules.py                   every rule that decides the ISR and the HW, as plain functions over plain
                             state (no clock, lock, ZooKeeper, gRPC or Prometheus in its import graph)
  partition.py               Partition: roles, the HW, the ISR, appends and reads, under one lock;
                             an injected clock, no I/O but its Log
  replica.py                 Replica: a follower as its leader sees it (LEO, lastCaughtUpTimeMs)
  offset_metadata.py         LogOffsetMetadata helpers (an offset with or without its place in the log)
  partition_state_store.py   where a leader's conditional ISR writes go (ZooKeeper in production)
  isr_change_propagation.py  batched /isr_change_notification writes for the controller
  replica_manager.py         ReplicaManager: LeaderAndIsr / StopReplica, produce and fetch across partitions,
                             the ISR shrink task, the fetchers and purgatories it drives
  delayed_produce.py         DelayedProduce (acks=all: until the HW passes its last offset; min.insync.replicas
                             is checked by rules.py) and ProducePartitionResponse, the produce answer
  delayed_fetch.py           DelayedFetch (long poll: until min_bytes or max_wait_ms) and a fetch's vocabulary:
                             FetchParams, PartitionFetchInfo, LogReadResult, FetchResults
  local_log_read.py          a fetch's read of its partitions' logs (max_bytes, KIP-74), stoppable after any
                             partition, and its reader that runs it on the event loop a chunk per callback
  fetch_session.py           KIP-227 fetch sessions on the leader (FetchSessionCache, the fetch contexts):
                             what an incremental fetch reads (named or changed partitions) and answers
  delayed_delete_records.py  DeleteRecords: until every in-sync replica's log start offset reached the offset
  log_dirs.py                DescribeLogDirs' answer: each log dir's replicas, sizes, lags and capacity
"""

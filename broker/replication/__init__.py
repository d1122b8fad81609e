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
"""

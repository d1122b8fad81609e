"""The broker (Kafka 2.x's kafka.server + kafka.cluster + kafka.log, ZooKeeper era), in layers.

Each layer imports only those listed after it: api -> coordinator -> server -> replication, fetcher, purgatory
-> log, and all of them -> common/, proto/, zk/; server/kafka_server.py, which builds everything, is the one
exception. Replication never imports a coordinator: the server injects the coordinator as the ReplicaManager's
leadership listener. Never controller/ (tests/unit/test_import_contracts.py checks both).

Where the rules live:
  High watermark     broker/replication/rules.py  leader_high_watermark (min LEO over the maximal ISR,
                     forward only), follower_high_watermark (min(own LEO, leader HW)), and the
                     min.insync.replicas checks (acks_all_append_allowed, acks_all_completion)
  ISR                broker/replication/rules.py  shrink: out_of_sync_replicas (replica.lag.time.max.ms over
                     lastCaughtUpTimeMs, caught_up_time_after_fetch); expand: is_follower_in_sync (HW and
                     epoch start, KAFKA-7128); maximal_isr while a write is pending. The conditional ZooKeeper
                     write: replication/partition.py + replication/partition_state_store.py
  Truncation         broker/fetcher/truncation.py  where a follower truncates (OffsetsForLeaderEpoch, KIP-101/
                     KIP-279, or its HW); the epoch cache it asks: broker/log/leader_epoch.py
  Leader election    controller/election.py (the controller decides; a broker never elects)
  Group coordinator  broker/coordinator/group/group_coordinator.py  JoinGroup/SyncGroup/Heartbeat/LeaveGroup and
                     commit rules; group_metadata.py the state machine; group_metadata_manager.py partitionFor,
                     storage in __consumer_offsets, loading on leadership; records.py Kafka's record schemas
  File format        common/record.py  RecordBatch v2 byte for byte (shared with the client and the audit);
                     broker/log/files.py  every file name on disk; log/segment.py, log/index.py (.index,
                     .timeindex), log/checkpoint.py (checkpoint text), log/log.py (append, read, recovery)

Packages:
  log/          the partition log: segments, indexes, checkpoints, recovery, producer state, LogManager
  replication/  Partition, Replica, the rules above, ReplicaManager (the partitions this broker hosts)
  fetcher/      follower fetcher threads: one per (leader, fetcher id), truncation, the gRPC leader end
  purgatory/    delayed operations: DelayedProduce (acks=all), DelayedFetch (long poll), DelayedCreateTopics,
                the group coordinator's DelayedJoin / InitialDelayedJoin / DelayedHeartbeat
  coordinator/  the group coordinator on the replicated, compacted __consumer_offsets (membership, rebalances,
                committed offsets; loaded when this broker becomes a partition's leader)
  api/          request adapters: the gRPC KafkaApis today (grpc_apis.py); Kafka's wire protocol in api/kafka/
  server/       the process: KafkaServer start-up, KafkaConfig, topic configs, scheduler, metrics,
                MetadataCache, AdminManager, producer ids, group offsets (ZooKeeper's, for the gRPC door)
"""

"""The broker (Kafka 2.x's kafka.server + kafka.cluster + kafka.log, ZooKeeper era), in layers.

Each layer imports only the layers below it, top to bottom (siblings on one line import neither the other):

  server/                      the process: KafkaServer wires everything; no other broker package imports it
  api/                         the two front doors (gRPC; Kafka's wire protocol in api/kafka/)
  coordinator/                 the group coordinator on __consumer_offsets, the transaction coordinator on
                               __transaction_state (siblings: neither imports the other)
  admin/                       CreateTopics and the other admin requests' rules, DelayedCreateTopics
  replication/                 Partition, ReplicaManager, DelayedProduce / DelayedFetch / DelayedDeleteRecords
  fetcher/                     follower fetcher threads (a partition through its own FollowerPartition protocol)
  log/ | security/             the partition log (and its cleaner); TLS, SASL and who a connection is
  config/                      KafkaConfig, LogConfig, topic configs, metrics, MetadataCache
  purgatory/                   the purgatory, its timer, the completion (the ground floor)

and all of them -> common/, proto/, zk/; never controller/. pyproject.toml's "broker-layers" contract checks the
order (tests/unit/test_import_contracts.py shows it fails on an upward import; scripts/package_graph.py prints the
graph). Replication never imports a coordinator: the server injects the coordinator as the ReplicaManager's
leadership listener.

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
                     commit rules; group_metadata.py the state machine and the pending (transactional)
                     offsets; group_metadata_manager.py partitionFor, storage in __consumer_offsets, loading on
                     leadership, markers completing offsets; records.py Kafka's record schemas
  Transaction        broker/coordinator/transaction/transaction_coordinator.py  InitProducerId, AddPartitionsToTxn,
  coordinator        EndTxn; transaction_metadata.py the state machine; transaction_state_manager.py partitionFor,
                     storage in __transaction_state, loading on leadership, expiry; transaction_marker_channel.py
                     the markers to the partitions' leaders; transaction_log.py Kafka's record schemas
  Transactions       broker/log/producer_state.py  each producer's open transaction, completed by its marker, and
  (partition side)   the last stable offset (first unstable offset capped by the HW); log/transaction_index.py
                     (.txnindex, collectAbortedTxns); log/cleaner/transactions.py (what compaction drops);
                     READ_COMMITTED reads: replication/partition.py read_records; markers' format: common/record.py
  File format        common/record.py  RecordBatch v2 byte for byte (shared with the client and the audit);
                     broker/log/files.py  every file name on disk; log/segment.py, log/index.py (.index,
                     .timeindex), log/transaction_index.py (.txnindex), log/checkpoint.py (checkpoint text),
                     log/log.py (append, read), log/log_loader.py (recovery)

Packages:
  server/       the process: KafkaServer start-up and shutdown, dynamic config's listeners, the log dir failure
                handler, the scheduler
  api/          request adapters: operations.py (what both doors call), the gRPC KafkaApis (grpc_apis.py);
                Kafka's wire protocol in api/kafka/ (its API table: api/kafka/api_table.py)
  coordinator/  the group coordinator on the replicated, compacted __consumer_offsets (membership, rebalances,
                committed offsets; loaded when this broker becomes a partition's leader), with its delayed
                operations DelayedJoin / InitialDelayedJoin / DelayedHeartbeat; the transaction coordinator on
                __transaction_state (producer ids and epochs of transactional ids, transactions, their markers)
  admin/        AdminManager (CreateTopics, CreatePartitions, DeleteTopics), DelayedCreateTopics, ConfigAdmin,
                ScramAdmin, the producer id blocks
  replication/  Partition, Replica, the rules above, ReplicaManager (the partitions this broker hosts) and its
                delayed operations: DelayedProduce (acks=all), DelayedFetch (long poll), DelayedDeleteRecords
  fetcher/      follower fetcher threads: one per (leader, fetcher id), truncation, the gRPC leader end
  log/          the partition log: segments, indexes, checkpoints, LogLoader (recovery), LogValidator, producer
                state, LogManager, and the log cleaner in log/cleaner/ (algorithm.py, threads.py, manager.py,
                offset_map.py)
  security/     who is asking on the broker's listeners: TLS, SASL (PLAIN, SCRAM), the gRPC identity; what a
                principal may do (principals, ACLs, the AclAuthorizer) is common/security/, shared with the
                controller, and the ACLs' ZooKeeper store zk/acl_store.py
  config/       KafkaConfig, LogConfig, topic configs, which broker configs may change live, BrokerMetrics,
                MetadataCache
  purgatory/    the purgatory: delayed operations watched by key, completed on events, expired on a timer
"""

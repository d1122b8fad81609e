"""The broker process (Kafka 2.x's kafka.server, minus ReplicaManager and the purgatory).

  kafka_server.py        KafkaServer: start-up and shutdown order, ZooKeeper registration, the gRPC server
  config.py              KafkaConfig: every broker key with Kafka's name, type and default
  topic_config.py        a topic's effective config: /config/topics overrides over the broker's defaults
  scheduler.py           KafkaScheduler: periodic tasks on the event loop
  metrics.py             BrokerMetrics: Prometheus metrics named after Kafka's MBeans
  metadata_cache.py      MetadataCache: the cluster as UpdateMetadata last described it
  admin_manager.py       CreateTopics / CreatePartitions / DeleteTopics and auto-creation
  scram_admin.py         Describe/AlterUserScramCredentials (KIP-554): ZkAdminManager's rules over /config/users
  producer_id_manager.py producer id blocks from ZooKeeper (idempotence)
  malloc.py              glibc malloc tuning for a process that moves megabytes per request
  log_dir_failure_handler.py  takes a failed log dir's partitions offline and tells the controller (ZooKeeper)
"""

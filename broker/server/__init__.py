"""The broker process (Kafka 2.x's KafkaServer): the top layer, which wires every other; no other
broker package imports it (the `minibroker broker` command starts it).

  kafka_server.py        KafkaServer: start-up and shutdown order, ZooKeeper registration, the gRPC server
  dynamic_config.py      live configuration changes (DynamicConfigManager, ConfigChangeListener): applies them
                         to the ReplicaManager, the fetchers, the SCRAM cache
  log_dir_failure_handler.py  takes a failed log dir's partitions offline and tells the controller (ZooKeeper)
  scheduler.py           KafkaScheduler: periodic tasks on the event loop
  malloc.py              glibc malloc tuning for a process that moves megabytes per request
"""

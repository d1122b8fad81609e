"""What every layer of the broker reads (the floor above the purgatory): its configs, its metrics and the
cluster as the controller last described it. It imports no other broker package.

  kafka_config.py       KafkaConfig: every broker key with Kafka's name, type and default; the authorizer's
                        keys (authorizer.class.name, super.users)
  log_config.py         LogConfig: a log's topic-level configs and their broker-level synonyms
  topic_config.py       a topic's effective config: /config/topics overrides over the broker's defaults
  message_format.py     message.format.version / log.message.format.version: validated, warned about, ignored
  broker_overrides.py   which broker configs may change live, and the check of a set of overrides
  metrics.py            BrokerMetrics: Prometheus metrics named after Kafka's MBeans
  metadata_cache.py     MetadataCache: the cluster as UpdateMetadata last described it
"""

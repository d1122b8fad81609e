"""What the broker, the controller and the client share (Kafka keeps it in the clients' `common`).
It imports none of them (tests/unit/test_import_contracts.py).

  record.py      RecordBatch v2 (magic 2), byte for byte: header, CRC-32C, varint records, compression
  recompression.py  a batch recompressed to a topic's compression.type (Kafka's LogValidator, target codec)
  snappy.py      snappy for codec 2: the Java client's xerial framing out, raw (librdkafka) and xerial in
  config.py      Kafka's ConfigDef machinery: types, validators, ConfigError, listeners, --override
  properties.py  the Java .properties reader and writer
  assignment.py  replica assignment (AdminUtils.assignReplicasToBrokers: racks, preferred leaders)
  limits.py      wire limits (the 100 MiB gRPC message limit)
  metrics.py     MetricsEndpoint: a Prometheus registry served over HTTP
  event_ring.py  a bounded ring of the process's replication events (ISR changes, epochs, elections) with their
                 reasons, served to `minibroker console` by DescribeReplicaState and DescribeEvents
  java_hash.py   Java's String.hashCode and Kafka's Utils.abs (a group's offsets partition, a fetcher id)
  jaas.py        JAAS login configuration (java.security.auth.login.config files, sasl.jaas.config values)
  grpc_tls.py    gRPC over TLS from Kafka's PEM stores: channels and server credentials, client properties
                 (--command-config) -> GrpcSecurity, SASL users as `authorization: Basic` call credentials
  security/      principals, Kafka's ACL vocabulary and the AclAuthorizer's rules (its own map)
"""

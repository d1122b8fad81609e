"""Benchmarks: scripts run as `python bench/<name>.py`, each printing figures against a baseline measured in
the same run. A package only so that the import contracts (pyproject.toml) cover it.

  log_bench.py           the log's append and read paths against the raw system calls
  read_committed_bench.py  READ_COMMITTED's read path (LSO, aborted transactions) against READ_UNCOMMITTED
  offsets_load_bench.py  loading __consumer_offsets with transactional offsets and markers against plain ones
  cleaner_bench.py       one cleaning of a compacted log against a plain copy of the same bytes
  compaction_size.py     a compacted topic's bounded size under endless updates to a fixed key set
  client_bench.py        client CPU per record (send path, decode path), no broker
  client_read_committed_bench.py  the consumer's READ_COMMITTED filter on a fetch answer against READ_UNCOMMITTED
  client_transactions.py the project's transactional producer committing every N records against the idempotent one
  transactions.py        confluent-kafka's transactional producer (a commit every 100, 1,000, 10,000 records) against
                         its idempotent one, and read_committed consume against read_uncommitted
  proto_bytes.py         protobuf's cost on the data path
  grpc_round_trip.py     CPU of one Produce / Fetch round trip over grpc.aio on loopback
  kafka_codec_bench.py   the Kafka wire codec's cost on the Produce path
  kafka_vs_grpc.py       one workload through both front doors of one cluster
  tls_bench.py           TLS (and SASL) on the Kafka listener against plaintext
  cluster_perf.py        end-to-end throughput of a real one-broker cluster
  replication_bench.py   throughput by acks and replication factor, latency under acks=all
  failover_bench.py      a partition's unavailability when its leader is killed or stopped
  partition_failover.py  a partitioned leader against a killed one (`cluster up --netns`, root only)
  restart_bench.py       a broker restart, phase by phase
  group_rebalance.py     consumer-group rebalance times
  audit_bench.py         the Spark audit against plain Python reading the same files
  spark_source.py        the `minibroker` Spark source and sink against confluent-kafka's consumer and producer
  console_cost.py        what an open web console costs the brokers (requests/s, CPU)
  recompression_bench.py a topic's compression.type: the leader's recompression against storing batches as sent
  free_loop.py           a Kafka connection's round trip while a wide topic is created, segments roll and
                         ZooKeeper is paused; a hostile pipeliner's cost
  roll_append.py         what a segment roll costs the append that causes it
  producer_expiry.py     what idle producer ids cost and what the expiration check gives back
  partitions.py          what a partition costs: N partitions at RF=3 (or N topics) against N=100, step by step
  stall_trace/           a sitecustomize that makes each broker write its event loop's stalls (partitions.py's
                         --trace-stalls)
"""

"""Subcommands of the `minibroker` command line, one module each, named as its command (minibroker/cli.py wires
them and imports only the one a command line names).

Processes and clusters:
  broker.py            `minibroker broker`: run one broker
  controller.py        `minibroker controller`: run a controller process
  cluster.py           `minibroker cluster up | status | down | restart-broker | restart-zookeeper` (local_cluster/)
  demo.py              `minibroker demo`: a 3-broker cluster at work, start to finish
  health.py            `minibroker health`: container healthchecks
Kafka's tools:
  topics.py            kafka-topics.sh
  configs.py           kafka-configs.sh: topic and dynamic broker configs, users' SCRAM credentials
  acls.py              kafka-acls.sh
  transactions.py      kafka-transactions.sh (describe-producers)
  console_producer.py  kafka-console-producer.sh
  console_consumer.py  kafka-console-consumer.sh
  consumer_groups.py   kafka-consumer-groups.sh
  get_offsets.py       kafka-get-offsets.sh
  delete_records.py    kafka-delete-records.sh
  leader_election.py   kafka-leader-election.sh
  reassign_partitions.py  kafka-reassign-partitions.sh, through ZooKeeper
  reassignment_json.py    what reassign-partitions reads, checks and prints (pure)
  perf.py              the performance tools (produce, consume, end-to-end)
  dump_log.py          kafka-dump-log.sh
  zookeeper_security_migration.py  zookeeper-security-migration.sh
Tooling:
  chaos.py             `minibroker chaos run | check`
  audit.py             `minibroker audit`: the Spark log audit
  pipeline.py          `minibroker pipeline`: the example Spark Structured Streaming job on topics
  console.py           `minibroker console`: the live web console of replication (console/)
Shared:
  client_options.py    where the cluster is, and Kafka's key=value client settings
  kafka_admin.py       kafka-python's KafkaAdminClient for the tools on the Kafka listeners (acls, transactions)
  listener_probe.py    whether a --bootstrap-server address is a gRPC or a Kafka listener, for a one-line refusal
  usage.py             usage errors found after argparse has parsed a command line
  extras.py            the optional extras some commands need (PySpark, matplotlib)
"""

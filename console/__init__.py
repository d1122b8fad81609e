"""`minibroker console`: a live web console of replication (tooling, like chaos/: it reaches the cluster only
through the project's client, its gRPC contract and, for a local cluster, local_cluster).

  view.py       plain functions: Metadata + each broker's DescribeReplicaState -> the page's partitions, cluster,
                topics and group lag (a follower in sync, late, out of the ISR or not answering)
  collector.py  Collector: the one poller (a thread, only while a page streams: Pages) and its latest Picture;
                the merged event timeline
  log_dirs.py   LogDirs: each replica's bytes from DescribeLogDirs on the Kafka listeners (kafka-python's
                KafkaAdminClient); replica_sizes() reads its answers
  local.py      LocalProcesses: a --data-dir cluster's processes (/proc), ZooKeeper modes, the controller's
                address, and the faults (SIGKILL/SIGSTOP/SIGCONT/restart a broker, kill the controller)
  zookeeper.py  zookeeper_picture(): a local cluster's ZooKeeper members and their `srvr` mode, the controller and
                its epoch
  remote.py     RemoteCluster: a --bootstrap-server cluster through its brokers alone: the controller's events, epoch
                and ZooKeeper modes forwarded by a broker, a Kafka listener from a broker's own DescribeConfigs
                (kafka_listener(): the rule, no I/O)
  server.py     the aiohttp app: the page, /api/stream (server-sent events), /api/picture, /api/faults
  main.py       serve(): the collector and the server until Ctrl-C
  static/       index.html, console.js, console.css: the page, shipped as package data
"""

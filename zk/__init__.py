"""ZooKeeper: the path layout and znode formats (Kafka's ZK-era layout), the client wrapper, and a local server launcher."""

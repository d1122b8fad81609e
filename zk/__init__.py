"""ZooKeeper, Kafka 2.x style: the znode layout and formats (paths), the client (client), a local server or the
members of a local ensemble (server)."""

"""minibroker: a mini Kafka (ZooKeeper-era replication) in Python.

The public face: the Python client (kafka-python's shapes) and the `minibroker` command line (minibroker/cli.py).
"""

from client import Admin, Consumer, NewTopic, Producer, TopicPartition

__all__ = ["Admin", "Consumer", "NewTopic", "Producer", "TopicPartition"]

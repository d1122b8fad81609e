"""Small value types shared by broker, controller and client."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """Kafka's TopicPartition (kafka-python's shape: a (topic, partition) tuple)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        # Kafka's TopicPartition.toString, also the partition's log directory name.
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TopicPartition:
        """Inverse of str(): the partition number is after the last '-' (topics may contain '-')."""
        topic, sep, partition = text.rpartition("-")
        if not sep or not topic or not partition.isdigit():
            raise ValueError(f"{text!r} is not <topic>-<partition>")
        return cls(topic, int(partition))

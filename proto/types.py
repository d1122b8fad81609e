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


# JoinGroupRequest.UNKNOWN_MEMBER_ID: a member's id before its first JoinGroup answer (both ends of a group).
UNKNOWN_MEMBER_ID = ""

# Kafka's SecurityProtocol names and ids (the ids travel in UpdateMetadata).
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class EndPoint(NamedTuple):
    """Where a broker listens or is reached on one listener (Kafka's kafka.cluster.EndPoint):
    an entry of `listeners` / `advertised.listeners` and of a /brokers/ids registration."""

    listener_name: str
    host: str  # "" binds the default interface, as in Kafka
    port: int  # 0 binds an ephemeral port
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        """`NAME://host:port`, an IPv6 host in brackets so it parses back."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


# The controller's gRPC service by its full name (package minibroker), as grpc.health.v1 is asked about it: a
# controller reports it SERVING, a broker's health service does not know it (NOT_FOUND), so `minibroker health
# --controller` pointed at a broker says so instead of calling it healthy.
CONTROLLER_SERVICE = "minibroker.KafkaController"

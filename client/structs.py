"""The value types a client hands out, in kafka-python's shapes (kafka.structs).

NamedTuples: immutable, cheap to build (a consumer builds one per record), and
unpackable the way kafka-python users are used to.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from proto.types import TopicPartition

Header = tuple[str, bytes | None]


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed (Kafka's RecordMetadata).

    `offset` is -1 with acks=0: nothing comes back to say where it went.
    `timestamp` is the broker's LogAppendTime when the topic uses it, the
    record's CreateTime otherwise.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    log_start_offset: int
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class ConsumerRecord(NamedTuple):
    """One record as poll() returns it (kafka-python's ConsumerRecord).

    Sizes are of the serialized key / value / headers, -1 when null.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[Header, ...]
    leader_epoch: int
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


class OffsetAndMetadata(NamedTuple):
    """A committed position: the offset of the next record to consume."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class ConsumerGroupMetadata(NamedTuple):
    """A group member's identity for send_offsets_to_transaction (Java's ConsumerGroupMetadata, kafka-python's):
    KIP-447 lets the group coordinator refuse offsets from a member whose generation has passed."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class OffsetAndTimestamp(NamedTuple):
    """The answer of offsets_for_times: the first offset whose timestamp is >= the one asked for."""

    offset: int
    timestamp: int
    leader_epoch: int = -1


class BrokerMetadata(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)


class PartitionMetadata(NamedTuple):
    """One partition as the last Metadata response described it (leader -1: none)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error_code: int


def format_address(host: str, port: int) -> str:
    """Kafka's Utils.formatAddress: IPv6 literals go in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

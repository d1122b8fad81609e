"""Kafka's ConsumerProtocol: the bytes a consumer group's members exchange through the coordinator.

A member's JoinGroup protocols carry its Subscription (the topics it wants, the
partitions it owns) under protocol type "consumer", one entry per assignor it
supports; the leader's SyncGroup carries each member's Assignment. Both are an
int16 version followed by the ConsumerProtocolSubscription /
ConsumerProtocolAssignment schema of that version (kio's generated classes), so
a project-client member and a Java, librdkafka or kafka-python member of one
group read each other's bytes. As Kafka's ConsumerProtocol does, a version newer
than the newest schema known here is read with that newest schema: versions only
append fields.
"""

from __future__ import annotations

import functools
import io
import struct
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition

PROTOCOL_TYPE = "consumer"
VERSION = struct.Struct(">h")


@functools.cache
def _kio() -> SimpleNamespace:
    """kio's schemas and serializers, imported on first use: kio pulls in hypothesis (~1.5 s), which a client
    that never joins a group, and every command-line tool, should not pay for at start-up."""
    from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment as AssignmentV0
    from kio.schema.consumer_protocol_assignment.v0.data import TopicPartition as AssignmentPartitionsV0
    from kio.schema.consumer_protocol_assignment.v1.data import ConsumerProtocolAssignment as AssignmentV1
    from kio.schema.consumer_protocol_assignment.v2.data import ConsumerProtocolAssignment as AssignmentV2
    from kio.schema.consumer_protocol_assignment.v3.data import ConsumerProtocolAssignment as AssignmentV3
    from kio.schema.consumer_protocol_subscription.v0.data import ConsumerProtocolSubscription as SubscriptionV0
    from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription as SubscriptionV1
    from kio.schema.consumer_protocol_subscription.v1.data import TopicPartition as OwnedPartitionsV1
    from kio.schema.consumer_protocol_subscription.v2.data import ConsumerProtocolSubscription as SubscriptionV2
    from kio.schema.consumer_protocol_subscription.v3.data import ConsumerProtocolSubscription as SubscriptionV3
    from kio.schema.types import TopicName
    from kio.serial import entity_reader, entity_writer
    from kio.static.primitive import i32

    return SimpleNamespace(
        subscriptions=(SubscriptionV0, SubscriptionV1, SubscriptionV2, SubscriptionV3),
        assignments=(AssignmentV0, AssignmentV1, AssignmentV2, AssignmentV3),
        owned_partitions=OwnedPartitionsV1, assigned_partitions=AssignmentPartitionsV0, topic_name=TopicName,
        i32=i32, entity_reader=entity_reader, entity_writer=entity_writer)


@dataclass(frozen=True)
class Subscription:
    """What a member tells the group's leader: the topics it subscribes to and the partitions it owns."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True)
class Assignment:
    """What the leader hands a member: its partitions."""

    partitions: tuple[TopicPartition, ...] = field(default=())
    user_data: bytes | None = None


def encode_subscription(subscription: Subscription) -> bytes:
    """Version 1 (owned partitions, for the cooperative protocol): what Kafka 2.4+ clients write and every
    client since 0.9 can read (they read the version-0 fields and skip the rest)."""
    kio = _kio()
    entity = kio.subscriptions[1](
        topics=tuple(subscription.topics), user_data=subscription.user_data,
        owned_partitions=tuple(kio.owned_partitions(topic=kio.topic_name(topic), partitions=tuple(map(kio.i32, parts)))
                               for topic, parts in _by_topic(subscription.owned_partitions)))
    return _write(1, entity)


def decode_subscription(data: bytes) -> Subscription:
    entity = _read(_kio().subscriptions, data, "subscription")
    owned = getattr(entity, "owned_partitions", ())
    return Subscription(
        topics=tuple(entity.topics), user_data=entity.user_data,
        owned_partitions=tuple(TopicPartition(t.topic, p) for t in owned for p in t.partitions),
        generation_id=getattr(entity, "generation_id", -1), rack_id=getattr(entity, "rack_id", None))


def encode_assignment(assignment: Assignment) -> bytes:
    """Version 0: the schema has not changed since (later versions only renumber it)."""
    kio = _kio()
    entity = kio.assignments[0](assigned_partitions=tuple(
        kio.assigned_partitions(topic=kio.topic_name(topic), partitions=tuple(map(kio.i32, parts)))
        for topic, parts in _by_topic(assignment.partitions)), user_data=assignment.user_data)
    return _write(0, entity)


def decode_assignment(data: bytes) -> Assignment:
    """An empty assignment is zero bytes in Kafka (a member the leader gave nothing to, or no leader answer)."""
    if not data:
        return Assignment()
    entity = _read(_kio().assignments, data, "assignment")
    return Assignment(tuple(TopicPartition(t.topic, p) for t in entity.assigned_partitions for p in t.partitions),
                      entity.user_data)


def _write(version: int, entity: Any) -> bytes:
    out = io.BytesIO()
    out.write(VERSION.pack(version))
    _kio().entity_writer(type(entity))(out, entity)
    return out.getvalue()


def _read(schemas: tuple[type[Any], ...], data: bytes, what: str) -> Any:
    if len(data) < VERSION.size:
        raise KafkaError(f"consumer protocol {what} of {len(data)} bytes has no version", ErrorCode.INVALID_REQUEST)
    (version,) = VERSION.unpack_from(data)
    if version < 0:
        raise KafkaError(f"consumer protocol {what} has the negative version {version}", ErrorCode.INVALID_REQUEST)
    try:
        entity, _ = _kio().entity_reader(schemas[min(version, len(schemas) - 1)])(data, VERSION.size)
    except Exception as e:
        raise KafkaError(f"malformed consumer protocol {what} v{version}: {e}", ErrorCode.INVALID_REQUEST) from None
    return entity


def _by_topic(partitions: tuple[TopicPartition, ...]) -> list[tuple[str, list[int]]]:
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return [(topic, sorted(parts)) for topic, parts in grouped.items()]

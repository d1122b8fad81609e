"""Metadata 0-8: brokers as reached on the client's listener, topics, partitions (leader epochs from v7).

controller_id names this broker: a Kafka client sends CreateTopics / DeleteTopics to the "controller", and
every broker here takes them (AdminManager writes ZooKeeper; the controller process acts on it), while the
real controller is not a broker a client could reach.
"""

from __future__ import annotations

import importlib
from typing import Any

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, build, encode, kio_error, millis


async def handle_metadata(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    version = header.api_version
    schema = importlib.import_module(f"kio.schema.metadata.v{version}.response")
    topics = None if request.topics is None else [t.name for t in request.topics]
    if version == 0 and not topics:
        topics = None  # v0: an empty list means all topics
    # v0-v3 have no allow_auto_topic_creation: those clients always ask for it (Kafka's default).
    allow_auto = getattr(request, "allow_auto_topic_creation", True)
    found = await context.operations.metadata(context.session, topics, allow_auto, context.listener_name)
    brokers = tuple(build(schema.MetadataResponseBroker, node_id=n.id, host=n.host, port=n.port, rack=n.rack)
                    for n in found.brokers)
    topic_entries = []
    for name, error, metadata in found.topics:
        partitions = () if metadata is None else tuple(
            build(schema.MetadataResponsePartition, error_code=kio_error(p.error), partition_index=p.partition,
                  leader_id=p.leader, leader_epoch=p.leader_epoch, replica_nodes=tuple(p.replicas),
                  isr_nodes=tuple(p.isr), offline_replicas=tuple(p.offline_replicas))
            for p in metadata.partitions)
        topic_entries.append(build(schema.MetadataResponseTopic, error_code=kio_error(error), name=name,
                                   is_internal=False, partitions=partitions, topic_authorized_operations=-2147483648))
    return encode(build(schema.MetadataResponse, throttle_time=millis(0), brokers=brokers,
                        cluster_id=context.cluster_id, controller_id=context.broker_id, topics=tuple(topic_entries),
                        cluster_authorized_operations=-2147483648))

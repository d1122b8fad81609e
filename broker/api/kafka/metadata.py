"""Metadata 0-8: brokers as reached on the client's listener, topics, partitions (leader epochs from v7), and
from v8, when asked, the authorized operations of the cluster and of each topic (KIP-430, as KafkaApis: the
cluster's are 0 to a principal that may not Describe it; a topic refused TOPIC_AUTHORIZATION_FAILED keeps the
"omitted" value).

controller_id names this broker: a Kafka client sends CreateTopics / DeleteTopics to the "controller", and
every broker here takes them (AdminManager writes ZooKeeper; the controller process acts on it), while the
real controller is not a broker a client could reach.
"""

from __future__ import annotations

import importlib
from typing import Any

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, build, encode, kio_error, millis
from broker.api.operations import INTERNAL_TOPICS
from common.security.acl import AUTHORIZED_OPERATIONS_OMITTED, ResourceType
from proto.errors import ErrorCode


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
    with_topic_operations = getattr(request, "include_topic_authorized_operations", False)
    topic_entries = []
    for name, error, metadata in found.topics:
        partitions = () if metadata is None else tuple(
            build(schema.MetadataResponsePartition, error_code=kio_error(p.error), partition_index=p.partition,
                  leader_id=p.leader, leader_epoch=p.leader_epoch, replica_nodes=tuple(p.replicas),
                  isr_nodes=tuple(p.isr), offline_replicas=tuple(p.offline_replicas))
            for p in metadata.partitions)
        # Once per topic, whatever its partition count; the refused ones are not among Kafka's topicMetadata.
        operations = (context.operations.authorized_operations(context.session, ResourceType.TOPIC, name)
                      if with_topic_operations and error is not ErrorCode.TOPIC_AUTHORIZATION_FAILED
                      else AUTHORIZED_OPERATIONS_OMITTED)
        topic_entries.append(build(schema.MetadataResponseTopic, error_code=kio_error(error), name=name,
                                   is_internal=name in INTERNAL_TOPICS, partitions=partitions,
                                   topic_authorized_operations=operations))
    cluster_operations = (context.operations.cluster_authorized_operations(context.session)
                          if getattr(request, "include_cluster_authorized_operations", False)
                          else AUTHORIZED_OPERATIONS_OMITTED)
    return encode(build(schema.MetadataResponse, throttle_time=millis(0), brokers=brokers,
                        cluster_id=context.cluster_id, controller_id=context.broker_id, topics=tuple(topic_entries),
                        cluster_authorized_operations=cluster_operations))

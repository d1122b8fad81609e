"""CreateTopics 2-4, DeleteTopics 1-3, CreatePartitions 0-3, DescribeConfigs 1-3, AlterConfigs 0-1 and
IncrementalAlterConfigs 0-1 (the last two through broker/admin/config_admin.py, as on the gRPC door).

Topics are created and deleted through the AdminManager, which writes ZooKeeper as Kafka 2.x's
AdminZkClient does; the controller process picks the change up from there. Every broker takes these
requests (Metadata's controller_id names the broker the client asked), so a client never needs to reach the
controller process.
"""

from __future__ import annotations

import importlib
from typing import Any

from broker.admin.admin_manager import NewPartitions, NewTopic
from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, build, encode, kio_error, millis, to_millis


async def handle_create_topics(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.create_topics.v{header.api_version}.response")
    topics = [NewTopic(t.name, t.num_partitions, t.replication_factor,
                       [(a.partition_index, tuple(a.broker_ids)) for a in t.assignments],
                       [(c.name, c.value) for c in t.configs])
              for t in request.topics]
    results = await context.operations.create_topics(context.session, topics, request.validate_only,
                                                      to_millis(request.timeout))
    return encode(build(schema.CreateTopicsResponse, throttle_time=millis(0), topics=tuple(
        build(schema.CreatableTopicResult, name=r.name, error_code=kio_error(r.error),
              error_message=r.message or None)
        for r in results)))


async def handle_delete_topics(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.delete_topics.v{header.api_version}.response")
    results = await context.operations.delete_topics(context.session, list(request.topic_names))
    return encode(build(schema.DeleteTopicsResponse, throttle_time=millis(0), responses=tuple(
        build(schema.DeletableTopicResult, name=r.name, error_code=kio_error(r.error)) for r in results)))


async def handle_describe_configs(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    """The same ConfigAdmin as the gRPC door: topic overrides over the broker's defaults, dynamic broker configs."""
    schema = importlib.import_module(f"kio.schema.describe_configs.v{header.api_version}.response")
    resources = [(int(r.resource_type), r.resource_name,
                  None if r.configuration_keys is None else list(r.configuration_keys)) for r in request.resources]
    results = await context.operations.describe_configs(context.session, resources)
    return encode(build(schema.DescribeConfigsResponse, throttle_time=millis(0), results=tuple(
        build(schema.DescribeConfigsResult, error_code=kio_error(r.error), error_message=r.message,
              resource_type=r.resource_type, resource_name=r.resource_name,
              configs=tuple(
                  build(schema.DescribeConfigsResourceResult, name=e.name, value=e.value, read_only=e.read_only,
                        config_source=int(e.source), is_sensitive=e.is_sensitive, synonyms=(), config_type=0,
                        documentation=None)
                  for e in r.entries)) for r in results)))


async def handle_alter_configs(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.alter_configs.v{header.api_version}.response")
    resources = [(int(r.resource_type), r.resource_name, {c.name: c.value for c in r.configs})
                 for r in request.resources]
    results = await context.operations.alter_configs(context.session, resources, request.validate_only,
                                                      incremental=False)
    return encode(build(schema.AlterConfigsResponse, throttle_time=millis(0), responses=tuple(
        build(schema.AlterConfigsResourceResponse, error_code=kio_error(r.error), error_message=r.message,
              resource_type=r.resource_type, resource_name=r.resource_name) for r in results)))


async def handle_incremental_alter_configs(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.incremental_alter_configs.v{header.api_version}.response")
    resources = [(int(r.resource_type), r.resource_name,
                  [(c.name, int(c.config_operation), c.value) for c in r.configs]) for r in request.resources]
    results = await context.operations.alter_configs(context.session, resources, request.validate_only,
                                                      incremental=True)
    return encode(build(schema.IncrementalAlterConfigsResponse, throttle_time=millis(0), responses=tuple(
        build(schema.AlterConfigsResourceResponse, error_code=kio_error(r.error), error_message=r.message,
              resource_type=r.resource_type, resource_name=r.resource_name) for r in results)))


async def handle_create_partitions(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    """CreatePartitions 0-3 (Kafka 2.8's range; v2 is the flexible v1, v3 the same): Alter on each topic."""
    schema = importlib.import_module(f"kio.schema.create_partitions.v{header.api_version}.response")
    requests = [NewPartitions(t.name, t.count, None if t.assignments is None
                              else [tuple(a.broker_ids) for a in t.assignments])
                for t in request.topics]
    results = await context.operations.create_partitions(context.session, requests, request.validate_only,
                                                          to_millis(request.timeout))
    return encode(build(schema.CreatePartitionsResponse, throttle_time=millis(0), results=tuple(
        build(schema.CreatePartitionsTopicResult, name=r.name, error_code=kio_error(r.error),
              error_message=r.message or None)
        for r in results)))

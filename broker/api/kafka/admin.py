"""CreateTopics 2-4, DeleteTopics 1-3, DescribeConfigs 1-3, AlterConfigs 0-1 and IncrementalAlterConfigs 0-1
(the last two through broker/server/config_admin.py, as on the gRPC door).

Topics are created and deleted through the AdminManager, which writes ZooKeeper as Kafka 2.x's
AdminZkClient does; the controller process picks the change up from there. Every broker takes these
requests (Metadata's controller_id names the broker the client asked), so a client never needs to reach the
controller process.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Mapping
from typing import Any

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, build, encode, kio_error, millis, to_millis
from broker.server.admin_manager import NewTopic
from broker.server.topic_config import TOPIC_CONFIG_KEYS
from proto.errors import ErrorCode, KafkaError

# DescribeConfigs resource types and config sources (Kafka's ConfigResource.Type, DescribeConfigsResponse).
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
TOPIC_CONFIG_SOURCE = 1
STATIC_BROKER_CONFIG_SOURCE = 4
DEFAULT_CONFIG_SOURCE = 5

# A topic config's broker-wide default (Kafka's LogConfig.TopicConfigSynonyms).
TOPIC_CONFIG_SYNONYMS = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "preallocate": "log.preallocate",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "cleanup.policy": "log.cleanup.policy",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
}
# Topic configs with one possible value here (broker/topic_config.py accepts only these).
FIXED_TOPIC_CONFIGS = {"compression.type": "producer"}


async def handle_create_topics(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.create_topics.v{header.api_version}.response")
    topics = [NewTopic(t.name, t.num_partitions, t.replication_factor,
                       [(a.partition_index, tuple(a.broker_ids)) for a in t.assignments],
                       [(c.name, c.value) for c in t.configs])
              for t in request.topics]
    results = await context.operations.create_topics(topics, request.validate_only, to_millis(request.timeout))
    return encode(build(schema.CreateTopicsResponse, throttle_time=millis(0), topics=tuple(
        build(schema.CreatableTopicResult, name=r.name, error_code=kio_error(r.error),
              error_message=r.message or None)
        for r in results)))


async def handle_delete_topics(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.delete_topics.v{header.api_version}.response")
    results = await context.operations.delete_topics(list(request.topic_names))
    return encode(build(schema.DeleteTopicsResponse, throttle_time=millis(0), responses=tuple(
        build(schema.DeletableTopicResult, name=r.name, error_code=kio_error(r.error)) for r in results)))


def _java_string(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def topic_configs(context: KafkaContext, topic: str, overrides: Mapping[str, str]
                  ) -> list[tuple[str, str | None, int]]:
    """(name, value, source) of every topic config: the topic's override, else the broker's default."""
    broker_values = context.config.values()
    broker_values.update(context.config.log_properties())
    entries: list[tuple[str, str | None, int]] = []
    for name in sorted(TOPIC_CONFIG_KEYS):
        if name in overrides:
            entries.append((name, overrides[name], TOPIC_CONFIG_SOURCE))
        elif name in FIXED_TOPIC_CONFIGS:
            entries.append((name, FIXED_TOPIC_CONFIGS[name], DEFAULT_CONFIG_SOURCE))
        else:
            synonym = TOPIC_CONFIG_SYNONYMS.get(name)
            value = broker_values.get(synonym) if synonym is not None else None
            entries.append((name, _java_string(value), DEFAULT_CONFIG_SOURCE))
    return entries


def broker_configs(context: KafkaContext) -> list[tuple[str, str | None, int]]:
    return [(name, "[hidden]" if "credential" in name and value is not None else _java_string(value),
             STATIC_BROKER_CONFIG_SOURCE)
            for name, value in sorted(context.config.values().items())]


async def _describe(context: KafkaContext, resource_type: int, name: str
                    ) -> tuple[ErrorCode, str | None, list[tuple[str, str | None, int]]]:
    if resource_type == TOPIC_RESOURCE:
        if not context.operations.metadata_cache.contains_topic(name):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist", []
        try:
            overrides = await asyncio.to_thread(context.topic_overrides, name)
        except KafkaError as e:
            return e.code, str(e), []
        return ErrorCode.NONE, None, topic_configs(context, name, overrides)
    if resource_type == BROKER_RESOURCE:
        if name != str(context.broker_id):
            return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {context.broker_id}, got {name}", []
        return ErrorCode.NONE, None, broker_configs(context)
    return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}", []


async def handle_describe_configs(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.describe_configs.v{header.api_version}.response")
    results = []
    for resource in request.resources:
        error, message, entries = await _describe(context, resource.resource_type, resource.resource_name)
        wanted = None if resource.configuration_keys is None else set(resource.configuration_keys)
        results.append(build(
            schema.DescribeConfigsResult, error_code=kio_error(error), error_message=message,
            resource_type=resource.resource_type, resource_name=resource.resource_name,
            configs=tuple(
                build(schema.DescribeConfigsResourceResult, name=name, value=value, read_only=True,
                      config_source=source, is_sensitive=False, synonyms=(), config_type=0, documentation=None)
                for name, value, source in entries if wanted is None or name in wanted)))
    return encode(build(schema.DescribeConfigsResponse, throttle_time=millis(0), results=tuple(results)))


async def handle_alter_configs(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.alter_configs.v{header.api_version}.response")
    resources = [(int(r.resource_type), r.resource_name, {c.name: c.value for c in r.configs})
                 for r in request.resources]
    results = await asyncio.to_thread(context.config_admin.alter_configs, resources, request.validate_only)
    return encode(build(schema.AlterConfigsResponse, throttle_time=millis(0), responses=tuple(
        build(schema.AlterConfigsResourceResponse, error_code=kio_error(r.error), error_message=r.message,
              resource_type=r.resource_type, resource_name=r.resource_name) for r in results)))


async def handle_incremental_alter_configs(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.incremental_alter_configs.v{header.api_version}.response")
    resources = [(int(r.resource_type), r.resource_name,
                  [(c.name, int(c.config_operation), c.value) for c in r.configs]) for r in request.resources]
    results = await asyncio.to_thread(context.config_admin.incremental_alter_configs, resources,
                                      request.validate_only)
    return encode(build(schema.IncrementalAlterConfigsResponse, throttle_time=millis(0), responses=tuple(
        build(schema.AlterConfigsResourceResponse, error_code=kio_error(r.error), error_message=r.message,
              resource_type=r.resource_type, resource_name=r.resource_name) for r in results)))
